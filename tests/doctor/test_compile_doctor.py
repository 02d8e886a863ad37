"""``instep doctor compile``: the bootstrap, the watchdog and the stage timings in a child.

The fast tests drive the active recorder by hand from the child script (no torch); the
slow one compiles for real on CPU with a sleep in a custom post-grad FX pass.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap

import pytest

from instep.doctor.compile_session import TIMEOUT_EXIT, run_compile_doctor, split_command
from instep.errors import BadInput, MissingInput

from .conftest import needs_torch

HAND_FED = """\
import sys, time
from instep.doctor import compile_hooks

rec = compile_hooks.active_recorder()
rec.event_start("dynamo", "0/0")
rec.event_start("Scheduler.__init__", "0/0")
print("argv", sys.argv[1:], flush=True)
time.sleep(float(sys.argv[1]))
rec.event_end("Scheduler.__init__")
rec.event_end("dynamo")
sys.exit(int(sys.argv[2]))
"""

SLOW_PASS = """\
import sys
import time

import torch
import torch._inductor.config as inductor_config


def slow_pass(graph):
    time.sleep(float(sys.argv[1]))


inductor_config.post_grad_custom_post_pass = slow_pass
inductor_config.fx_graph_cache = False  # the lowering must run, cache or not


def f(x):
    return (x.sin() + 1).sum(1)


