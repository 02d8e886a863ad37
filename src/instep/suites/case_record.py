"""Per-case figures of the built-in suites, stored with the case's outcome.

The runner's pytest plugin already stores the deltas of torch's compile counters
(``torch._dynamo.utils.counters``) as ``Outcome.metrics["counters"]``. The suites publish
their own figures in the counter group ``instep`` (keys ``instep.<key>``), so they reach
the store with the outcome, atomically, with no change to the runner, also when a later
leg of the case fails. Only numbers travel: a leg's state is a key counted up by 1
(``triad.compiled_device.fail``), a measurement a float added to its key
(``model.speedup``). The plugin stores deltas over the case, so values are *added*, never
set (a worker process reused across cases keeps its counters), and a zero is recorded
as a tiny positive value (a zero delta is dropped). :func:`read_case_figures` is the
inverse, used by ``metrics.py``.
"""

from __future__ import annotations

from typing import Any

GROUP = "instep"
PREFIX = GROUP + "."
#: The three legs of seed 5.2 and the states a leg can end in.
LEGS = ("eager_cpu", "eager_device", "compiled_device")
LEG_STATES = ("ok", "fail", "mismatch")


def _counters() -> Any:
    # torch is the user's: only in the process that runs the case
    from torch._dynamo.utils import counters

    return counters[GROUP]


def record_leg(leg: str, state: str) -> None:
    """Record that ``leg`` ended in ``state`` (one of :data:`LEG_STATES`)."""
    if leg not in LEGS or state not in LEG_STATES:
        raise ValueError(f"unknown triad leg/state {leg}/{state}")
    _counters()[f"triad.{leg}.{state}"] += 1


def record_value(key: str, value: float) -> None:
    """Record a measurement (seconds, bytes, a ratio); a zero is stored as a tiny value."""
    _counters()[key] += float(value) if value else 1e-12


def read_case_figures(metrics: dict[str, Any] | None) -> dict[str, Any]:
    """From an outcome's ``metrics``: ``{"triad": {leg: state}, "values": {key: number}}``."""
    counters = (metrics or {}).get("counters") or {}
    triad: dict[str, str] = {}
    values: dict[str, float] = {}
    for key, value in counters.items():
        if not key.startswith(PREFIX):
            continue
        name = key[len(PREFIX) :]
        parts = name.split(".")
        if len(parts) == 3 and parts[0] == "triad" and parts[1] in LEGS:
            # a leg reported twice (a retried compile) keeps its worst state
            prior = triad.get(parts[1])
            if prior is None or LEG_STATES.index(parts[2]) > LEG_STATES.index(prior):
                triad[parts[1]] = parts[2]
        else:
            values[name] = float(value)
    return {"triad": triad, "values": values}
