"""What changed between two versions of one ATen operator schema, argument by argument.

:func:`compare_schemas` takes two :class:`~instep.impact.upstream.op_schemas.Schema`
(parsed by ``op_schemas.parse_schema``, the small parser of the schema grammar's
argument list) and returns the typed differences: an argument removed, added (with or
without a default), renamed, moved, its type, its alias annotation or mutability, its
default or its keyword-only place changed; the returns changed in count or type, in
alias annotation, or in names only.

Types are compared as a C++ kernel sees them: ``int[2]`` and ``int[]`` are both an
``IntArrayRef`` (a size annotation only), ``SymInt`` and ``int`` differ only in whether
the kernel may take symbolic sizes, an alias annotation ``(a)`` is not part of the type
but its ``!`` (a mutable argument, a mutable return) is.

Renames are told apart from a removal plus an addition by pairing each argument that
left with one that arrived of the same C++ type and keyword-only place, the one at the
same position first (``_cdist_backward``'s ``Tensor grad`` -> ``Tensor grad_output``).

A pure function: nothing here reads files or decides what a difference means to a
caller (``join/kernel_couplings`` and ``join/op_couplings`` do).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from instep.impact.upstream.op_schemas import Argument, Schema, split_top
from instep.pyindex.model import Vocab


class SchemaDifferenceKind(Vocab):
    ARGUMENT_REMOVED = "argument_removed"
    ARGUMENT_ADDED = "argument_added"  # without a default
    ARGUMENT_ADDED_WITH_DEFAULT = "argument_added_with_default"
    ARGUMENT_RENAMED = "argument_renamed"
    ARGUMENTS_REORDERED = "arguments_reordered"
    TYPE_CHANGED = "type_changed"  # another C++ type: int -> int?, Tensor -> Tensor[]
    TYPE_SYMINT = "type_symint"  # int <-> SymInt only (int[] <-> SymInt[], int? <-> SymInt?)
    TYPE_SIZE = "type_size"  # an array's size annotation only: int[2] <-> int[]
    MUTABILITY_CHANGED = "mutability_changed"  # Tensor <-> Tensor(a!)
    ALIAS_CHANGED = "alias_changed"  # Tensor <-> Tensor(a), (a) <-> (b): mutability kept
    DEFAULT_ADDED = "default_added"
    DEFAULT_REMOVED = "default_removed"
    DEFAULT_CHANGED = "default_changed"
    KEYWORD_ONLY_CHANGED = "keyword_only_changed"  # moved across the ``*``
    RETURNS_CHANGED = "returns_changed"  # count, or C++ type of a return
    RETURN_ALIAS_CHANGED = "return_alias_changed"  # alias annotation of a return only
    RETURN_NAMES_CHANGED = "return_names_changed"  # (Tensor values, ...) names only


K = SchemaDifferenceKind


@dataclass(frozen=True)
class SchemaDifference:
    kind: SchemaDifferenceKind
    argument: str  # the argument's old name ('' for the returns and the order)
    old: str  # what it was ('' when added)
    new: str  # what it is ('' when removed)

    def text(self) -> str:
        """One human clause: ``argument 'grad' renamed to 'grad_output'``."""
        a, old, new = self.argument, self.old, self.new
        return {
            K.ARGUMENT_REMOVED: f"argument '{a}' removed",
            K.ARGUMENT_ADDED: f"argument `{new}` added without a default",
            K.ARGUMENT_ADDED_WITH_DEFAULT: f"argument `{new}` added",
            K.ARGUMENT_RENAMED: f"argument '{a}' renamed to '{new}'",
            K.ARGUMENTS_REORDERED: f"arguments reordered: ({old}) -> ({new})",
            K.TYPE_CHANGED: f"argument '{a}' type `{old}` -> `{new}`",
            K.TYPE_SYMINT: f"argument '{a}' type `{old}` -> `{new}`",
            K.TYPE_SIZE: f"argument '{a}' size annotation `{old}` -> `{new}`",
            K.MUTABILITY_CHANGED: f"argument '{a}' mutability `{old}` -> `{new}`",
            K.ALIAS_CHANGED: f"argument '{a}' alias annotation `{old}` -> `{new}`",
            K.DEFAULT_ADDED: f"argument '{a}' gained the default `{new}`",
            K.DEFAULT_REMOVED: f"argument '{a}' lost its default `{old}`",
            K.DEFAULT_CHANGED: f"argument '{a}' default `{old}` -> `{new}`",
            K.KEYWORD_ONLY_CHANGED: f"argument '{a}' is now {new}",
            K.RETURNS_CHANGED: f"returns `{old}` -> `{new}`",
            K.RETURN_ALIAS_CHANGED: f"returns' alias annotation `{old}` -> `{new}`",
            K.RETURN_NAMES_CHANGED: f"returns' names `{old}` -> `{new}`",
        }[self.kind]


_ANNOTATION = re.compile(r"\(([^()]*)\)")
_SIZE = re.compile(r"\[\d+\]")


@dataclass(frozen=True)
class _Type:
    """A schema type split the way a kernel's C++ signature sees it."""

    written: str  # 'Tensor(a!)[]'
    base: str  # without the alias annotation: 'Tensor[]'
    annotation: str  # 'a!' ('' when none)

    @property
    def mutable(self) -> bool:
        return "!" in self.annotation

    @property
    def cpp(self) -> tuple[str, bool]:
        """The C++ type: the base without array sizes and SymInt read as int (both only
        annotations for the kernel's parameter type), and whether it is mutable."""
        return _SIZE.sub("[]", self.base).replace("SymInt", "int"), self.mutable