print(torch.compile(f)(torch.randn(8, 8)).shape)
"""


def test_a_stuck_compile_is_reported_and_a_timeout_keeps_its_stage(tmp_path):
    script = tmp_path / "stuck.py"
    script.write_text(HAND_FED)
    result = run_compile_doctor(
        [sys.executable, str(script), "600", "0"], threshold_s=0.3, repeat_s=0.5, timeout_s=4
    )
    assert result.timed_out and result.exit_code == TIMEOUT_EXIT
    assert result.stage_at_end == "scheduling"
    assert result.active[0]["event"] == "Scheduler.__init__"
    assert result.active[0]["layer"] == "scheduler"
    slow = [r for r in result.snapshot["reports"] if r["kind"] == "slow_compile"]
    assert len(slow) >= 2  # reported, then again periodically
    assert all(r["stage"] == "scheduling" for r in slow)
    assert slow[0]["pid"] == result.snapshot["pid"] != os.getpid()
    stacks = "\n".join(slow[0]["stacks"].values())
    assert "stuck.py" in stacks and "time.sleep" in stacks


def test_the_script_runs_as_main_with_its_argv_and_exit_code(tmp_path, capfd):
    script = tmp_path / "quick.py"
    script.write_text(HAND_FED)
    result = run_compile_doctor([sys.executable, str(script), "0.2", "3"], threshold_s=60)
    assert result.exit_code == 3 and not result.timed_out
    assert "argv ['0.2', '3']" in capfd.readouterr().out
    graph = result.graphs[0]
    assert graph["compile_id"] == "0/0" and graph["ended"] is not None
    assert graph["stages"]["scheduling"] >= 0.2
    assert result.snapshot["reports"] == [] and result.active == []


def test_cli_doctor_compile_timeout(tmp_path, instep):
    script = tmp_path / "stuck.py"
    script.write_text(HAND_FED)
    out = tmp_path / "timings.json"
    args = ["--threshold", "0.3", "--timeout", "3", "--json", str(out)]
    result = instep("doctor", "compile", *args, "--", "python", str(script), "600", "0")
    assert result.code == TIMEOUT_EXIT
    assert "timed out after 3.0s, in stage scheduling" in " ".join(result.err.split())
    data = json.loads(out.read_text())
    assert data["timed_out"] is True and data["stage_at_end"] == "scheduling"


PRINT_CACHE = """\
import os, pathlib
cache = pathlib.Path(os.environ["TORCHINDUCTOR_CACHE_DIR"])
print("cache", cache, flush=True)
(cache / "artifact").write_text("x")
"""


def test_the_callers_inductor_cache_wins_and_its_state_is_recorded(tmp_path, monkeypatch, capfd):
    """A caller's TORCHINDUCTOR_CACHE_DIR is used even when the profile sets another, and
    the result says which cache it was and whether it was empty when the command started."""
    script = tmp_path / "cache.py"
    script.write_text(PRINT_CACHE)
    mine, profiles = tmp_path / "mine", tmp_path / "profiles"
    mine.mkdir()
    profiles.mkdir()
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(mine))
    env = {"TORCHINDUCTOR_CACHE_DIR": str(profiles)}
    first = run_compile_doctor([sys.executable, str(script)], threshold_s=60, env=env)
    assert first.exit_code == 0
    assert f"cache {mine}" in capfd.readouterr().out
    assert first.as_dict()["inductor_cache_dir"] == str(mine)
    assert first.as_dict()["inductor_cache_empty_at_start"] is True
    second = run_compile_doctor([sys.executable, str(script)], threshold_s=60, env=env)
    assert second.cache == {"inductor_cache_dir": str(mine), "inductor_cache_empty_at_start": False}
    assert not any(profiles.iterdir())


def test_cli_doctor_compile_prints_the_cache_it_used(tmp_path, monkeypatch, instep):
    script = tmp_path / "cache.py"
    script.write_text(PRINT_CACHE)
    (tmp_path / "c").mkdir()
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "c"))
    result = instep("doctor", "compile", "--", "python", str(script))
    assert result.code == 0
    assert f"Inductor cache: {tmp_path / 'c'} (empty at start)\n" in result.err


def test_command_lines(tmp_path):
    script = tmp_path / "s.py"
    script.write_text("")
    assert split_command(["python", "-u", str(script), "a"])[1] == [str(script), "a"]
    assert split_command(["python", "-m", "pytest", "-x"])[1] == ["-m", "pytest", "-x"]
    assert split_command([str(script), "b"]) == (sys.executable, [str(script), "b"])
    tool = tmp_path / "tool"
    tool.write_text(f"#!{sys.executable}\nprint('x')\n")
    tool.chmod(0o755)
    assert split_command([str(tool), "c"]) == (sys.executable, [str(tool), "c"])
    with pytest.raises(BadInput, match="give a command"):
        split_command([])
    with pytest.raises(MissingInput, match="does not exist"):
        split_command(["python", str(tmp_path / "absent.py")])
    with pytest.raises(BadInput, match="not a Python program"):
        split_command(["/bin/sh", "-c", "true"])


@needs_torch
@pytest.mark.slow
def test_watchdog_reports_a_slow_fx_pass_in_the_lowering_stage(tmp_path, inductor_cache):
    script = tmp_path / "slow_pass.py"
    script.write_text(textwrap.dedent(SLOW_PASS))
    result = run_compile_doctor(
        [sys.executable, str(script), "4"],
        threshold_s=1.5,
        repeat_s=1.0,
        env={"TORCHINDUCTOR_CACHE_DIR": inductor_cache},
    )
    assert result.exit_code == 0, result.snapshot
    reports = [r for r in result.snapshot["reports"] if r["kind"] == "slow_compile"]
    custom = "pass.post_grad_passes.post_grad_custom_post_pass"
    in_pass = [r for r in reports if r["compile"]["event"] == custom]
    assert in_pass, [r["compile"]["event"] for r in reports]
    first = in_pass[0]
    assert first["stage"] == "lowering" and first["compile"]["layer"] == "lowering"
    assert "slow_pass.py" in first["compile"]["name"]
    assert first["pid"] == result.snapshot["pid"] != os.getpid()
    assert "slow_pass" in "\n".join(first["stacks"].values())
    [graph] = result.graphs
    stages = graph["stages"]
    assert stages["lowering"] >= 4.0
    for stage in ("dynamo", "aot", "scheduling", "codegen", "kernel_compile"):
        assert stages.get(stage, 0) > 0, stage
    assert graph["first_run_s"] is not None
    assert any(k.startswith("cpp_fused") for k in graph["kernels"]), graph["kernels"]
