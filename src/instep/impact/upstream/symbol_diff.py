"""Symbol diff: two :class:`~instep.pyindex.symbols.FileIndex` versions -> SymbolChanges.

One :class:`~instep.impact.model.SymbolChange` per changed symbol, matched by qualname.
Aspects, most significant first: REMOVED > RENAMED > SIGNATURE > DECORATOR > VALUE > BODY
> ANNOTATION > ADDED; ``kind`` is the most significant, ``also`` lists the others.

- SIGNATURE: parameters changed (``signature: (x, sizes) -> (x, sizes, implicit=False)``),
  a class's bases changed, or a symbol changed kind (function -> assignment).
- VALUE: parameter defaults changed (names and kinds equal), or an assignment's / class
  attribute's value.
- ANNOTATION: parameter or return annotations changed (with nothing else, every call
  binds as before and the code is the same: 2.13 -> 2.14.1 has 714 parameter-only ones
  against 310 real signature changes, and ~400 return-only ones), or a class's bases
  differ only in typing bases (``Generic[T]``, the file's typing stubs: ``typing_bases``).
- DECORATOR: decorators or registrations (ops, backends, table entries) changed.
- BODY: the normalised body changed (formatting, comments, docstrings alone never do).
- RENAMED: a removed and an added symbol of the same kind with the same normalised body
  (functions, methods: non-trivial bodies, matched one to one) or the same members
  (classes; their members are paired as renamed too), in one file or moved across the
  files of one batch (:func:`diff_many`; ``renamed_from`` is then ``path::qualname``).

A class itself changes only when its bases, decorators or own non-member statements
change; member changes are reported on the members. :func:`diff_sources` indexes the new
version fully and the old one by reusing the new version's unchanged top-level statements
(``symbols.index_against``), which is what makes a release diff fast.

This module does not read files, run in parallel (see ``release_diff``) or judge impact.
"""

from __future__ import annotations

import ast
import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import lru_cache

from instep.impact.model import ChangeKind, Stage, SymbolChange
from instep.impact.upstream.file_index import index_against, index_text
from instep.impact.upstream.kept_names import kept_old_names
from instep.impact.upstream.stages import registry_stage
from instep.impact.upstream.typing_bases import typing_classes, typing_only
from instep.pyindex.model import Symbol, SymbolKind
from instep.pyindex.symbols import FileIndex, decode_or_error
from instep.pyindex.unparse import unparse

log = logging.getLogger(__name__)

_RANK = {
    ChangeKind.REMOVED: 0,
    ChangeKind.RENAMED: 1,
    ChangeKind.SIGNATURE: 2,
    ChangeKind.DECORATOR: 3,
    ChangeKind.VALUE: 4,
    ChangeKind.BODY: 5,
    ChangeKind.ANNOTATION: 6,
    ChangeKind.ADDED: 7,
}
_CALLABLES = (SymbolKind.FUNCTION, SymbolKind.METHOD)
_VALUES = (SymbolKind.ASSIGNMENT, SymbolKind.CLASS_ATTRIBUTE)
# bump when what a diff reports changes (5: typing-only bases; 6: stage of registered defs)
DIFF_FORMAT_VERSION = 6
DETAIL_VALUE_CHARS = 120
MIN_RENAME_LINES = 3  # a function must span this many lines to be matched by body alone


def _clip(text: str | None, limit: int = DETAIL_VALUE_CHARS) -> str:
    text = "" if text is None else text
    return text if len(text) <= limit else text[: limit - 3] + "..."


@lru_cache(maxsize=4096)
def _stripped(signature: str, *, defaults: bool, annotations: bool) -> str:
    """``signature`` without its defaults and/or annotations ('x: int = 1' -> 'x'); the
    input if it does not parse."""
    try:
        fn = ast.parse(f"def f({signature}): pass").body[0]
    except SyntaxError:
        return signature
    assert isinstance(fn, ast.FunctionDef)
    a = fn.args
    if defaults:
        a.defaults = []
        a.kw_defaults = [None] * len(a.kwonlyargs)
    if annotations:
        for arg in (*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg):
            if arg is not None:
                arg.annotation = None
    return unparse(a)


