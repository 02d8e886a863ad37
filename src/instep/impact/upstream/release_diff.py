"""Index and diff many files at once: a process pool and a content-addressed cache.

:func:`index_many` indexes ``(path, bytes)`` items; :func:`diff_versions` indexes and
diffs ``(path, old bytes, new bytes)`` triples (a release diff, a commit) with the fast
old-side reuse of :func:`~instep.impact.upstream.symbol_diff.diff_sources`, then adds the
cross-file renames of :func:`~instep.impact.upstream.symbol_diff.diff_many`.

Workers receive bytes and return :class:`~instep.pyindex.symbols.FileIndex` objects
(without the reuse tables, which only serve the worker itself). Results are cached by
(path, content) hash under a namespace that carries the index format version, so a warm
run only reads the cache. Workers read and write the cache themselves, so a cold run's
cache traffic is parallel too. This module does not decide what a change means.
"""

from __future__ import annotations

import itertools
import logging
import multiprocessing
import os
import sys
from collections.abc import Callable, Hashable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, as_completed, wait
from dataclasses import dataclass, field, replace
from pathlib import Path

from instep.impact.model import Stage, SymbolChange
from instep.impact.no_gc import no_cyclic_gc
from instep.impact.upstream.file_index import index_source
from instep.impact.upstream.stages import StageMap
from instep.impact.upstream.symbol_diff import DIFF_FORMAT_VERSION, FileDiff, diff_sources, join
from instep.pyindex.cache import ContentCache, content_hash
from instep.pyindex.symbols import FORMAT_VERSION, FileIndex

log = logging.getLogger(__name__)

CACHE_NAMESPACE = f"symbols-v{FORMAT_VERSION}"
INLINE_BELOW = 4  # fewer items than this are indexed in-process (a pool costs more)
IN_FLIGHT = 3  # tasks per worker submitted ahead of the results (diff_versions)


def symbol_cache(root: Path | None) -> ContentCache:
    """The cache for file indexes under ``root`` (None: no caching)."""
    return ContentCache(root, CACHE_NAMESPACE)


def index_key(path: str, data: bytes) -> str:
    """Cache key of one file version: an index depends on the path (module, relative
    imports, references) and the content."""
    head = f"symbols-v{FORMAT_VERSION}\0{path}\0".encode("utf-8", "surrogateescape")
    return content_hash(head + data)


#: Worker processes by default at most: each holds a parsed file and its indexes, so
#: many more would cost memory for little (the stages are parse-bound and overlapped).
MAX_DEFAULT_JOBS = 8


def default_jobs() -> int:
    """The CPUs this process may run on (its affinity: a pinned or containerised run
    counts what it was given), at most :data:`MAX_DEFAULT_JOBS`."""
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        usable = os.cpu_count() or 1
    return max(1, min(usable, MAX_DEFAULT_JOBS))


def _slim(index: FileIndex | None) -> FileIndex | None:
    if index is None or (not index.chunks and not index.units):
        return index
    return replace(index, chunks=[], units=[])


def _pool(jobs: int) -> ProcessPoolExecutor:
    method = "fork" if sys.platform.startswith("linux") else None
    return ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context(method))


def _run(task: Callable, todo: list[tuple], jobs: int | None) -> list:
    """``task(*args)`` for every tuple of ``todo``, in a pool when worth it; input order."""
    jobs = default_jobs() if jobs is None else max(1, jobs)
    # biggest first, so that the pool does not wait for one large file at the end
    order = sorted(range(len(todo)), key=lambda i: -_size(todo[i]))
    done = dict(_stream(task, ((i, todo[i]) for i in order), min(jobs, max(1, len(todo)))))
    return [done[i] for i in range(len(todo))]


def _size(args: tuple) -> int:
    return sum(len(a) for a in args if isinstance(a, bytes))


# ------------------------------------------------------------------ indexing


