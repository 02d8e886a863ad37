"""The loop on two real torch releases: impact, tests chosen from it, failures traced back.

``downstream_2_13/`` is a small backend package written against torch 2.13.0 in the
patterns torch_npu uses (its README names each upstream change, file:line in both
releases). Its cases pass on 2.13.0 and fail on 2.14.1. This test, as a user would:

1. ``instep impact --upstream-old torch==2.13.0 --upstream-new torch==2.14.1`` on it;
2. in a fresh virtual environment with torch 2.14.1 and instep installed,
   ``instep run --impact`` (the cases the report suggests) then
   ``instep triage --impact``;
and checks that every failure's first culprit is the upstream unit that broke it.

Needs ``INSTEP_REALWORLD=1`` (the wheels and torch 2.14.1 come through pip; CI sets it):
about three minutes, most of it installing torch 2.14.1 and compiling on CPU.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import instep

pytestmark = [pytest.mark.realworld, pytest.mark.slow]

PACKAGE = Path(__file__).with_name("downstream_2_13")

#: case -> the unit of the 2.13.0 -> 2.14.1 release report that broke it
IR, LOWERING = "torch/_inductor/ir.py", "torch/_inductor/lowering.py"
EXPECTED = {
    "tests/case_moved_import.py::test_cond_lowering_module_imports": f"{IR}::Conditional",
    "tests/case_moved_import.py::test_cond_lowering_compiles": f"{IR}::Conditional",
    "tests/case_monkeypatch.py::test_make_reduction_monkeypatch_sum": LOWERING,
    "tests/case_monkeypatch.py::test_reduction_create_monkeypatch_amax": f"{IR}::Reduction",
    "tests/case_wrapper_override.py::test_wrapper_override_codegen_inputs": (
        "torch/_inductor/codegen/wrapper.py::PythonWrapperCodegen"
    ),
}


def _check(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, capture_output=True, text=True, **kw)
    assert proc.returncode == 0, f"{cmd[:4]}: {proc.stdout[-2000:]}{proc.stderr[-3000:]}"
    return proc


@pytest.fixture(scope="module")
def venv_214(tmp_path_factory) -> Path:
    """A virtual environment with torch 2.14.1 and this instep (as a user installs them)."""
    if os.environ.get("INSTEP_REALWORLD") != "1":
        pytest.skip("the real-release loop needs INSTEP_REALWORLD=1 (pip installs torch 2.14.1)")
    venv = tmp_path_factory.mktemp("venv214")
    _check([sys.executable, "-m", "venv", str(venv)])
    pip = [
        str(venv / "bin" / "python"),
        "-m",
        "pip",
        "install",
        "-q",
        "--disable-pip-version-check",
    ]
    _check([*pip, "torch==2.14.1", "numpy", "pytest"], timeout=1200)
    root = Path(instep.__file__).resolve().parents[2]  # the checkout instep runs from
    _check([*pip, "-e", str(root)], timeout=600)
    return venv


def test_every_failure_is_traced_to_the_upstream_unit_that_broke_it(venv_214, tmp_path):
    down = shutil.copytree(PACKAGE, tmp_path / "down")
    report = tmp_path / "impact.json"
    env = {
        **os.environ,
        "INSTEP_CACHE_DIR": os.environ.get("INSTEP_CACHE_DIR", str(tmp_path / "c")),
    }
    _check(
        [
            sys.executable,
            "-m",
            "instep",
            "impact",
            "--upstream-old",
            "torch==2.13.0",
            "--upstream-new",
            "torch==2.14.1",
            "--downstream",
            str(down),
            "--format",
            "json",
            "--out",
            str(report),
        ],
        env=env,
        timeout=900,
    )
    doc = json.loads(report.read_text())
    units = {u["id"]: u for u in doc["units"]}
    assert set(EXPECTED.values()) <= set(units)
    # the failures traced here are the package's own cases: the OpInfo and smoke cases
    # the report also suggests (tests/impact/test_runnable_suggestions.py runs one) are
    # left out, so that the run's failures are the package's (the venv has no expecttest)
    for unit in doc["units"]:
        unit["suggested_tests"] = [
            t for t in unit["suggested_tests"] if not t.startswith(("instep:", "opinfo:"))
        ]
    report.write_text(json.dumps(doc), encoding="utf-8")

    python = str(venv_214 / "bin" / "python")
    env = {**env, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor"), "COLUMNS": "250"}
    db = str(tmp_path / "loop.db")
    ran = subprocess.run(
        [
            python,
            "-m",
            "instep",
            "run",
            "--impact",
            str(report),
            "--profile",
            "cpu",
            "-n",
            "1",
            "--run",
            "after",
            "--db",
            db,
        ],
        cwd=down,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert ran.returncode == 1, ran.stdout[-3000:] + ran.stderr[-3000:]
    triaged = _check(
        [
            python,
            "-m",
            "instep",
            "triage",
            "after",
            "--impact",
            str(report),
            "--db",
            db,
            "--format",
            "json",
        ],
        cwd=down,
        env=env,
        timeout=300,
    )
    culprits = json.loads(triaged.stdout)["culprits"]
    assert set(culprits) == set(EXPECTED), sorted(culprits)
    for case, unit in EXPECTED.items():
        first = culprits[case][0]
        assert first["unit"] == unit, (case, [a["unit"] for a in culprits[case]])
        assert first["confidence"] in ("high", "medium"), (case, first)
