"""Real torch cases in the pre-imported fork server: compile counters and compiler chains.

Kept few and tiny: one Inductor compile (CPU, C++), sharing the run's warm
TORCHINDUCTOR_CACHE_DIR under instep's cache dir.
"""

from __future__ import annotations

import importlib.util

import pytest
from tests.run.cases import by_case, show, write

from instep.suites.metrics import compile_seconds

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch not installed"),
]

TORCH_CASES = """
import torch
import torch._dynamo  # as upstream suites do: the fork server then warms Inductor too

def f(x):
    return (x.sin() + 1).relu()

def test_inductor_compiles():
    compiled = torch.compile(f, backend="inductor")
    x = torch.randn(8)
    torch.testing.assert_close(compiled(x), f(x))

def test_compile_then_reset_as_upstream_check_model_does():
    compiled = torch.compile(lambda x: x.cos() - 3, backend="inductor")
    torch.testing.assert_close(compiled(torch.ones(5)), torch.ones(5).cos() - 3)
    torch._dynamo.reset()  # clears Dynamo's compilation_time_metrics

def test_graph_break_is_counted():
    def g(x):
        print("graph break here")
        return x + 1
    torch.compile(g, backend="eager")(torch.ones(2))

def test_backend_failure_keeps_the_inner_exception():
    def broken_backend(gm, example_inputs):
        raise NotImplementedError("no lowering for aten.sin on this device")
    torch.compile(f, backend=broken_backend)(torch.ones(2))

def test_torch_segfault_in_a_forked_case():
    import ctypes
    torch.ones(1)
    ctypes.string_at(0)
"""


def test_torch_cases_in_case_isolation(instep, tmp_path):
    write(tmp_path, "test_torch_cases.py", TORCH_CASES)
    result = instep(
        "run", "test_torch_cases.py", "--isolate", "case", "--workers", "2", "--run", "torch"
    )
    assert result.code == 1, result.err
    data = show(instep, "torch")
    assert data["run"]["version_matrix"]["torch"].startswith("2.")
    out = by_case(data)

    compiled = out["test_inductor_compiles"]
    assert compiled["status"] == "passed", compiled["longrepr"]
    assert compiled["metrics"]["generated_kernels"] >= 1
    assert compiled["stage_timings"]  # Dynamo's compilation_time_metrics, per case

    reset = out["test_compile_then_reset_as_upstream_check_model_does"]
    assert reset["status"] == "passed", reset["longrepr"]
    stages = reset["evidence"]["compile_stages"]  # instep's own records survive the reset
    assert stages.get("dynamo", 0) > 0 and stages.get("aot", 0) > 0
    assert not reset["stage_timings"], reset["stage_timings"]  # what the reset took away
    assert compile_seconds(reset)[0] == pytest.approx(
        sum(v for k, v in stages.items() if k != "first_run")
    )

    broken = out["test_graph_break_is_counted"]
    assert broken["status"] == "passed"
    assert broken["metrics"]["graph_breaks"] >= 1

    failed = out["test_backend_failure_keeps_the_inner_exception"]
    assert failed["status"] == "failed"
    chain = failed["exception_chain"]
    assert chain[0]["type"] == "torch._dynamo.exc.BackendCompilerFailed"
    inner = [c for c in chain if c["relation"] == "inner"]
    assert inner and inner[0]["type"] == "NotImplementedError"
    assert inner[0]["frames"][-1]["function"] == "broken_backend"
    modules = {f["module"] for c in chain for f in c["frames"]}
    assert any(m and m.startswith("torch._dynamo") for m in modules)

    crashed = out["test_torch_segfault_in_a_forked_case"]
    assert crashed["status"] == "crashed" and crashed["signal"] == "SIGSEGV"


HANGING_COMPILE = """
import time
import torch
import torch._inductor.config as inductor_config

def stuck_pass(graph):
    time.sleep(120)  # a compile that never finishes, inside Inductor's post-grad passes

def test_compile_hangs_in_a_pass():
    inductor_config.post_grad_custom_post_pass = stuck_pass
    torch.compile(lambda x: x.cos() * 2, backend="inductor")(torch.ones(4))
"""


def test_a_timed_out_compile_carries_the_stage_it_was_in(instep, tmp_path):
    write(tmp_path, "test_hang.py", HANGING_COMPILE)
    result = instep("run", "test_hang.py", "--run", "hang", "--timeout", "25")
    assert result.code == 1, result.err
    case = by_case(show(instep, "hang"))["test_compile_hangs_in_a_pass"]
    assert case["status"] == "timeout"
    assert case["stage"] == "lowering", case  # the doctor's stage, not the pytest phase
    evidence = case["evidence"]
    assert evidence["pytest_phase"] == "call"
    assert evidence["compile_stage"] == "lowering"
    assert "post_grad" in evidence["compile_event"]
    assert "compile stage lowering" in case["message"]
