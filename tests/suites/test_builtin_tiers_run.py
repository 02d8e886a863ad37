"""``instep run --tier L0/L1 --profile cpu`` end to end: the shipped suites run isolated,
every L1 case stores its triad, and ``instep show --metrics`` reads it back.

Kept small (a -k subset of L1); shares instep's warm TORCHINDUCTOR_CACHE_DIR like the
runner's torch tests.
"""

from __future__ import annotations

import importlib.util
import json

import pytest

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch not installed"),
]


def test_l0_and_l1_subset_on_cpu_record_the_triad(instep):
    l0 = instep("run", "--tier", "L0", "--profile", "cpu", "--run", "l0", "-n", "2")
    assert l0.code == 0, l0.err
    shown = json.loads(instep("show", "l0", "--format", "json").out)
    statuses = {o["case"].split("::")[-1]: o["status"] for o in shown["outcomes"]}
    assert statuses["test_backend_registered_with_dynamo"] == "passed"
    assert statuses["test_device_op_overrides[device]"] == "passed"
    assert statuses["test_import_backend_package"] == "skipped"  # cpu names no package
    assert shown["run"]["settings"]["pytest_args"][0] == "--instep-device=cpu"

    l1 = instep(
        "run",
        "--tier",
        "L1",
        "--profile",
        "cpu",
        "--run",
        "l1",
        "-n",
        "2",
        "-k",
        "pointwise or backward or mark_dynamic or random_statistics",
    )
    assert l1.code == 0, l1.err
    data = json.loads(instep("show", "l1", "--metrics", "--format", "json").out)
    metrics = data["metrics"]
    assert metrics["executed"] == 5
    assert metrics["triad"]["compiled_device"] == {"ok": 5}
    assert metrics["compile_success_rate"] == 1.0 and metrics["semantic_pass_rate"] == 1.0
    assert metrics["generated_kernels"] > 0 and metrics["compile_time_s"] > 0
    check = instep("tier", "check", "l1")
    assert check.code == 0 and "0 unexpected" in check.out


def test_l6_model_figures_are_stored():
    """One model through the benchmark with a cheap backend: figures land in counters."""
    from torch._dynamo.utils import counters

    from instep.suites.models.benchmark import check_model
    from instep.suites.models.zoo import MODELS

    counters.clear()
    figures = check_model(MODELS["mlp"], "cpu", "aot_eager", iters=2, warmup=1)
    assert figures["compile_s"] > 0 and figures["speedup"] > 0
    assert figures["peak_memory_bytes"] > 1e6
    stored = counters["instep"]
    assert stored["triad.compiled_device.ok"] == 1
    assert stored["model.speedup"] == pytest.approx(figures["speedup"])
