"""Environment checks in a real subprocess: a source checkout shadowing the installed
backend, device-backend autoload, registrations; the version matrix; the CLI report."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from instep.doctor.env_checks import CheckStatus, require_torch, run_env_checks
from instep.doctor.version_matrix import read_version_matrix
from instep.errors import MissingDependency
from instep.profiles import VersionProbe, load_profile

from .conftest import needs_torch

PKG = "fakebackend"


def _fake_backend(tmp_path: Path) -> tuple[Path, Path]:
    """An 'installed' backend in site/ (with a torch.backends entry point) and a
    same-named source checkout in work/."""
    site, work = tmp_path / "site", tmp_path / "work"
    (site / PKG).mkdir(parents=True)
    (site / PKG / "__init__.py").write_text("__version__ = '1.0'\ndef _autoload():\n    pass\n")
    info = site / f"{PKG}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {PKG}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[torch.backends]\n{PKG} = {PKG}:_autoload\n")
    (work / PKG).mkdir(parents=True)
    (work / PKG / "__init__.py").write_text("__version__ = 'source'\ndef _autoload():\n    pass\n")
    return site, work


def _by_name(checks):
    return {c.name: c for c in checks}


@needs_torch
@pytest.mark.slow
def test_source_checkout_shadowing_the_installed_backend_is_detected(tmp_path):
    site, work = _fake_backend(tmp_path)
    profile = load_profile("cpu").model_copy(update={"backend_package": PKG})
    env = {"PYTHONPATH": str(site)}
    checks = _by_name(run_env_checks(profile, cwd=str(work), env=env))
    shadow = checks["shadowing"]
    assert shadow.status is CheckStatus.FAIL, shadow
    assert str(work / PKG) in shadow.detail and str(site / PKG) in shadow.detail
    assert shadow.data["found"] == str((work / PKG / "__init__.py").resolve())
    assert checks[f"import {PKG}"].data["file"] == str(work / PKG / "__init__.py")
    autoload = checks["autoload"]
    assert (
        autoload.status is CheckStatus.WARN and "TORCH_DEVICE_BACKEND_AUTOLOAD=0" in autoload.detail
    )
    assert checks["import torch"].status is CheckStatus.OK
    assert checks["dynamo_backend"].status is CheckStatus.OK
    assert checks["device_op_overrides[cpu]"].status is CheckStatus.OK
    assert checks["device_interface[cpu]"].status is CheckStatus.OK

    # from another directory, with autoload off: no shadow, no autoload warning; and a
    # device nobody registered fails its registration checks (seed 000 6.2)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env_off = {**env, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}
    profile = profile.model_copy(update={"device_type": "nodevice"})
    checks = _by_name(run_env_checks(profile, cwd=str(elsewhere), env=env_off))
    assert checks["shadowing"].status is CheckStatus.OK
    assert checks["autoload"].status is CheckStatus.OK and "disabled" in checks["autoload"].detail
    assert checks[f"import {PKG}"].data["file"] == str(site / PKG / "__init__.py")
    assert checks["device_op_overrides[cpu]"].status is CheckStatus.OK
    missing = checks["device_op_overrides[nodevice]"]
    assert missing.status is CheckStatus.FAIL and "KeyError" in missing.detail
    assert "cpu" in missing.data["registered"]
    assert checks["device_interface[nodevice]"].status is CheckStatus.FAIL
    assert checks["inductor_scheduling[nodevice]"].status is CheckStatus.FAIL


def test_version_matrix_probes_of_every_kind(tmp_path, monkeypatch):
    (tmp_path / "version.cfg").write_text("toolkit_installed_version=[8.1.RC1:8.1.0]\n")
    monkeypatch.setenv("INSTEP_TEST_DRIVER", "24.1.0")
    probes = [
        VersionProbe(**p)
        for p in [
            {"name": "python", "python": "import sys; print(sys.version.split()[0])"},
            {"name": "json", "module": "string"},  # no __version__: an error, not a crash
            {"name": "enc", "module": "json", "attribute": "encoder.__name__"},
            {
                "name": "cann",
                "file": str(tmp_path / "version.cfg"),
                "regex": r"toolkit_installed_version=\[?([\w.:-]+)",
            },
            {"name": "absent", "file": str(tmp_path / "nope.cfg")},
            {"name": "driver", "env": "INSTEP_TEST_DRIVER"},
            {"name": "echo", "command": [sys.executable, "-c", "print('7.0')"]},
            {"name": "required", "python": "raise SystemExit('no')", "optional": False},
        ]
    ]
    profile = load_profile("cpu").model_copy(update={"version_probes": probes})
    matrix = read_version_matrix(profile)
    assert matrix.get("python") == f"{sys.version_info[0]}.{sys.version_info[1]}." + str(
        sys.version_info[2]
    )
    assert matrix.get("json") is None and "AttributeError" in matrix.probes[1].error
    assert matrix.get("enc") == "json.encoder"
    assert matrix.get("cann") == "8.1.RC1:8.1.0"
    assert matrix.get("absent") is None and "not found" in matrix.probes[4].error
    assert matrix.get("driver") == "24.1.0"
    assert matrix.get("echo") == "7.0"
    flat = matrix.flat()
    assert list(flat["errors"]) == ["required"]


def test_without_torch_the_doctor_says_so_in_one_line(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    with pytest.raises(MissingDependency, match="needs 'torch', which is not installed"):
        require_torch(python, "instep doctor env")


def test_cli_without_torch_exits_2_with_one_line(tmp_path, instep):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    script = tmp_path / "s.py"
    script.write_text("print('hi')\n")
    for args in (
        ("doctor", "env", "--python", python),
        ("doctor", "compile", "--", python, str(script)),
    ):
        result = instep(*args)
        assert result.code == 2, result
        lines = result.err.strip().splitlines()
        assert len(lines) == 1 and "needs 'torch', which is not installed" in lines[0]


@needs_torch
@pytest.mark.slow
def test_cli_env_report_as_json_with_the_api_scan(tmp_path, instep, monkeypatch):
    site, _work = _fake_backend(tmp_path)
    monkeypatch.setenv("PYTHONPATH", str(site))
    test = tmp_path / "test_mismatch.py"
    test.write_text(
        textwrap.dedent(
            """\
            import torch
            from torch._inductor.codecache import cpp_prefix_path
            """
        )
    )
    (tmp_path / "instep.toml").write_text(
        f'[profiles.fake]\nextends = "cpu"\nbackend_package = "{PKG}"\n'
    )
    out = tmp_path / "report.json"
    result = instep("doctor", "env", "--profile", "fake", "--tests", str(test), "--json", str(out))
    assert result.code == 1, result.err
    assert f"{test}:2: torch._inductor.codecache.cpp_prefix_path" in result.out
    assert "problems found" in result.out
    data = json.loads(out.read_text())
    assert data["ok"] is False and data["profile"] == "fake"
    names = {p["name"]: p for p in data["version_matrix"]["probes"]}
    assert names["torch"]["value"].startswith("2.")
    checks = {c["name"]: c for c in data["checks"]}
    assert checks["shadowing"]["status"] == "ok"  # tmp_path is not a checkout of it
    missing = data["api_scan"]["missing"]
    assert [(m["path"], m["line"], m["target"]) for m in missing] == [
        (str(test), 2, "torch._inductor.codecache.cpp_prefix_path")
    ]
