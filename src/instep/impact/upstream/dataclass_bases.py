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
    """One snapshot's indexes (per-file cache) and its cross-file dataclass ``__init__``s."""

    def __init__(
        self,
        snapshot: Snapshot,
        cache: ContentCache | None,
        jobs: int | None,
        only: Iterable[str] | None = None,
    ) -> None:
        self.snapshot = snapshot
        self.paths = set(snapshot.paths())
        self.cache = cache
        if only is None:  # every file that may define a dataclass
            data = {p: snapshot.read(p) for p in sorted(self.paths) if p.endswith(".py")}
            items = [(p, d) for p, d in data.items() if MARK in d]
        else:
            items = [(p, snapshot.read(p)) for p in sorted(set(only) & self.paths)]
        self.candidates = [p for p, _ in items]
        self.indexes: dict[str, FileIndex] = index_many(items, cache, jobs)
        self.classes = SnapshotDataclasses(sorted(self.paths), self.index)

    def index(self, path: str) -> FileIndex | None:
        if path not in self.indexes:
            if path not in self.paths:
                return None
            self.indexes.update(index_many([(path, self.snapshot.read(path))], self.cache, 1))
        index = self.indexes[path]
        return None if index.error else index

    def inits(self, path: str) -> dict[str, tuple[Symbol, frozenset[str]]]:
        return self.classes.inits(path) if path in self.paths else {}

    def dependants(self) -> dict[str, frozenset[str]]:
        """Each file with a cross-file dataclass ``__init__`` -> the files its fields read."""
        out: dict[str, frozenset[str]] = {}
        for path in self.candidates:
            deps = [d for _, d in self.inits(path).values()]
            if deps:
                out[path] = frozenset().union(*deps)
        return out


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
    changed = set(changed)
    sides = [_Side(s, cache, jobs, only) for s in (old, new)]
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
    return _Side(snapshot, cache, jobs).dependants()