def _index_task(path: str, data: bytes, key: str, cache: ContentCache | None) -> FileIndex:
    with no_cyclic_gc():
        index = _slim(index_source(path, data))
    assert index is not None
    if cache is not None:
        cache.put(key, index)
    return index


def index_many(
    items: Iterable[tuple[str, bytes]],
    cache: ContentCache | None = None,
    jobs: int | None = None,
) -> dict[str, FileIndex]:
    """``path -> FileIndex`` for every ``(path, bytes)`` item (in input order).

    Unreadable files give an index with ``error`` set (and a warning), never an exception.
    ``jobs`` worker processes (default: the usable cores); cached indexes are not redone.
    """
    items = list(items)
    out: dict[str, FileIndex] = {}
    todo: list[tuple[str, bytes, str, ContentCache | None]] = []
    for path, data in items:
        key = index_key(path, data)
        hit = cache.get(key) if cache is not None else None
        if isinstance(hit, FileIndex):
            out[path] = hit
        else:
            todo.append((path, data, key, cache))
    for (path, *_), index in zip(todo, _run(_index_task, todo, jobs), strict=True):
        out[path] = index
    return {path: out[path] for path, _ in items}


# ------------------------------------------------------------------ diffing


def diff_key(old_key: str | None, new_key: str | None, stage: Stage) -> str:
    text = f"diff-v{DIFF_FORMAT_VERSION}:{old_key}:{new_key}:{stage.value}"
    return content_hash(text.encode())


@dataclass
class VersionDiff:
    """Symbol changes between two versions of a set of files; indexes on demand.

    ``changes`` is complete. The per-file indexes are kept in memory when the run had no
    cache, and are otherwise read from the cache when :meth:`index` asks for them (a
    release diff's ~1,800 indexes cost seconds to unpickle; most callers need a few).
    """

    changes: list[SymbolChange]
    keys: dict[str, tuple[str | None, str | None]] = field(default_factory=dict)
    cache: ContentCache | None = None
    loaded: dict[tuple[str, str], FileIndex] = field(default_factory=dict, repr=False)
    # path -> (old bytes, new bytes), to index a file again (None: its bytes are gone)
    reread: Callable[[str], tuple[bytes | None, bytes | None]] | None = None

    @property
    def paths(self) -> list[str]:
        return list(self.keys)

    def index(self, path: str, side: str = "new") -> FileIndex | None:
        """The index of ``path`` in the ``'old'`` or ``'new'`` version (None: absent)."""
        if (path, side) in self.loaded:
            return self.loaded[(path, side)]
        old_key, new_key = self.keys.get(path, (None, None))
        key = old_key if side == "old" else new_key
        if key is None:
            return None
        index = self.cache.get(key) if self.cache is not None else None
        if not isinstance(index, FileIndex):  # evicted or no cache: index again
            sides = self.reread(path) if self.reread is not None else (None, None)
            data = sides[0 if side == "old" else 1]
            index = _slim(index_source(path, data)) if data is not None else None
        if index is not None:
            self.loaded[(path, side)] = index
        return index

    @property
    def errors(self) -> dict[str, str]:
        """Files that could not be read, with why (they contribute no changes)."""
        out: dict[str, str] = {}
        for path in self.keys:
            for side in ("old", "new"):
                index = self.index(path, side)
                if index is not None and index.error:
                    out.setdefault(path, index.error)
        return out


def _pair_task(
    path: str,
    old: bytes | None,
    new: bytes | None,
    stage: Stage,
    keys: tuple[str | None, str | None],
    cache: ContentCache | None,
    ship_new: bool = False,
) -> tuple[FileDiff, FileIndex | None, FileIndex | None]:
    """One file's diff; indexes come back when there is no cache to hold them (the new
    one also when ``ship_new``)."""
    old_key, new_key = keys
    old_index = cache.get(old_key) if cache is not None and old_key else None
    new_index = cache.get(new_key) if cache is not None and new_key else None
    with no_cyclic_gc():
        result = diff_sources(
            path,
            old,
            new,
            stage,
            new_index=new_index if isinstance(new_index, FileIndex) else None,
            old_index=old_index if isinstance(old_index, FileIndex) else None,
        )
    if cache is None:
        return result.file_diff, _slim(result.old), _slim(result.new)
    if old_key and old_index is None and result.old is not None:
        cache.put(old_key, _slim(result.old))
    if new_key and new_index is None and result.new is not None:
        cache.put(new_key, _slim(result.new))
    cache.put(diff_key(old_key, new_key, stage), result.file_diff)
    return result.file_diff, None, _slim(result.new) if ship_new else None


