"""Modules that are gone from their old path: renamed, split, or deleted (re-exports too).

A downstream ``from a.b import X`` breaks when ``a/b.py`` is renamed to ``a/_impl/b.py``
or deleted, whether ``X`` was defined there or only re-exported. The symbol diff keys a
renamed file's symbols by their new path and gives a re-export-only module no symbols at
all, so neither shows up as a removed name. :func:`gone_names` adds one REMOVED change per
name the old module bound at module level (its definitions *and* its imports, read from
the old side), at the old path, with where the name lives now in ``detail``.

Where a name lives now is read from the symbol index of the files the unit adds (commit
mode: git's rename detection ``-M`` pairs the file; release mode: the added files of the
whole diff): the added file that defines the most of the old module's names is where the
module "moved to" (at least half of them; fewer is a split or a deletion). Exact names are
used rather than text similarity (``difflib``): a module moved *and* edited keeps its
names, and nothing needs a similarity threshold. A name the unit's new side still binds at
the old dotted path (``a/b.py`` split into the package ``a/b/__init__.py`` that re-exports
it, or a module ``__getattr__``) is not gone. A package ``__init__`` that stays but stops
importing a public name loses that re-export: the name is gone at the package's path too.
Whether the range's end still has it is left
to the join (``Join.by_name`` asks the resolver of the new upstream). Nothing here reads
the downstream or decides a verdict. The indexes are made here from the file's bytes
unless the caller passes ``index_of`` (a release: the symbol diff has them already).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable

from instep.impact.model import ChangeKind, Stage, SymbolChange
from instep.impact.upstream.file_index import index_source
from instep.impact.upstream.sources.snapshot import FileChange
from instep.pyindex.model import SymbolKind, module_of
from instep.pyindex.symbols import FileIndex

MOVED_SHARE = 0.5  # an added file holding at least this share of the old names: "moved to"

# the index of a file change's 'old' or 'new' side, None when absent or unreadable
IndexOf = Callable[[FileChange, str], "FileIndex | None"]


def _top_names(index: FileIndex) -> dict[str, SymbolKind | None]:
    """Names a module binds at module level: definitions (kind) and imports (None)."""
    names: dict[str, SymbolKind | None] = {}
    for qualname, symbol in index.symbols.items():
        base = qualname.split("#", 1)[0]
        if "." not in base and symbol.kind is not SymbolKind.BLOCK:
            names.setdefault(base, symbol.kind)
    for local in index.imports:
        names.setdefault(local, None)
    return names


def _index(path: str, data: bytes | None) -> FileIndex | None:
    if data is None:
        return None
    index = index_source(path, data)
    return None if index.error is not None else index


def index_of_bytes(f: FileChange, side: str) -> FileIndex | None:
    """The default :data:`IndexOf`: index the side's bytes now."""
    if side == "old":
        return _index(f.old_path or f.path, f.old)
    return _index(f.path, f.new)


class NewSide:
    """The modules a unit (a commit, or a whole release diff) adds or rewrites."""

    def __init__(self, files: Iterable[FileChange], index_of: IndexOf = index_of_bytes) -> None:
        self.by_module: dict[str, FileIndex] = {}
        for f in files:
            if f.has_new and f.path.endswith(".py"):
                index = index_of(f, "new")
                if index is not None:
                    self.by_module[module_of(f.path)] = index

    def still_binds(self, module: str, name: str) -> bool:
        index = self.by_module.get(module)
        if index is None:
            return False
        return name in index.imports or name in index.symbols or "__getattr__" in index.symbols

    def home(
        self, names: Iterable[str], exclude: str, renamed_to: str | None = None
    ) -> tuple[str | None, dict[str, str]]:
        """(the file the module moved to, or None; each name's new file).

        A name's new file is the rename target when it binds the name there, else a file
        that defines it, else one that re-exports it (a package ``__init__``).
        """
        wanted = set(names)
        defines: dict[str, set[str]] = {}
        binds: dict[str, set[str]] = {}
        for module, index in sorted(self.by_module.items()):
            if module == exclude:
                continue
            top = _top_names(index)
            defines[index.path] = {n for n in wanted if top.get(n, None) is not None}
            binds[index.path] = wanted & set(top)
        best = max(defines, key=lambda p: (len(defines[p]), p), default=None)
        if best is None or len(defines[best]) < MOVED_SHARE * max(len(wanted), 1):
            best = None
        moved_to = renamed_to or best
        homes: dict[str, str] = {}
        for name in sorted(wanted):
            order = [moved_to] if moved_to and name in binds.get(moved_to, ()) else []
            order += sorted(p for p, got in defines.items() if name in got)
            order += sorted(p for p, got in binds.items() if name in got)
            if order:
                homes[name] = order[0]
        return moved_to, homes


