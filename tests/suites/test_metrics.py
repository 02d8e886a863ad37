"""Run metrics (seed 10.3) from stored outcomes, and ``instep show RUN --metrics``."""

from __future__ import annotations

import json

from tests.suites.store_fixture import make_run, triad_counters

from instep.suites.case_record import read_case_figures
from instep.suites.metrics import run_metrics

OK3 = triad_counters(eager_cpu="ok", eager_device="ok", compiled_device="ok")


def _metrics(triad: dict, **extra) -> dict:
    return {**triad, **extra, "counters": {**triad["counters"], **extra.get("counters", {})}}


ROWS = [
    (
        "s.py::test_a",
        {
            "status": "passed",
            "metrics": _metrics(
                OK3,
                generated_kernels=3,
                fallbacks=1,
                graph_breaks=0,
                counters={
                    "inductor.extern_calls": 2,
                    "inductor_metrics.ir_nodes_pre_fusion": 9,
                    "instep.model.speedup": 2.0,
                    "instep.model.peak_memory_bytes": 1000.0,
                },
            ),
            "stage_timings": {"_compile.compile_inner": 1.5, "select_algorithm.autotune": 0.25},
        },
    ),
    (
        "s.py::test_b",
        {
            "status": "failed",
            "layer": "numerics",
            "metrics": triad_counters(
                eager_cpu="ok", eager_device="ok", compiled_device="mismatch"
            ),
        },
    ),
    (
        "s.py::test_c",
        {
            "status": "failed",
            "layer": "lowering",
            "metrics": _metrics(
                triad_counters(eager_cpu="ok", eager_device="ok", compiled_device="fail"),
                graph_breaks=2,
            ),
        },
    ),
    (
        "s.py::test_d",
        {
            "status": "failed",
            "layer": "eager",
            "metrics": triad_counters(eager_cpu="ok", eager_device="mismatch"),
        },
    ),
    ("u.py::test_crash", {"status": "crashed", "evidence": {"stack_layer": "codegen"}}),
    ("u.py::test_rt", {"status": "failed", "layer": "runtime", "category": "runtime.launch"}),
    ("u.py::test_new", {"status": "failed"}),
    ("u.py::test_skip", {"status": "skipped"}),
    ("u.py::test_plain", {"status": "passed", "metrics": {"generated_kernels": 1}}),
]


def _outcomes() -> list[dict]:
    return [{"case": n, "final": True, **v} for n, v in ROWS]


def test_case_figures_are_read_back_from_counters():
    figures = read_case_figures(ROWS[0][1]["metrics"])
    assert figures["triad"] == {"eager_cpu": "ok", "eager_device": "ok", "compiled_device": "ok"}
    assert figures["values"] == {"model.speedup": 2.0, "model.peak_memory_bytes": 1000.0}


def test_run_metrics_separate_compile_success_from_semantic_pass():
    m = run_metrics(_outcomes(), planned=10)
    assert m.collected == 10 and m.executed == 9
    # compiled: a, b (mismatch), rt (runtime), plain; failed to compile: c, crash (codegen)
    assert (m.compiled, m.compile_failed, m.not_compiled, m.untriaged) == (4, 2, 1, 1)
    assert m.compile_success_rate == round(4 / 6, 4)
    assert m.semantic_passed == 2 and m.semantic_pass_rate == 0.5
    assert m.crashes == 1 and m.runtime_device_errors == 1
    assert (m.fallbacks, m.extern_calls, m.generated_kernels) == (1, 2, 4)
    assert m.fallback_ratio == 0.2 and m.graph_breaks == 2
    assert m.ir_nodes_per_kernel == 2.25
    assert m.compile_time_s == 1.5 and m.autotune_time_s == 0.25
    assert m.triad["compiled_device"] == {"ok": 1, "mismatch": 1, "fail": 1}
    assert m.triad["eager_device"] == {"ok": 3, "mismatch": 1}
    assert m.failures_by_layer == {
        "numerics": 1,
        "lowering": 1,
        "eager": 1,
        "untriaged": 2,
        "runtime": 1,
    }
    assert m.models == {"s.py::test_a": {"speedup": 2.0, "peak_memory_bytes": 1000.0}}
    assert m.model_speedup_geomean == 2.0 and m.peak_memory_bytes_max == 1000.0


def test_show_metrics_table_and_json(instep, tmp_path):
    db = tmp_path / "r.db"
    make_run(db, "m1", ROWS, tier="L1")
    table = instep("show", "m1", "--db", str(db), "--metrics")
    assert table.code == 0, table.err
    assert "compile success rate" in table.out and "66.7%" in table.out
    assert "semantic pass rate" in table.out and "50.0%" in table.out
    assert "triad compiled_device" in table.out
    data = json.loads(instep("show", "m1", "--db", str(db), "--metrics", "--format", "json").out)
    assert data["run"]["tier"] == "L1"
    assert data["metrics"]["collected"] == 9
    assert data["metrics"]["crashes"] == 1


def test_graph_break_failures_and_unclassified_failures_are_counted():
    outcomes = [
        # fullgraph=True: the break is the failure, Dynamo's counter never moved
        {
            "case": "g.py::test_fullgraph",
            "final": True,
            "status": "failed",
            "layer": "dynamo",
            "category": "dynamo.unsupported",
            "metrics": {"graph_breaks": 0},
        },
        # a break counted by Dynamo in a case that passed
        {
            "case": "g.py::test_breaks",
            "final": True,
            "status": "passed",
            "metrics": {"graph_breaks": 2},
        },
        {
            "case": "g.py::test_unknown",
            "final": True,
            "status": "failed",
            "layer": "lowering",
            "category": "lowering.unclassified",
        },
        {
            "case": "g.py::test_known",
            "final": True,
            "status": "failed",
            "layer": "lowering",
            "category": "lowering.missing_operator",
        },
        {"case": "g.py::test_no_layer", "final": True, "status": "failed"},
    ]
    m = run_metrics(outcomes)
    assert m.graph_breaks == 3
    assert m.unclassified == 1  # lowering.unclassified; the one with no layer is apart
    assert m.untriaged == 1  # no layer at all
