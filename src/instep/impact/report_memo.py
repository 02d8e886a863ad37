"""The whole report of a release diff, remembered by the content of everything it read.

Re-running an analysis whose inputs did not change (another ``--format``, the weekly
re-check of the same release pair) should cost what reading the inputs' digests costs,
not a re-join of 9,000 couplings. The key covers:

* every file of the old, new and downstream snapshots, by path and content digest
  (a wheel's RECORD gives them without decompressing; a tree hashes its files);
* the request (language, stage map, excludes, minimum supported version, unit size);
* instep itself: reports live in the cache generation of the instep code that wrote them
  (``cache.analysis_code_digest``: the package version and the bytes of the analysis code
  and its data tables), so an upgrade or a local edit never serves a stale report.

Any change to any of these is a miss, and the per-file caches below it (symbol indexes,
diffs, downstream indexes, fork matches) still make the re-analysis cheap. This module
does not analyse; it only names and stores finished reports.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from instep.impact.model import ImpactReport
from instep.pyindex.cache import ContentCache

if TYPE_CHECKING:
    from instep.impact.upstream.sources.snapshot import Snapshot

NAMESPACE = "reports-v1"


def _snapshot_digest(snapshot: Snapshot, paths: Iterable[str]) -> str:
    h = hashlib.blake2b(digest_size=20)
    for path in sorted(paths):
        h.update(f"{path}\0{snapshot.digest(path)}\n".encode("utf-8", "surrogateescape"))
    return h.hexdigest()


def report_key(
    request: dict[str, Any],
    snapshots: Iterable[tuple[str, Snapshot, Iterable[str]]],
) -> str:
    """Key of one analysis: ``request`` (plain values) and ``(role, snapshot, paths)``."""
    h = hashlib.blake2b(digest_size=20)
    h.update(repr(sorted(request.items())).encode())
    for role, snapshot, paths in snapshots:
        h.update(f"{role}:{_snapshot_digest(snapshot, paths)}".encode())
    return h.hexdigest()


class ReportMemo:
    """Finished reports under ``cache_root/reports-v1`` (``None``: remembers nothing)."""

    def __init__(self, cache_root: Path | None) -> None:
        self.cache = ContentCache(cache_root, NAMESPACE)

    def get(self, key: str) -> ImpactReport | None:
        hit = self.cache.get(key)
        return hit if isinstance(hit, ImpactReport) else None

    def put(self, key: str, report: ImpactReport) -> None:
        self.cache.put(key, report)