def _type(text: str) -> _Type:
    m = _ANNOTATION.search(text)
    annotation = m.group(1).replace(" ", "") if m else ""
    base = _ANNOTATION.sub("", text).replace(" ", "")
    return _Type(text.strip(), base, annotation)


def _returns(text: str) -> list[tuple[_Type, str]]:
    """``(Tensor(a!) values, Tensor indices)`` -> [(type, name), ...]; ``()`` -> []."""
    text = text.strip()
    if text.startswith("(") and text.endswith(")") and _balanced_outer(text):
        text = text[1:-1]
    out = []
    for part in split_top(text):
        typ, _, name = part.rpartition(" ")
        if not typ or _ANNOTATION.fullmatch(name) or not name.isidentifier():
            typ, name = part, ""  # 'Tensor', 'Tensor(a!)': no name
        out.append((_type(typ), name))
    return out


def _balanced_outer(text: str) -> bool:
    """Whether the first ``(`` of ``text`` closes at its last character (a tuple of
    returns, not ``Tensor(a!)``)."""
    depth = 0
    for i, ch in enumerate(text):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth == 0:
            return i == len(text) - 1
    return False


def _pair_renames(old: Schema, new: Schema) -> dict[str, str]:
    """Old name -> new name for the arguments that left and arrived as one: same C++
    type and keyword-only place, the one at the same position first."""
    new_names = {a.name for a in new.arguments}
    old_names = {a.name for a in old.arguments}
    gone = [(i, a) for i, a in enumerate(old.arguments) if a.name not in new_names]
    came = [(j, b) for j, b in enumerate(new.arguments) if b.name not in old_names]
    pairs: dict[str, str] = {}
    taken: set[str] = set()
    for i, a in gone:
        fits = [
            (j, b)
            for j, b in came
            if b.name not in taken
            and _type(b.type).cpp == _type(a.type).cpp
            and b.kwarg_only == a.kwarg_only
        ]
        if not fits:
            continue
        _, b = next(((j, b) for j, b in fits if j == i), fits[0])
        pairs[a.name] = b.name
        taken.add(b.name)
    return pairs