def _reg_keys(sym: Symbol) -> set[str]:
    return {
        f"{r.registrar}({r.key}{'.' + r.overload if r.overload else ''})" for r in sym.registrations
    }


def compare(
    old: Symbol, new: Symbol, typing: frozenset[str] = frozenset()
) -> tuple[set[ChangeKind], list[str]]:
    """How two versions of a symbol differ, with details (``typing``: typing_bases)."""
    aspects: set[ChangeKind] = set()
    details: list[str] = []
    if old.kind != new.kind:
        aspects.add(ChangeKind.SIGNATURE)
        details.append(f"kind: {old.kind} -> {new.kind}")
    if old.kind in _CALLABLES and new.kind in _CALLABLES and old.signature != new.signature:
        a, b = old.signature or "", new.signature or ""
        if _stripped(a, defaults=True, annotations=True) != _stripped(
            b, defaults=True, annotations=True
        ):
            aspects.add(ChangeKind.SIGNATURE)
            details.append(f"signature: ({a}) -> ({b})")
        elif _stripped(a, defaults=False, annotations=True) != _stripped(
            b, defaults=False, annotations=True
        ):
            aspects.add(ChangeKind.VALUE)
            details.append(f"defaults: ({a}) -> ({b})")
        else:
            aspects.add(ChangeKind.ANNOTATION)
            details.append(f"annotations: ({a}) -> ({b})")
    if old.kind in _CALLABLES and new.kind in _CALLABLES and old.returns != new.returns:
        aspects.add(ChangeKind.ANNOTATION)
        details.append(f"returns: {_clip(old.returns or '-')} -> {_clip(new.returns or '-')}")
    if old.bases != new.bases:
        _bases(old, new, typing, aspects, details)
    old_regs, new_regs = _reg_keys(old), _reg_keys(new)
    if old.decorators != new.decorators or old_regs != new_regs:
        aspects.add(ChangeKind.DECORATOR)
        parts = []
        plus = [d for d in new.decorators if d not in old.decorators]
        minus = [d for d in old.decorators if d not in new.decorators]
        if plus or minus:
            parts.append(
                "decorators: "
                + " ".join(
                    [*(f"+@{_clip(d, 80)}" for d in plus), *(f"-@{_clip(d, 80)}" for d in minus)]
                )
            )
        if old_regs != new_regs:
            added = sorted(new_regs - old_regs)
            removed = sorted(old_regs - new_regs)
            parts.append(
                "registrations: "
                + " ".join([*(f"+{k}" for k in added), *(f"-{k}" for k in removed)])
            )
        details.append("; ".join(parts) if parts else "decorators reordered")
    if old.body_hash != new.body_hash:
        if new.kind in _VALUES and old.kind in _VALUES:
            aspects.add(ChangeKind.VALUE)
            details.append(f"value: {_clip(old.value)} -> {_clip(new.value)}")
            if old.signature != new.signature:
                details.append(f"annotation: {old.signature} -> {new.signature}")
        else:
            aspects.add(ChangeKind.BODY)
            details.append("body changed")
    return aspects, details


def _bases(
    old: Symbol, new: Symbol, typing: frozenset[str], aspects: set[ChangeKind], details: list[str]
) -> None:
    """A class's bases changed: SIGNATURE, or ANNOTATION when only typing bases differ."""
    what = f"({', '.join(old.bases)}) -> ({', '.join(new.bases)})"
    if typing_only(old.bases, new.bases, typing):
        aspects.add(ChangeKind.ANNOTATION)  # only type checkers read the difference
        details.append(f"bases (typing only): {what}")
    else:
        aspects.add(ChangeKind.SIGNATURE)
        details.append(f"bases: {what}")


