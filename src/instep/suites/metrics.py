"""Run metrics of seed 000, 10.3, computed from a run's stored outcomes.

The pass rate alone hides fallback growth and performance loss, so a run is summarised
by: cases collected, compile success rate, semantic pass rate, crashes and time-outs,
runtime device errors, fallbacks (count and ratio to generated kernels), graph breaks,
generated kernels (and IR nodes per kernel, a fusion figure), compile and autotune time,
and the L6 models' speedup and peak memory. Every figure is derived from the outcomes'
stored fields (status, layer, ``metrics`` counters, ``stage_timings``, the suites' triad
in ``metrics.counters`` -- see ``case_record.py``); nothing is measured here and nothing
is written: ``instep show RUN --metrics`` renders :func:`run_metrics`.

Definitions. A case *compiled* when its compiled leg ran (the triad says ``ok`` or
``mismatch``), or, for suites without a triad, when it passed or failed at ``runtime`` or
``numerics``; it *failed to compile* when the compiled leg raised, or it failed (or
crashed) at a compile layer (``registration`` .. ``kernel_compile``). Failures with no
layer yet (not triaged) are counted apart as ``untriaged`` and left out of both rates;
failures with a layer but no known root cause (category ``*.unclassified``, or none) are
``unclassified``; the two counts are disjoint. Graph breaks are Dynamo's counters plus the
failures that are a graph break (``dynamo.unsupported``: under ``fullgraph=True`` Dynamo
raises before its counter moves). Compile and autotune time sum the stage records the case
process stores (``evidence.compile_stages``, ``instep.doctor.stage_timing``), failed
compiles included; the compiled graph's first run is not compile time.
The semantic pass rate is the share of compiled cases whose result was right.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from instep.outcome import FAILING, MANIFESTATIONS, PASSING, OutcomeRecord, Status, records
from instep.suites.case_record import read_case_figures

COMPILE_LAYERS = frozenset(
    {
        "registration",
        "dynamo",
        "aot",
        "decomposition",
        "lowering",
        "scheduler",
        "codegen",
        "kernel_compile",
    }
)
AFTER_COMPILE_LAYERS = frozenset({"runtime", "numerics"})
BEFORE_COMPILE_LAYERS = frozenset({"env", "eager"})
#: stage_timings keys that are whole compiles (Dynamo's entry; a lazy backward compile).
COMPILE_TIME_KEYS = ("_compile.compile_inner", "compile_fx.<locals>.bw_compiler")
AUTOTUNE_MARKERS = ("autotune", "select_algorithm", "benchmark_")
#: Failures that are a graph break (Dynamo's Unsupported under ``fullgraph=True``): counted
#: as graph breaks even when Dynamo's counter did not move before it raised.
GRAPH_BREAK_CATEGORIES = frozenset({"dynamo.unsupported"})
FIRST_RUN_STAGE = "first_run"  # a compiled graph's first call: running, not compiling


@dataclass
class RunMetrics:
    collected: int = 0
    executed: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    compiled: int = 0
    compile_failed: int = 0
    not_compiled: int = 0
    untriaged: int = 0
    unclassified: int = 0
    compile_success_rate: float | None = None
    semantic_passed: int = 0
    semantic_pass_rate: float | None = None
    crashes: int = 0
    timeouts: int = 0
    runtime_device_errors: int = 0
    fallbacks: int = 0
    extern_calls: int = 0
    generated_kernels: int = 0
    fallback_ratio: float | None = None
    graph_breaks: int = 0
    ir_nodes_per_kernel: float | None = None
    compile_time_s: float = 0.0
    autotune_time_s: float = 0.0
    triad: dict[str, dict[str, int]] = field(default_factory=dict)
    failures_by_layer: dict[str, int] = field(default_factory=dict)
    models: dict[str, dict[str, float]] = field(default_factory=dict)
    model_speedup_geomean: float | None = None
    peak_memory_bytes_max: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _compile_state(outcome: OutcomeRecord, triad: dict[str, str]) -> str:
    """``compiled``, ``compile_failed``, ``not_compiled``, ``untriaged`` or ``skipped``."""
    status = outcome.status
    if status is Status.SKIPPED:
        return "skipped"
    if "compiled_device" in triad:
        return "compile_failed" if triad["compiled_device"] == "fail" else "compiled"
    if triad and status in FAILING and status not in MANIFESTATIONS:
        return "not_compiled"  # an eager leg failed first
    if status in PASSING:
        return "compiled"
    if status is Status.XFAILED:
        return "skipped"
    layer = outcome.layer or outcome.evidence.get("stack_layer")
    if layer in COMPILE_LAYERS:
        return "compile_failed"
    if layer in AFTER_COMPILE_LAYERS:
        return "compiled"
    if layer in BEFORE_COMPILE_LAYERS:
        return "not_compiled"
    return "untriaged"


def _semantic_ok(outcome: OutcomeRecord, triad: dict[str, str]) -> bool:
    if "compiled_device" in triad and triad["compiled_device"] != "ok":
        return False
    return outcome.status in PASSING


def compile_seconds(outcome: OutcomeRecord | dict[str, Any]) -> tuple[float, float]:
    """Compile and autotune seconds of one case.

    From instep's own stage records (``evidence.compile_stages``: every stage but the
    compiled graph's first run) when the case has them: Dynamo's
    ``compilation_time_metrics`` (``stage_timings``) are cleared by
    ``torch._dynamo.reset()``, which upstream tests call in the middle of a case. Else
    from ``stage_timings``."""
    (record,) = records([outcome])
    stages = record.evidence.get("compile_stages") or {}
    if stages:
        compile_s = sum(float(v) for k, v in stages.items() if k != FIRST_RUN_STAGE)
        return compile_s, float(stages.get("autotune") or 0.0)
    timings = record.stage_timings
    compile_s = sum(float(timings.get(k) or 0.0) for k in COMPILE_TIME_KEYS)
    autotune_s = sum(float(v) for k, v in timings.items() if any(t in k for t in AUTOTUNE_MARKERS))
    return compile_s, autotune_s


def _rate(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def run_metrics(
    outcomes: Iterable[OutcomeRecord | dict[str, Any]], planned: int | None = None
) -> RunMetrics:
    """The seed 10.3 metrics of the final outcomes of one run (records or store rows)."""
    m = RunMetrics()
    final = [o for o in records(outcomes) if o.final]
    m.collected = planned if planned is not None else len(final)
    m.executed = len(final)
    m.statuses = dict(Counter(o.status.value for o in final))
    states: Counter[str] = Counter()
    legs: dict[str, Counter[str]] = {}
    layers: Counter[str] = Counter()
    nodes_pre_fusion = 0
    speedups: list[float] = []
    for o in final:
        figures = read_case_figures(o.metrics)
        triad = figures["triad"]
        for leg, state in triad.items():
            legs.setdefault(leg, Counter())[state] += 1
        state = _compile_state(o, triad)
        states[state] += 1
        if state == "compiled" and _semantic_ok(o, triad):
            m.semantic_passed += 1
        status = o.status
        m.crashes += status is Status.CRASHED
        m.timeouts += status is Status.TIMEOUT
        if o.failing:
            layers[o.layer or "untriaged"] += 1
            category = o.category or ""
            # a failure without a layer is untriaged, not unclassified: counted once
            m.unclassified += bool(o.layer) and (not category or category.endswith(".unclassified"))
            if o.layer == "runtime" or category.startswith("runtime"):
                m.runtime_device_errors += 1
        metrics = o.metrics
        counters = metrics.get("counters") or {}
        m.fallbacks += int(metrics.get("fallbacks") or 0)
        m.extern_calls += int(counters.get("inductor.extern_calls") or 0)
        m.generated_kernels += int(metrics.get("generated_kernels") or 0)
        breaks = int(metrics.get("graph_breaks") or 0)
        if o.failing and o.category in GRAPH_BREAK_CATEGORIES:
            breaks = max(breaks, 1)  # under fullgraph=True the break is the failure itself
        m.graph_breaks += breaks
        nodes_pre_fusion += int(counters.get("inductor_metrics.ir_nodes_pre_fusion") or 0)
        compile_s, autotune_s = compile_seconds(o)
        m.compile_time_s += compile_s
        m.autotune_time_s += autotune_s
        model = {
            k[len("model.") :]: v for k, v in figures["values"].items() if k.startswith("model.")
        }
        if model:
            m.models[o.case] = model
            if model.get("speedup", 0) > 0:
                speedups.append(model["speedup"])
    m.compiled = states["compiled"]
    m.compile_failed = states["compile_failed"]
    m.not_compiled = states["not_compiled"]
    m.untriaged = states["untriaged"]
    m.compile_success_rate = _rate(m.compiled, m.compiled + m.compile_failed)
    m.semantic_pass_rate = _rate(m.semantic_passed, m.compiled)
    m.fallback_ratio = _rate(m.fallbacks, m.fallbacks + m.generated_kernels)
    m.ir_nodes_per_kernel = (
        round(nodes_pre_fusion / m.generated_kernels, 3) if m.generated_kernels else None
    )
    m.compile_time_s = round(m.compile_time_s, 3)
    m.autotune_time_s = round(m.autotune_time_s, 3)
    m.triad = {leg: dict(c) for leg, c in sorted(legs.items())}
    m.failures_by_layer = dict(layers.most_common())
    if speedups:
        m.model_speedup_geomean = round(statistics.geometric_mean(speedups), 3)
    peaks = [v["peak_memory_bytes"] for v in m.models.values() if "peak_memory_bytes" in v]
    m.peak_memory_bytes_max = max(peaks) if peaks else None
    return m


#: (label, attribute, format) rows of the table ``instep show RUN --metrics`` prints.
TABLE_ROWS: tuple[tuple[str, str, str], ...] = (
    ("cases collected", "collected", "{}"),
    ("cases executed", "executed", "{}"),
    ("compile success rate", "compile_success_rate", "{:.1%}"),
    ("compiled / failed to compile", "compiled", "{}"),
    ("semantic pass rate", "semantic_pass_rate", "{:.1%}"),
    ("failures not triaged (no layer)", "untriaged", "{}"),
    ("failures unclassified (no root-cause category)", "unclassified", "{}"),
    ("crashes (signal)", "crashes", "{}"),
    ("time-outs", "timeouts", "{}"),
    ("runtime device errors", "runtime_device_errors", "{}"),
    ("fallbacks", "fallbacks", "{}"),
    ("fallback ratio (to kernels)", "fallback_ratio", "{:.1%}"),
    ("extern kernel calls", "extern_calls", "{}"),
    ("graph breaks", "graph_breaks", "{}"),
    ("generated kernels", "generated_kernels", "{}"),
    ("IR nodes per kernel (fusion)", "ir_nodes_per_kernel", "{:.2f}"),
    ("compile time", "compile_time_s", "{:.1f} s"),
    ("autotune time", "autotune_time_s", "{:.1f} s"),
    ("model speedup (geomean)", "model_speedup_geomean", "{:.2f}x"),
    ("peak memory (max model)", "peak_memory_bytes_max", "{:,.0f} B"),
)


def table_rows(m: RunMetrics) -> list[tuple[str, str]]:
    """``(label, value)`` pairs for a terminal table; ``-`` where there is no figure."""
    rows = []
    for label, attr, fmt in TABLE_ROWS:
        value = getattr(m, attr)
        if attr == "compiled":
            rows.append((label, f"{m.compiled} / {m.compile_failed}"))
            continue
        rows.append((label, "-" if value is None else fmt.format(value)))
    for leg, states in m.triad.items():
        rows.append((f"triad {leg}", ", ".join(f"{n} {s}" for s, n in sorted(states.items()))))
    for layer, n in m.failures_by_layer.items():
        rows.append((f"failures at {layer}", str(n)))
    return rows
