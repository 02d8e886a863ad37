"""What one execution of a case gave: the ``Status`` vocabulary and its sets, defined once.

``Status`` names every status an outcome can have (pytest's six and the runner's two);
``FAILING``, ``PASSING`` and ``MANIFESTATIONS`` are the sets the runner, triage, suites,
reports and the CLI test statuses against. A ``Status`` is a ``str``: it compares, hashes,
formats and serialises (JSON, the store's ``status`` column) as its plain value, so stored
data and the wire format between processes stay plain strings. Nothing here touches the
store, runs a case or classifies a failure.
"""

from __future__ import annotations

from enum import Enum


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
