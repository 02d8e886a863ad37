"""Changes of a synthesised dataclass ``__init__`` whose fields come from other files.

The per-file index synthesises a dataclass's ``__init__`` only when every base is in the
same file (its cache key is the file's own content). This pass runs after the per-file
indexes, on two snapshots (a release's two versions, a commit's parent and itself), with
``pyindex.dataclass_init.SnapshotDataclasses``: for each dataclass with a base in another
file, the ``__init__`` of both versions, and a change where they differ and the class's
file or a file its fields come from changed. The class's own file need not change: a base
that gains a required field changes every subclass's constructor. Nothing here is cached
on its own; the indexes it reads are the per-file ones (``release_diff.index_many``).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import Protocol

from instep.impact.model import SymbolChange
from instep.impact.upstream.release_diff import index_many
from instep.impact.upstream.sources.snapshot import digest_scheme
from instep.impact.upstream.stages import StageMap
from instep.impact.upstream.symbol_diff import symbol_change
from instep.pyindex.cache import ContentCache
from instep.pyindex.dataclass_init import SnapshotDataclasses
from instep.pyindex.model import Symbol
from instep.pyindex.symbols import FileIndex

MARK = b"dataclass"  # a file without it defines no dataclass


class Snapshot(Protocol):
    def paths(self) -> list[str]: ...

    def read(self, path: str) -> bytes: ...


class _Side:
    """One snapshot's indexes (per-file cache) and its cross-file dataclass ``__init__``s.

    ``twin``: the other version's side, built first. A file with the same content there
    (same digest, or same bytes) is neither read nor indexed again: its index is the
    twin's (most files of a release are unchanged; they used to cost a read and a cache
    read each on the second side).
    """

    def __init__(
        self,
        snapshot: Snapshot,
        cache: ContentCache | None,
        jobs: int | None,
        only: Iterable[str] | None = None,
        twin: _Side | None = None,
    ) -> None:
        self.snapshot = snapshot
        self.paths = set(snapshot.paths())
        self.cache = cache
        self.twin = twin
        self.marked: dict[str, bytes] = {}  # .py files read that name MARK -> their bytes
        self.read_paths: set[str] = set()  # the files read (or taken from the twin)
        shared: dict[str, FileIndex] = {}  # the twin's index of the same bytes
        todo: list[tuple[str, bytes]] = []
        if only is None:  # every file that may define a dataclass
            wanted = [p for p in sorted(self.paths) if p.endswith(".py")]
        else:
            wanted = sorted(set(only) & self.paths)
        self.candidates: list[str] = []
        for p in wanted:
            same, twin_data = self._twin_bytes(p)
            self.read_paths.add(p)
            if same and twin_data is None and only is None:
                continue  # the same bytes as the twin's, which do not name MARK
            data = snapshot.read(p) if twin_data is None else twin_data
            if only is None and MARK not in data:
                continue
            self.marked[p] = data
            self.candidates.append(p)
            if twin_data is not None and twin is not None and p in twin.indexes:
                shared[p] = twin.indexes[p]
            else:
                todo.append((p, data))
        made = index_many(todo, cache, jobs)
        self.indexes: dict[str, FileIndex] = {
            p: shared[p] if p in shared else made[p] for p in self.candidates
        }
        self.classes = SnapshotDataclasses(sorted(self.paths), self.index)

    def _twin_bytes(self, path: str) -> tuple[bool, bytes | None]:
        """(whether the twin read ``path`` and it holds the same bytes here, the twin's
        bytes of it: None where the twin kept none, for they do not name MARK)."""
        twin = self.twin
        if twin is None or path not in twin.read_paths:
            return False, None
        data = twin.marked.get(path)
        if not _same_content(twin.snapshot, self.snapshot, path, data):
            return False, None
        return True, data

    def index(self, path: str) -> FileIndex | None:
        if path not in self.indexes:
            if path not in self.paths:
                return None
            twin = self.twin
            if (
                twin is not None
                and path in twin.indexes
                and _same_content(twin.snapshot, self.snapshot, path, twin.marked.get(path))
            ):
                self.indexes[path] = twin.indexes[path]
            else:
                data = self.snapshot.read(path)
                self.indexes.update(index_many([(path, data)], self.cache, 1))
        index = self.indexes[path]
        return None if index.error else index

    def inits(self, path: str) -> dict[str, tuple[Symbol, frozenset[str]]]:
        return self.classes.inits(path) if path in self.paths else {}

    def release(self) -> None:
        """Drop what this side read. Its class tables hold its bound ``index`` (a cycle),
        which the analysis's paused collector (impact/no_gc.py) never freed: the bytes
        and indexes of every file naming ``dataclass``, ~115 MiB of a torch release,
        were held to the end of the run (issue #32)."""
        self.marked.clear()
        self.indexes.clear()
        self.classes.close()

    def dependants(self) -> dict[str, frozenset[str]]:
        """Each file with a cross-file dataclass ``__init__`` -> the files its fields read."""
        out: dict[str, frozenset[str]] = {}
        for path in self.candidates:
            deps = [d for _, d in self.inits(path).values()]
            if deps:
                out[path] = frozenset().union(*deps)
        return out


def _same_content(old: Snapshot, new: Snapshot, path: str, old_bytes: bytes | None) -> bool:
    """Whether ``path`` holds the same bytes in both snapshots: by digest where both give
    one of the same scheme (what ``sources.diff_snapshots`` trusts), else by the bytes."""
    old_digest, new_digest = getattr(old, "digest", None), getattr(new, "digest", None)
    if old_digest is not None and new_digest is not None:
        a, b = old_digest(path), new_digest(path)
        if digest_scheme(a) == digest_scheme(b):
            return a == b
    data = old_bytes if old_bytes is not None else old.read(path)
    return data == new.read(path)


@dataclass(frozen=True)
class CrossFileChange:
    change: SymbolChange
    sources: frozenset[str]  # the other files its fields come from (either version)


def changes(
    changed: Collection[str],
    old: Snapshot,
    new: Snapshot,
    stage_of=None,
    cache: ContentCache | None = None,
    jobs: int | None = None,
    only: Iterable[str] | None = None,
) -> list[CrossFileChange]:
    """The ``Cls.__init__`` changes of dataclasses with a base in another file between the
    ``old`` and ``new`` snapshot, for classes whose file or base files are in ``changed``.

    ``only``: the files that may hold such classes (known from elsewhere; default: every
    file of both snapshots that names ``dataclass``). The other version of an ``__init__``
    is the cross-file one, else the one the file's own index has (written or synthesised);
    none: the ``__init__`` was added or removed.
    """
    stage_of = stage_of or StageMap()
    first = _Side(old, cache, jobs, only)
    sides = [first, _Side(new, cache, jobs, only, twin=first)]
    try:
        return _changes(set(changed), sides, stage_of)
    finally:
        for side in sides:
            side.release()


def _changes(changed: set[str], sides: list[_Side], stage_of) -> list[CrossFileChange]:
    out: list[CrossFileChange] = []
    for path in sorted(set(sides[0].candidates) | set(sides[1].candidates)):
        found = [side.inits(path) for side in sides]
        for qual in sorted(set(found[0]) | set(found[1])):
            sources = frozenset().union(*(f[qual][1] for f in found if qual in f))
            if path not in changed and not sources & changed:
                continue
            pair: list[Symbol | None] = []
            for side, inits in zip(sides, found, strict=True):
                if qual in inits:
                    pair.append(inits[qual][0])
                else:
                    index = side.index(path)
                    pair.append(index.symbols.get(qual) if index is not None else None)
            change = symbol_change(path, stage_of(path), pair[0], pair[1])
            if change is not None:
                out.append(CrossFileChange(change, sources))
    return out


def dependants(snapshot: Snapshot, cache: ContentCache | None, jobs: int | None):
    """Each file of ``snapshot`` with a dataclass whose fields come from other files ->
    those files (what a history needs to know which commits to look at)."""
    side = _Side(snapshot, cache, jobs)
    try:
        return side.dependants()
    finally:
        side.release()