@no_cyclic_gc()  # here; the workers inherit the pause
def diff_versions(
    pairs: Iterable[tuple[str, bytes | None, bytes | None]],
    stage_of: Callable[[str], Stage] | None = None,
    cache: ContentCache | None = None,
    jobs: int | None = None,
    ship_new: bool = False,
    reread: Callable[[str], tuple[bytes | None, bytes | None]] | None = None,
) -> VersionDiff:
    """Index and diff ``(path, old bytes | None, new bytes | None)`` triples.

    Files whose bytes are equal are skipped. Gives per-file changes plus symbols moved
    across the files of the batch; ``stage_of`` defaults to the shipped stage table.
    With a cache, a file pair seen before costs one small read. ``ship_new``: workers
    send the new indexes back (for callers that will read most of them anyway). The
    cyclic collector is paused meanwhile (impact/no_gc.py). ``pairs`` is read as the
    pool takes the files (a generator that reads each file's bytes holds only those in
    flight); ``reread`` (path -> old and new bytes) gives them again when an index must be
    made again, and then no bytes are kept here.
    """
    stage_of = stage_of or StageMap()
    keys: dict[str, tuple[str | None, str | None]] = {}
    sources: dict[str, tuple[bytes | None, bytes | None]] = {}
    results: dict[str, tuple] = {}

    def misses():
        for path, old, new in pairs:
            if old == new:
                continue
            both = keys[path] = (
                index_key(path, old) if old is not None else None,
                index_key(path, new) if new is not None else None,
            )
            if reread is None:
                sources[path] = (old, new)
            stage = stage_of(path)
            hit = cache.get(diff_key(*both, stage)) if cache is not None else None
            if isinstance(hit, FileDiff):  # warm: answered here, no pool started
                results[path] = (hit, None, None)
            else:
                yield path, (path, old, new, stage, both, cache, ship_new)

    for path, res in _stream(_pair_task, misses(), jobs):
        results[path] = res
    result = VersionDiff(
        join([results[path][0] for path in keys]),
        keys=keys,
        cache=cache,
        reread=reread if reread is not None else lambda p: sources.get(p, (None, None)),
    )
    for path in keys:
        _, old_index, new_index = results[path]
        if old_index is not None:
            result.loaded[(path, "old")] = old_index
        if new_index is not None:
            result.loaded[(path, "new")] = new_index
    return result


def _stream(
    task: Callable, items: Iterator[tuple[Hashable, tuple]], jobs: int | None
) -> Iterator[tuple[Hashable, object]]:
    """``(name, task(*args))`` for every ``(name, args)`` of ``items``, in a pool when
    worth it, as they end. At most :data:`IN_FLIGHT` tasks per worker are taken from
    ``items`` ahead of the workers: what their arguments hold (a file's bytes) is only
    ever in memory for those, and the pool forks before most of it is read."""
    jobs = default_jobs() if jobs is None else max(1, jobs)
    first = list(itertools.islice(items, INLINE_BELOW))
    if jobs == 1 or len(first) < INLINE_BELOW:
        for name, args in itertools.chain(first, items):
            yield name, task(*args)
        return
    with _pool(jobs) as pool:
        pending: dict = {}
        for name, args in itertools.chain(first, items):
            pending[pool.submit(task, *args)] = name
            if len(pending) >= IN_FLIGHT * jobs:
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for future in done:
                    yield pending.pop(future), future.result()
        for future in as_completed(pending):
            yield pending[future], future.result()