def _change(
    path: str,
    stage: Stage,
    kind: ChangeKind,
    old: Symbol | None,
    new: Symbol | None,
    aspects: set[ChangeKind] = frozenset(),  # type: ignore[assignment]
    details: list[str] | None = None,
    renamed_from: str | None = None,
) -> SymbolChange:
    sym = new if new is not None else old
    assert sym is not None
    also = tuple(sorted(set(aspects) - {kind}, key=_RANK.__getitem__))
    registrars = [r.registrar for s in (old, new) if s is not None for r in s.registrations]
    if registrars:  # a registered def takes effect where its registry is consulted
        stage = registry_stage(registrars) or stage
    return SymbolChange(
        path=path,
        qualname=sym.qualname,
        kind=kind,
        symbol_kind=sym.kind,
        stage=stage,
        old=old,
        new=new,
        detail="; ".join(details or []),
        renamed_from=renamed_from,
        also=also,
    )


def symbol_change(
    path: str,
    stage: Stage,
    old: Symbol | None,
    new: Symbol | None,
    typing: frozenset[str] = frozenset(),
) -> SymbolChange | None:
    """How one symbol changed between two versions (None: not at all, or absent from both):
    what :func:`diff_file` says of a symbol with the same qualname on both sides."""
    if old is None or new is None:
        if old is None and new is None:
            return None
        kind = ChangeKind.ADDED if old is None else ChangeKind.REMOVED
        return _change(path, stage, kind, old, new)
    aspects, details = compare(old, new, typing)
    if not aspects:
        return None
    kind = min(aspects, key=_RANK.__getitem__)
    return _change(path, stage, kind, old, new, aspects, details)


class MemberTable:
    """qualname -> the symbols inside it (methods of a class, ...), built once per index."""

    def __init__(self, table: dict[str, list[Symbol]]) -> None:
        self.table = table

    @classmethod
    def of(cls, index: FileIndex | None) -> MemberTable:
        table: dict[str, list[Symbol]] = {}
        for qual, sym in (index.symbols if index is not None else {}).items():
            dot = qual.find(".")
            while dot > 0:
                table.setdefault(qual[:dot], []).append(sym)
                dot = qual.find(".", dot + 1)
        return cls(table)

    def members(self, qualname: str) -> list[Symbol]:
        return self.table.get(qualname, [])


@dataclass
class _Side:
    """An added or removed symbol waiting for a rename partner."""

    path: str
    symbol: Symbol
    index: MemberTable


def _class_fingerprints(side: _Side) -> tuple[tuple, tuple] | None:
    members = side.index.members(side.symbol.qualname)
    if not members:
        return None
    n = len(side.symbol.qualname) + 1
    exact = tuple(sorted((m.qualname[n:], str(m.kind), m.body_hash) for m in members))
    loose = tuple(sorted(m.qualname[n:] for m in members))
    base = (side.symbol.bases, side.symbol.body_hash)
    return (base, exact), (side.symbol.bases, loose)


def _unique_pairs(
    removed: list[_Side], added: list[_Side], key: Callable[[_Side], object | None]
) -> list[tuple[_Side, _Side]]:
    rem: dict[object, list[_Side]] = {}
    add: dict[object, list[_Side]] = {}
    for s in removed:
        k = key(s)
        if k is not None:
            rem.setdefault(k, []).append(s)
    for s in added:
        k = key(s)
        if k is not None:
            add.setdefault(k, []).append(s)
    return [(r[0], add[k][0]) for k, r in rem.items() if len(r) == 1 and len(add.get(k, ())) == 1]


# 65 lines: the three passes (classes, their members, bodies) share the taken-sets.
def _match_renames(
    removed: list[_Side], added: list[_Side], cross_file: bool
) -> list[tuple[_Side, _Side]]:
    """Pairs (old, new) of renamed symbols; members of renamed classes are paired too."""
    renames = _Renames(removed, added, cross_file)
    renames.classes()  # 1. classes: same bases and members (exactly, then by member names)
    renames.members()  # members of renamed classes follow their class
    renames.bodies()  # 2. functions and methods: same kind and the same non-trivial body
    return renames.pairs