def _argument_differences(a: Argument, b: Argument) -> list[SchemaDifference]:
    out: list[SchemaDifference] = []
    ta, tb = _type(a.type), _type(b.type)
    if ta.cpp[0] != tb.cpp[0]:
        out.append(SchemaDifference(K.TYPE_CHANGED, a.name, ta.base, tb.base))
    else:
        if _SIZE.sub("[]", ta.base) != _SIZE.sub("[]", tb.base):
            out.append(SchemaDifference(K.TYPE_SYMINT, a.name, ta.base, tb.base))
        if ta.base.replace("SymInt", "int") != tb.base.replace("SymInt", "int"):
            out.append(SchemaDifference(K.TYPE_SIZE, a.name, ta.base, tb.base))
    if ta.mutable != tb.mutable:
        out.append(SchemaDifference(K.MUTABILITY_CHANGED, a.name, ta.written, tb.written))
    elif ta.annotation != tb.annotation:
        out.append(SchemaDifference(K.ALIAS_CHANGED, a.name, ta.written, tb.written))
    da, db = _default(a), _default(b)
    if da is None and db is not None:
        out.append(SchemaDifference(K.DEFAULT_ADDED, a.name, "", db))
    elif da is not None and db is None:
        out.append(SchemaDifference(K.DEFAULT_REMOVED, a.name, da, ""))
    elif da != db:
        out.append(SchemaDifference(K.DEFAULT_CHANGED, a.name, da or "", db or ""))
    if a.kwarg_only != b.kwarg_only:
        where = "keyword-only" if b.kwarg_only else "positional"
        out.append(SchemaDifference(K.KEYWORD_ONLY_CHANGED, a.name, "", where))
    return out


def _default(a: Argument) -> str | None:
    return a.default.replace(" ", "") if a.default is not None else None


def compare_schemas(old: Schema, new: Schema) -> tuple[SchemaDifference, ...]:
    """Every difference between two versions of one overload's schema, in argument order
    (the returns last); empty when they are the same up to spacing."""
    renames = _pair_renames(old, new)
    new_by_name = {b.name: b for b in new.arguments}
    out: list[SchemaDifference] = []
    kept_old: list[str] = []  # new names of the old arguments still there, in old order
    for a in old.arguments:
        target = renames.get(a.name, a.name)
        b = new_by_name.get(target)
        if b is None:
            out.append(SchemaDifference(K.ARGUMENT_REMOVED, a.name, f"{a.type} {a.name}", ""))
            continue
        if target != a.name:
            out.append(SchemaDifference(K.ARGUMENT_RENAMED, a.name, a.name, b.name))
        out.extend(_argument_differences(a, b))
        kept_old.append(b.name)
    arrived = {a.name for a in old.arguments} | set(renames.values())
    for b in new.arguments:
        if b.name in arrived:
            continue
        kind = K.ARGUMENT_ADDED if b.default is None else K.ARGUMENT_ADDED_WITH_DEFAULT
        out.append(SchemaDifference(kind, b.name, "", str(b)))
    kept_new = [b.name for b in new.arguments if b.name in set(kept_old)]
    if kept_old != kept_new:
        out.append(
            SchemaDifference(K.ARGUMENTS_REORDERED, "", ", ".join(kept_old), ", ".join(kept_new))
        )
    out.extend(_return_differences(old.returns, new.returns))
    return tuple(out)


def _return_differences(old: str, new: str) -> list[SchemaDifference]:
    if " ".join(old.split()) == " ".join(new.split()):
        return []
    ro, rn = _returns(old), _returns(new)
    if len(ro) != len(rn) or any(a.cpp != b.cpp for (a, _), (b, _) in zip(ro, rn, strict=True)):
        return [SchemaDifference(K.RETURNS_CHANGED, "", old, new)]
    out = []
    if any(a.annotation != b.annotation for (a, _), (b, _) in zip(ro, rn, strict=True)):
        out.append(SchemaDifference(K.RETURN_ALIAS_CHANGED, "", old, new))
    if [n for _, n in ro] != [n for _, n in rn]:
        out.append(SchemaDifference(K.RETURN_NAMES_CHANGED, "", old, new))
    return out
