"""The order a run hands its cases out in, and how many standbys each host keeps.

**Order.** Once cases have run before, the store knows how long each took (the latest
duration in an unsharded run). The longest go first, so that the last chunks are short
and no host finishes long after the others (longest-processing-time first); the chunk
sizes shrink with the estimated time left (:class:`~instep.run.worker_pool.WorkQueue`).
Cases stay grouped by test file (a file's cases run in processes that imported it),
files with the most estimated time first; a case never run before is estimated at the
median of those known. With no durations at all the collection's order is kept.

**Standbys.** Under ``fork`` and ``spawn`` a case process imports its test module itself
(it may initialise the device), so a replacement costs that import. A host prepares
standbys while its active process runs cases: with ``--isolate case`` at least one (the
next case's process imports while the current case runs) and enough for the prepared
processes of all hosts to fill the machine's CPUs (``ceil(cpus / workers)``, at most
:data:`MAX_STANDBYS`); with ``--isolate worker``, where a replacement is rare (the reuse
rule), one only where a CPU is idle (``cpus > workers``). Hosts also stop preparing when
memory runs short (``worker_host``). Under ``shared`` a replacement is a fork: none.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence

#: the most standbys a host keeps (``--standbys`` may ask for more)
MAX_STANDBYS = 4


def longest_first(
    cases: Sequence[tuple[str, str]], durations: Mapping[str, float]
) -> list[tuple[str, str, float | None]]:
    """``(nodeid, file)`` pairs as ``(nodeid, file, estimate)`` in the order to run them:
    the collection's order when no duration is known, else files by estimated total time
    and, in each file, cases by estimated time (both longest first; ties keep the
    collection's order)."""
    known = sorted(d for n, _ in cases if (d := durations.get(n)) is not None)
    if not known:
        return [(n, f, None) for n, f in cases]
    median = known[len(known) // 2]
    estimate = {n: durations.get(n, median) for n, _ in cases}
    files: dict[str, list[str]] = {}
    for nodeid, file in cases:
        files.setdefault(file, []).append(nodeid)
    totals = {f: sum(estimate[n] for n in ns) for f, ns in files.items()}
    ordered: list[tuple[str, str, float | None]] = []
    for file in sorted(files, key=lambda f: -totals[f]):  # stable: ties keep their order
        for nodeid in sorted(files[file], key=lambda n: -estimate[n]):
            ordered.append((nodeid, file, estimate[nodeid]))
    return ordered


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity mask), else the machine's count."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def standbys_per_host(isolate: str, model: str, workers: int, cpus: int | None = None) -> int:
    """How many prepared case processes each host keeps beside its active one."""
    if model == "shared":
        return 0
    cpus = cpus or usable_cpus()
    workers = max(1, workers)
    if isolate == "case":
        return max(1, min(MAX_STANDBYS, math.ceil(cpus / workers)))
    return 1 if cpus > workers else 0