class _Renames:
    """The pairs of :func:`_match_renames`, each old and new side taken once."""

    def __init__(self, removed: list[_Side], added: list[_Side], cross_file: bool) -> None:
        self.removed, self.added, self.cross_file = removed, added, cross_file
        self.pairs: list[tuple[_Side, _Side]] = []
        self.taken_old: set[tuple[str, str]] = set()
        self.taken_new: set[tuple[str, str]] = set()

    def ok(self, a: _Side, b: _Side) -> bool:
        return (a.path != b.path) if self.cross_file else True

    def take(self, a: _Side, b: _Side) -> None:
        self.pairs.append((a, b))
        self.taken_old.add((a.path, a.symbol.qualname))
        self.taken_new.add((b.path, b.symbol.qualname))

    @staticmethod
    def free(sides: list[_Side], taken: set[tuple[str, str]]) -> list[_Side]:
        return [s for s in sides if (s.path, s.symbol.qualname) not in taken]

    def classes(self) -> None:
        classes_old = [s for s in self.removed if s.symbol.kind is SymbolKind.CLASS]
        classes_new = [s for s in self.added if s.symbol.kind is SymbolKind.CLASS]
        if not (classes_old and classes_new):
            return
        fp_old = {id(s): _class_fingerprints(s) for s in classes_old}
        fp_new = {id(s): _class_fingerprints(s) for s in classes_new}
        for tier in (0, 1):

            def key(s: _Side, tier: int = tier) -> object | None:
                fp = fp_old.get(id(s)) or fp_new.get(id(s))
                return fp[tier] if fp else None

            for a, b in _unique_pairs(
                self.free(classes_old, self.taken_old), self.free(classes_new, self.taken_new), key
            ):
                if self.ok(a, b):
                    self.take(a, b)

    def members(self) -> None:
        by_old = {(s.path, s.symbol.qualname): s for s in self.removed}
        by_new = {(s.path, s.symbol.qualname): s for s in self.added}
        for a, b in list(self.pairs):
            pa, pb = a.symbol.qualname + ".", b.symbol.qualname + "."
            for m in a.index.members(a.symbol.qualname):
                old_side = by_old.get((a.path, m.qualname))
                new_side = by_new.get((b.path, pb + m.qualname[len(pa) :]))
                if (
                    old_side
                    and new_side
                    and (a.path, m.qualname) not in self.taken_old
                    and (b.path, new_side.symbol.qualname) not in self.taken_new
                ):
                    self.take(old_side, new_side)

    def bodies(self) -> None:
        def body_key(s: _Side) -> object | None:
            sym = s.symbol
            if sym.kind not in _CALLABLES and sym.kind is not SymbolKind.CLASS:
                return None
            if sym.end_line - sym.line + 1 < MIN_RENAME_LINES:
                return None
            return (sym.kind, sym.body_hash, sym.bases)

        for a, b in _unique_pairs(
            self.free(self.removed, self.taken_old), self.free(self.added, self.taken_new), body_key
        ):
            if self.ok(a, b) and (
                a.symbol.kind is not SymbolKind.CLASS or _class_fingerprints(a) is None
            ):
                self.take(a, b)


