"""Each run metric against what a real, triaged run stored (real compiles on CPU).

The figures are read back as a user reads them (``instep show RUN --metrics``) and checked
against the stored evidence of the cases (``instep show RUN --format json``), so a metric
that reads the wrong field, or none, shows up as a difference.
"""

from __future__ import annotations

import importlib.util

import pytest
from tests.suites.compiled_run import CompiledRun, make_compiled_run

from instep.outcome import FAILING

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch not installed"),
]


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> CompiledRun:
    return make_compiled_run(tmp_path_factory.mktemp("metrics-run"))


@pytest.fixture(scope="module")
def stored(run):
    return run.outcomes(), run.metrics()


def _stage_sum(outcome, keep) -> float:
    stages = (outcome.get("evidence") or {}).get("compile_stages") or {}
    return sum(v for k, v in stages.items() if keep(k))


def test_compile_time_is_the_sum_of_the_stored_compile_stages(stored):
    outcomes, metrics = stored
    expected = sum(_stage_sum(o, lambda k: k != "first_run") for o in outcomes.values())
    assert expected > 0.1
    assert metrics["compile_time_s"] == pytest.approx(expected, abs=0.002)
    # a failed compile's stages count too: the fullgraph case spent time in Dynamo
    failed = outcomes["test_graph_break_under_fullgraph"]
    assert _stage_sum(failed, lambda k: k == "dynamo") > 0


def test_autotune_time_is_the_stored_autotune_stage(stored):
    outcomes, metrics = stored
    tuned = outcomes["test_backend_autotunes"]
    assert tuned["status"] == "passed", tuned.get("longrepr")
    assert tuned["evidence"]["compile_stages"]["autotune"] >= 0.2  # the backend slept 0.2 s
    expected = sum(_stage_sum(o, lambda k: k == "autotune") for o in outcomes.values())
    assert metrics["autotune_time_s"] == pytest.approx(expected, abs=0.002)
    assert metrics["autotune_time_s"] < metrics["compile_time_s"]


def test_graph_breaks_count_the_counter_and_the_failure_that_is_a_break(stored):
    outcomes, metrics = stored
    counted = outcomes["test_graph_break_counted"]
    assert counted["status"] == "passed" and counted["metrics"]["graph_breaks"] >= 1
    fullgraph = outcomes["test_graph_break_under_fullgraph"]
    assert fullgraph["status"] == "failed"
    assert (fullgraph["layer"], fullgraph["category"]) == ("dynamo", "dynamo.unsupported")
    assert not fullgraph["metrics"].get("graph_breaks")  # Dynamo raised before counting
    counters = sum(int(o["metrics"].get("graph_breaks") or 0) for o in outcomes.values())
    assert metrics["graph_breaks"] == counters + 1


def test_unclassified_counts_failures_without_a_root_cause_category(stored):
    outcomes, metrics = stored
    unknown = outcomes["test_unrecognised_failure"]
    assert unknown["category"].endswith(".unclassified")
    unclassified = sorted(
        name
        for name, o in outcomes.items()
        if o["status"] in FAILING
        and o["layer"]
        and (o["category"] or ".unclassified").endswith(".unclassified")
    )
    # the graph break has a known root cause; the other two failures do not
    assert unclassified == ["test_backend_fails_to_compile", "test_unrecognised_failure"]
    assert metrics["unclassified"] == 2


def test_untriaged_counts_failures_left_without_a_layer(stored):
    outcomes, metrics = stored
    failures = [o for o in outcomes.values() if o["status"] in FAILING]
    assert len(failures) == 3
    # instep triage gave every failure a layer: none is left untriaged
    assert all(o["layer"] for o in failures)
    assert metrics["untriaged"] == 0
    assert "untriaged" not in metrics["failures_by_layer"]


def test_compiled_and_failed_to_compile(stored):
    outcomes, metrics = stored
    assert outcomes["test_inductor_compiles"]["metrics"]["generated_kernels"] >= 1
    # compiled: inductor, the tuning backend, the counted break; failed: the fullgraph break
    # and the backend that raised; the unrecognised failure is eager (never compiled)
    assert (metrics["compiled"], metrics["compile_failed"]) == (3, 2)
    assert metrics["compile_success_rate"] == 0.6
    assert metrics["generated_kernels"] >= 1
