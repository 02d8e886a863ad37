"""The debug re-run's pieces: its environment, artifact kinds, tlparse on PATH or not."""

from __future__ import annotations

import os
import stat

from instep.bundle.debug_rerun import classify_artifacts, debug_environment, run_tlparse
from instep.profiles import load_profile

FAKE_TLPARSE = """#!/bin/sh
# a stand-in with tlparse's command line: tlparse LOG -o OUT --overwrite --no-browser
log="$1"; out="$3"
mkdir -p "$out"
echo "<html>report of $(basename "$log")</html>" > "$out/index.html"
"""


def test_environment_has_debugging_on_and_the_profile_on_top(tmp_path):
    npu = load_profile("npu")
    env = debug_environment(npu, tmp_path, tmp_path / "cache", device="3")
    assert env["TORCH_COMPILE_DEBUG"] == "1"
    assert env["TORCH_TRACE"] == str(tmp_path / "torch_trace")
    assert env["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "cache")
    assert env["TORCH_LOGS"] == npu.debug_env["TORCH_LOGS"]  # the profile's wins
    assert env["ASCEND_LAUNCH_BLOCKING"] == "1"
    assert env["TORCH_DEVICE_BACKEND_AUTOLOAD"] == "0"  # the profile's env
    assert env["ASCEND_RT_VISIBLE_DEVICES"] == "3"  # the device the case ran on


def test_artifact_kinds(tmp_path):
    files = [
        "debug/torch_compile_debug/run_1/torchinductor/model__0_inference_0.0/fx_graph_readable.py",
        "debug/torch_compile_debug/run_1/torchinductor/model__0_inference_0.0/ir_pre_fusion.txt",
        "debug/torch_compile_debug/run_1/torchinductor/model__0_inference_0.0/output_code.py",
        "debug/torch_compile_debug/run_1/torchinductor/aot_model___0_debug.log",
        "debug/torch_compile_debug/run_1/torchdynamo/debug.log",
        "inductor_cache/ab/cab.py",
        "inductor_cache/cd/ccd.cpp",
        "inductor_cache/triton/0/XYZ/triton_poi_0.ttir",
        "inductor_cache/triton/0/XYZ/triton_poi_0.json",
        "torch_trace/dedicated_log_torch_trace_x.log",
        "device_logs/plog/plog-1.log",
        "output.txt",
    ]
    for rel in files:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x")
    kinds = {k: [p.rsplit("/", 1)[-1] for p in v] for k, v in classify_artifacts(tmp_path).items()}
    assert kinds == {
        "fx_graph": ["fx_graph_readable.py"],
        "aot_graphs": ["aot_model___0_debug.log"],
        "inductor_ir": ["ir_pre_fusion.txt"],
        "output_code": ["output_code.py", "cab.py"],
        "kernel_source": ["ccd.cpp", "triton_poi_0.ttir"],
        "kernel_metadata": ["triton_poi_0.json"],
        "compile_logs": ["debug.log"],
        "trace": ["dedicated_log_torch_trace_x.log"],
        "device_logs": ["plog-1.log"],
    }


def test_tlparse_runs_when_on_path_and_is_named_when_not(tmp_path, monkeypatch):
    work = tmp_path / "work"
    (work / "torch_trace").mkdir(parents=True)
    (work / "torch_trace" / "dedicated_log_torch_trace_a.log").write_text("{}\n")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    note = run_tlparse(work)
    assert "tlparse is not on PATH" in note and "pip install tlparse" in note
    assert not (work / "tlparse").exists()

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    exe = bin_dir / "tlparse"
    exe.write_text(FAKE_TLPARSE)
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}/usr/bin:/bin")
    note = run_tlparse(work)
    assert note == "tlparse report of dedicated_log_torch_trace_a.log: tlparse/index.html"
    index = (work / "tlparse" / "index.html").read_text()
    assert "report of dedicated_log_torch_trace_a.log" in index
    assert run_tlparse(tmp_path / "nothing").startswith("no TORCH_TRACE log")