def _diff_common(
    path: str, old: FileIndex | None, new: FileIndex | None, stage: Stage
) -> tuple[list[SymbolChange], list[_Side], list[_Side]]:
    if (old is not None and old.error) or (new is not None and new.error):
        return [], [], []  # the unreadable side was logged when indexed; nothing to compare
    old_syms = old.symbols if old is not None else {}
    new_syms = new.symbols if new is not None else {}
    changes: list[SymbolChange] = []
    gone = [s for q, s in old_syms.items() if q not in new_syms]
    came = [s for q, s in new_syms.items() if q not in old_syms]
    empty = MemberTable({})
    old_members = MemberTable.of(old) if any(x.kind is SymbolKind.CLASS for x in gone) else empty
    new_members = MemberTable.of(new) if any(x.kind is SymbolKind.CLASS for x in came) else empty
    removed = [_Side(path, x, old_members) for x in gone]
    added = [_Side(path, x, new_members) for x in came]
    typing: frozenset[str] | None = None  # the typing classes, found when bases differ
    for qual, n in new_syms.items():
        o = old_syms.get(qual)
        if o is None:
            continue
        if (
            o.body_hash == n.body_hash
            and o.signature == n.signature
            and o.returns == n.returns
            and o.kind == n.kind
            and o.decorators == n.decorators
            and o.bases == n.bases
            and o.registrations == n.registrations
        ):
            continue
        if typing is None and o.bases != n.bases:
            typing = typing_classes(old) | typing_classes(new)
        change = symbol_change(path, stage, o, n, typing or frozenset())
        if change is not None:
            changes.append(change)
    return changes, removed, added


def _renamed(a: _Side, b: _Side, stage: Stage, moved: bool) -> SymbolChange:
    aspects, details = compare(a.symbol, b.symbol)
    origin = f"{a.path}::{a.symbol.qualname}" if moved else a.symbol.qualname
    details.insert(0, f"{'moved' if moved else 'renamed'} from {origin}")
    aspects.add(ChangeKind.RENAMED)
    return _change(b.path, stage, ChangeKind.RENAMED, a.symbol, b.symbol, aspects, details, origin)


def _leftovers(
    removed: list[_Side], added: list[_Side], pairs: list[tuple[_Side, _Side]]
) -> tuple[list[_Side], list[_Side]]:
    gone = {(a.path, a.symbol.qualname) for a, _ in pairs}
    came = {(b.path, b.symbol.qualname) for _, b in pairs}
    return (
        [s for s in removed if (s.path, s.symbol.qualname) not in gone],
        [s for s in added if (s.path, s.symbol.qualname) not in came],
    )


def _sort_key(c: SymbolChange) -> tuple:
    sym = c.new or c.old
    return (c.path, sym.line if sym else 0, c.qualname)


@dataclass
class FileDiff:
    """One file's changes plus what cross-file rename matching needs (small, cacheable)."""

    path: str
    changes: list[SymbolChange]
    members: dict[tuple[str, str], list[Symbol]]  # ('old'|'new', class) -> its members
    new_imports: frozenset[str] = frozenset()  # local names the new version imports
    new_module: str = ""


def diff_file(path: str, old: FileIndex | None, new: FileIndex | None, stage: Stage) -> FileDiff:
    """:func:`diff_files` keeping the members of added/removed classes (for :func:`join`)."""
    changes, removed, added = _diff_common(path, old, new, stage)
    pairs = _match_renames(removed, added, cross_file=False)
    changes += [_renamed(a, b, stage, moved=False) for a, b in pairs]
    removed, added = _leftovers(removed, added, pairs)
    changes += [_change(path, stage, ChangeKind.REMOVED, s.symbol, None) for s in removed]
    changes += [_change(path, stage, ChangeKind.ADDED, None, s.symbol) for s in added]
    changes.sort(key=_sort_key)
    members: dict[tuple[str, str], list[Symbol]] = {}
    for side, sides in (("old", removed), ("new", added)):
        for x in sides:
            if x.symbol.kind is SymbolKind.CLASS:
                members[(side, x.symbol.qualname)] = x.index.members(x.symbol.qualname)
    return FileDiff(
        path,
        changes,
        members,
        frozenset(new.imports) if new is not None else frozenset(),
        new.module if new is not None else "",
    )


def diff_files(
    path: str, old: FileIndex | None, new: FileIndex | None, stage: Stage
) -> list[SymbolChange]:
    """Changes of one file (``old``/``new`` None: the file was added/removed)."""
    return diff_file(path, old, new, stage).changes