def gone_names(
    files: list[FileChange],
    stage_of: Callable[[str], Stage],
    where: str,
    new_side: NewSide | None = None,
    index_of: IndexOf = index_of_bytes,
) -> list[SymbolChange]:
    """REMOVED changes at the old path for each name of a module that is gone (callers
    merge them with the symbol diff's own REMOVED changes of the same ref: :func:`merge`).

    ``files``: the unit's file changes (a rename carries ``old_path``; a deletion has no
    new side). ``where``: the unit, as the rationale names it ('commit 82dc6f32f864
    (#785)'). ``new_side``: the added files to look for new homes in (default: this unit's).
    """
    new_side = new_side if new_side is not None else NewSide(files, index_of)
    out: list[SymbolChange] = []
    for f in files:
        if not f.has_old:
            continue
        if f.old_path and f.old_path != f.path:
            old_path, renamed_to = f.old_path, f.path
        elif not f.has_new:
            old_path, renamed_to = f.path, None
        else:
            out.extend(_dropped_reexports(f, stage_of, where, new_side, index_of))
            continue
        if not old_path.endswith(".py"):
            continue
        old_index = index_of(f, "old")
        if old_index is None:
            continue
        module = module_of(old_path)
        names = {
            n: k for n, k in _top_names(old_index).items() if not new_side.still_binds(module, n)
        }
        if not names:
            continue
        moved_to, homes = new_side.home(names, module, renamed_to)
        how = f"moved to {moved_to}" if moved_to else "deleted"
        for name, kind in sorted(names.items()):
            home = homes.get(name) or moved_to
            what = f"re-exported {old_index.imports[name]}" if kind is None else f"defined {name}"
            now = f"; {name} is now in {home}" if home else f"; {name} has no new home"
            out.append(
                SymbolChange(
                    path=old_path,
                    qualname=name,
                    kind=ChangeKind.REMOVED,
                    symbol_kind=kind or SymbolKind.ASSIGNMENT,
                    stage=stage_of(old_path),
                    old=old_index.symbols.get(name),
                    detail=f"{old_path} ({what}) {how} in {where}{now}",
                )
            )
    return out


def _dropped_reexports(
    f: FileChange,
    stage_of: Callable[[str], Stage],
    where: str,
    new_side: NewSide,
    index_of: IndexOf = index_of_bytes,
) -> list[SymbolChange]:
    """A package ``__init__`` that stays but stops importing a name: ``from a import X``
    breaks as surely as when ``a/__init__.py`` is deleted (werkzeug 2.1.0's
    ``werkzeug.wrappers.BaseRequest``). Only package ``__init__`` files: an import dropped
    from a plain module is its own business, not an exported name."""
    if not f.path.endswith("/__init__.py"):
        return []
    old_index, new_index = index_of(f, "old"), index_of(f, "new")
    if old_index is None or new_index is None or "__getattr__" in new_index.symbols:
        return []
    kept = set(_top_names(new_index))
    names = sorted(n for n in old_index.imports if n not in kept and not n.startswith("_"))
    if not names:
        return []
    _, homes = new_side.home(names, module_of(f.path))
    out = []
    for name in names:
        home = homes.get(name)
        now = f"; {name} is now in {home}" if home else f"; {name} has no new home"
        out.append(
            SymbolChange(
                path=f.path,
                qualname=name,
                kind=ChangeKind.REMOVED,
                symbol_kind=SymbolKind.ASSIGNMENT,
                stage=stage_of(f.path),
                old=None,
                detail=f"{f.path} no longer re-exports {old_index.imports[name]}"
                f" since {where}{now}",
            )
        )
    return out


def merge(changes: list[SymbolChange], gone: list[SymbolChange]) -> None:
    """Add ``gone`` to a unit's ``changes``: a name the symbol diff already reports removed
    keeps its change and gains the detail of where it went."""
    by_ref = {g.ref: g for g in gone}
    for k, change in enumerate(changes):
        found = by_ref.pop(change.ref, None)
        if found is not None and change.kind is ChangeKind.REMOVED:
            detail = "; ".join(d for d in (change.detail, found.detail) if d)
            changes[k] = dataclasses.replace(change, detail=detail)
    changes.extend(by_ref.values())
