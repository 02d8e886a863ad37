"""Reproducers: the pytest command of any case, standalone scripts of generated cases."""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys

import pytest

from instep.bundle.reproducer import (
    SuiteArgs,
    pytest_argv,
    shell_line,
    standalone_script,
    suite_args,
)
from instep.suites.tiers import SUITES_DIR

OPINFO = "src/instep/suites/opinfo/test_l5_opinfo.py::test_opinfo[abs-float32]"
SMOKE = "src/instep/suites/smoke/test_l1_smoke.py::test_smoke[zero_dim]"


def test_pytest_command_resolves_the_file_and_keeps_the_run_arguments(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_a.py").write_text("def test_x():\n    pass\n")
    settings = {"cwd": str(tmp_path), "paths": ["tests"], "pytest_args": ["--instep-device=npu"]}
    argv = pytest_argv("tests/test_a.py::test_x[1-2]", settings)
    assert argv == [
        "python", "-m", "pytest", f"{tmp_path}/tests/test_a.py::test_x[1-2]",
        "-p", "no:cacheprovider", "--instep-device=npu",
    ]  # fmt: skip
    line = shell_line(argv, cwd=str(tmp_path), env={"A": "b c"})
    assert line.startswith(f"cd {tmp_path} && A='b c' python -m pytest ")
    assert "'" + f"{tmp_path}/tests/test_a.py::test_x[1-2]" + "'" in line
    # a built-in suite's node id resolves to the installed suite file
    found = pytest_argv(OPINFO, {"cwd": str(tmp_path)})[3]
    assert found == f"{SUITES_DIR}/opinfo/test_l5_opinfo.py::test_opinfo[abs-float32]"


def test_suite_args_from_the_run():
    args = suite_args(
        {"pytest_args": ["--instep-device=npu", "--instep-backend", "npu_be", "--instep-grad=1"]},
        "cpu",
        "inductor",
    )
    assert args == SuiteArgs("npu", "npu_be", "", False, True)
    assert suite_args({}, "cuda", "inductor") == SuiteArgs("cuda", "inductor")


def test_scripts_only_for_generated_cases():
    args = SuiteArgs("npu", "inductor", "torch_npu")
    assert standalone_script("tests/test_x.py::test_y", args) is None
    opinfo = standalone_script(OPINFO, args)
    smoke = standalone_script(SMOKE, args)
    assert opinfo is not None and smoke is not None
    for script in (opinfo, smoke):
        tree = ast.parse(script.source)
        imported = {
            alias.name.split(".")[0]
            for node in ast.walk(tree)
            if isinstance(node, (ast.Import, ast.ImportFrom))
            for alias in (
                node.names if isinstance(node, ast.Import) else [ast.alias(node.module or "")]
            )
        }
        assert "instep" not in imported and "pytest" not in imported
        assert "import torch_npu" in script.source and "DEVICE = 'npu'" in script.source
    assert "run_case(OpCase('abs', 'float32'), DEVICE, BACKEND" in opinfo.source
    assert "test_smoke(name='zero_dim', device=DEVICE, backend=BACKEND)" in smoke.source
    fixture_case = "src/instep/suites/smoke/test_l1_smoke.py::test_unknown_thing"
    assert standalone_script(fixture_case, args) is None


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch not installed")
def test_opinfo_script_runs_without_instep(tmp_path):
    """The script runs the triad in a bare interpreter (no instep on sys.path: -I)."""
    script = standalone_script(OPINFO, SuiteArgs("cpu", "eager"))  # eager: no C++ compile
    assert script is not None
    path = tmp_path / script.name
    path.write_text(script.source)
    proc = subprocess.run(
        [sys.executable, "-I", str(path)], capture_output=True, text=True, timeout=300,
        cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "eager_cpu: ok\neager_device: ok\ncompiled_device: ok" in proc.stdout
    assert "1 sample(s) checked" in proc.stdout