def join(diffs: list[FileDiff]) -> list[SymbolChange]:
    """All changes of a batch of file diffs, symbols moved across files made RENAMED."""
    changes: list[SymbolChange] = []
    removed: list[_Side] = []
    added: list[_Side] = []
    stages: dict[str, Stage] = {}
    by_path = {d.path: d for d in diffs}
    for d in diffs:
        old_table = MemberTable({q: m for (side, q), m in d.members.items() if side == "old"})
        new_table = MemberTable({q: m for (side, q), m in d.members.items() if side == "new"})
        for change in d.changes:
            # the path's stage (a registered def's own stage is its registry's, which
            # _change derives again for every change made below)
            if not any(x is not None and x.registrations for x in (change.old, change.new)):
                stages[d.path] = change.stage
            else:
                stages.setdefault(d.path, change.stage)
            if change.kind is ChangeKind.REMOVED:
                removed.append(_Side(d.path, change.old, old_table))  # type: ignore[arg-type]
            elif change.kind is ChangeKind.ADDED:
                added.append(_Side(d.path, change.new, new_table))  # type: ignore[arg-type]
            else:
                changes.append(change)
    moved = _match_renames(removed, added, cross_file=True)
    for a, b in moved:
        change = _renamed(a, b, stages[b.path], moved=True)
        still = by_path.get(a.path)
        head = a.symbol.qualname.split(".", 1)[0]
        if still is not None and head in still.new_imports:
            change = _with_detail(change, f"still importable from {still.new_module}")
        changes.append(change)
    removed, added = _leftovers(removed, added, moved)
    changes += [
        _change(s.path, stages[s.path], ChangeKind.REMOVED, s.symbol, None) for s in removed
    ]
    changes += [_change(s.path, stages[s.path], ChangeKind.ADDED, None, s.symbol) for s in added]
    changes = kept_old_names(changes)
    changes.sort(key=_sort_key)
    return changes


def diff_many(
    pairs: list[tuple[str, FileIndex | None, FileIndex | None]],
    stage_of: Callable[[str], Stage],
) -> list[SymbolChange]:
    """Per-file diffs plus symbols moved across the files of the batch (RENAMED 'moved')."""
    return join([diff_file(path, old, new, stage_of(path)) for path, old, new in pairs])


def _with_detail(change: SymbolChange, extra: str) -> SymbolChange:
    return replace(change, detail=f"{change.detail}; {extra}" if change.detail else extra)


@dataclass
class SourceDiff:
    """Result of :func:`diff_sources` for one file."""

    path: str
    old: FileIndex | None
    new: FileIndex | None
    file_diff: FileDiff
    old_reused: bool = False  # the old index was built by reusing the new one's statements

    @property
    def changes(self) -> list[SymbolChange]:
        return self.file_diff.changes


def diff_sources(
    path: str,
    old: bytes | None,
    new: bytes | None,
    stage: Stage,
    *,
    new_index: FileIndex | None = None,
    old_index: FileIndex | None = None,
) -> SourceDiff:
    """Index and diff two versions of one file's bytes, the fast way.

    The new version is indexed fully (or ``new_index`` is used, e.g. from a cache); the old
    one by :func:`~instep.pyindex.symbols.index_against` the new one, so only the old
    statements whose text differs are parsed. The result equals
    ``diff_files(path, index_source(path, old), index_source(path, new), stage)``.
    """
    new_text: str | None = None
    if new is not None and new_index is None:
        new_text, new_index = decode_or_error(path, new)
        if new_text is not None:
            new_index = index_text(path, new_text)
    reused = False
    if old is not None and old_index is None:
        old_text, old_index = decode_or_error(path, old)
        if old_text is not None:
            if new_text is None and new is not None and new_index is not None:
                new_text, _ = decode_or_error(path, new)  # new index came from a cache
            if new_text is not None and new_index is not None and not new_index.error:
                old_index = index_against(path, old_text, new_index, new_text)
                reused = True
            else:
                old_index = index_text(path, old_text)
    return SourceDiff(
        path, old_index, new_index, diff_file(path, old_index, new_index, stage), reused
    )
