"""What one execution of a case gave: the ``Status`` vocabulary and its sets, defined once,
and :class:`OutcomeRecord`, a stored outcome as its readers take it.

``Status`` names every status an outcome can have (pytest's six and the runner's two);
``FAILING``, ``PASSING`` and ``MANIFESTATIONS`` are the sets the runner, triage, suites,
reports and the CLI test statuses against. A ``Status`` is a ``str``: it compares, hashes,
formats and serialises (JSON, the store's ``status`` column) as its plain value, so stored
data and the wire format between processes stay plain strings. Records are made from
store rows at the boundary (``Store.outcome_records``, :func:`records`); the runner and its
hosts keep exchanging plain dicts. Nothing here touches the store, runs a case or
classifies a failure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from enum import Enum
from typing import Any


class Status(str, Enum):
    """An outcome's status; the first six are pytest's, the last two the runner's."""

    PASSED = "passed"
    FAILED = "failed"
    ERROR = "error"
    SKIPPED = "skipped"
    XFAILED = "xfailed"
    XPASSED = "xpassed"
    CRASHED = "crashed"
    TIMEOUT = "timeout"

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:  # f"{s}" is the value on every Python
        return format(self.value, spec)


#: Every status's value, in the order above (the store's vocabulary).
STATUSES: tuple[str, ...] = tuple(s.value for s in Status)
#: Statuses that fail a run: they trigger ``--reruns``, retire an ``--isolate worker``
#: process and are what triage classifies.
FAILING: frozenset[Status] = frozenset(
    {Status.FAILED, Status.ERROR, Status.CRASHED, Status.TIMEOUT}
)
#: Statuses where the case's body ran to its end as it should (an unexpected pass counts).
PASSING: frozenset[Status] = frozenset({Status.PASSED, Status.XPASSED})
#: Failures that are a manifestation (a signal, a time-out), not an exception the case raised.
MANIFESTATIONS: frozenset[Status] = frozenset({Status.CRASHED, Status.TIMEOUT})


@dataclass(frozen=True)
class OutcomeRecord:
    """One stored outcome as triage, suites, reports and bundles read it (typed).

    Made from a store row (``outcome_dict``, or any dict with those keys: missing keys
    are ``None``/empty) by :meth:`from_row`; :meth:`as_dict` gives the plain row back,
    ``status`` as its string. Timestamps stay the store's ISO text."""

    case: str
    status: Status
    duration: float | None = None
    attempt: int = 1
    final: bool = True
    flaky: bool = False
    layer: str | None = None
    category: str | None = None
    signature: str | None = None
    stage: str | None = None
    confidence: float | None = None
    exception_type: str | None = None
    message: str | None = None
    signal: str | None = None
    exit_code: int | None = None
    skip_reason: str | None = None
    worker: int | None = None
    device: str | None = None
    pid: int | None = None
    started_at: str | None = None
    finished_at: str | None = None
    timings: dict[str, Any] = field(default_factory=dict)
    stage_timings: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)
    warnings: list[Any] = field(default_factory=list)
    exception_chain: list[Any] = field(default_factory=list)
    evidence: dict[str, Any] = field(default_factory=dict)
    artifacts: dict[str, Any] = field(default_factory=dict)
    stdout_tail: str | None = None
    stderr_tail: str | None = None
    longrepr: str | None = None

    @property
    def failing(self) -> bool:
        return self.status in FAILING

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> OutcomeRecord:
        """The record of a store row; keys it does not know are ignored."""
        values: dict[str, Any] = {}
        for f in fields(cls):
            value = row.get(f.name)
            if value is None:
                continue  # the field's default: a null JSON column reads as empty
            values[f.name] = value
        values["case"] = str(row.get("case"))
        values["status"] = Status(row["status"])
        return cls(**values)

    def as_dict(self) -> dict[str, Any]:
        """The plain row (``outcome_dict``'s keys and order), ``status`` as its value."""
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["status"] = self.status.value
        return data


def records(rows: Iterable[Mapping[str, Any] | OutcomeRecord]) -> list[OutcomeRecord]:
    """Store rows (or records already) as records: what the readers of outcomes take."""
    return [r if isinstance(r, OutcomeRecord) else OutcomeRecord.from_row(r) for r in rows]
