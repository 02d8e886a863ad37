"""``--shard K/N``: a deterministic, balanced share of a run's cases.

Cases are balanced by their stored durations (longest first onto the least loaded
shard; ties broken by node id), or by count when no durations are known. Every host
computing shard K of N from the same cases and the same durations gets the same set,
and the N shards together hold each case exactly once.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from instep.errors import BadInput


def parse_shard(text: str) -> tuple[int, int]:
    """``'2/4'`` -> ``(2, 4)``; K counts from 1."""
    match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
    if not match:
        raise BadInput(f"--shard {text!r}: expected K/N, e.g. 1/4")
    k, n = int(match[1]), int(match[2])
    if n < 1 or not 1 <= k <= n:
        raise BadInput(f"--shard {text}: K must be between 1 and N (N >= 1)")
    return k, n


def assign_shards(
    nodeids: Sequence[str], shards: int, durations: Mapping[str, float] | None = None
) -> dict[str, int]:
    """Shard (1..N) of each case."""
    durations = durations or {}
    known = [d for n, d in durations.items() if n in set(nodeids)]
    if not known:
        return {n: i % shards + 1 for i, n in enumerate(sorted(nodeids))}
    default = sorted(known)[len(known) // 2]  # the median stands in for unknown cases
    weights = {n: max(durations.get(n, default), 1e-6) for n in nodeids}
    loads = [0.0] * shards
    out: dict[str, int] = {}
    for nodeid in sorted(nodeids, key=lambda n: (-weights[n], n)):
        target = min(range(shards), key=lambda i: (loads[i], i))
        loads[target] += weights[nodeid]
        out[nodeid] = target + 1
    return out


def select_shard(
    nodeids: Sequence[str], shard: tuple[int, int], durations: Mapping[str, float] | None = None
) -> list[str]:
    """The cases of shard ``(K, N)``, in their original order."""
    k, n = shard
    owner = assign_shards(nodeids, n, durations)
    return [nodeid for nodeid in nodeids if owner[nodeid] == k]
