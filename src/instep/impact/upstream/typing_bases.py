"""Class bases that only type checkers read: ``Generic[T]``, ``Protocol``, and the typing
stubs of one file (torch 2.14's ``SymInt(_SymTypingMagic[builtins.int, "SymInt", ...])``).

A class that gains or loses such a base, or whose base only changes its type parameters
(``Generic[T]`` -> ``Generic[T, U]``), behaves as before: ``isinstance(x, C)`` tests the
same class, every call and attribute read finds what it found. symbol_diff files the
change as ANNOTATION (``bases (typing only): ...``), not SIGNATURE.

A *typing class* of a file is a class all of whose bases are typing bases (at least one a
``Generic``/``Protocol``, directly or through another typing class of the file), whose
methods are stubs (``...``, ``pass``, one ``raise``: ``pyindex.neutral.is_stub_body``;
``@overload`` declarations) and whose class attributes are type aliases (``X: TypeAlias =
...``). Abstract bases with real defaults, or a class of another file, are not typing
classes: adding one is a SIGNATURE change as before. Nothing here reads files.
"""

from __future__ import annotations

from instep.pyindex.model import Symbol, SymbolKind
from instep.pyindex.symbols import FileIndex

GENERIC_BASES = frozenset(
    {
        "Generic",
        "typing.Generic",
        "Protocol",
        "typing.Protocol",
        "typing_extensions.Protocol",
        "typing_extensions.Generic",
    }
)
NEUTRAL_BASES = frozenset({"object"})


def origin(base: str) -> str:
    """``_SymTypingMagic`` of ``_SymTypingMagic[builtins.int, 'SymInt']``."""
    return base.split("[", 1)[0].strip()


def _stub_members(members: list[Symbol]) -> bool:
    for m in members:
        if m.kind is SymbolKind.METHOD:
            if not m.stub:
                return False
        elif m.kind is SymbolKind.CLASS_ATTRIBUTE:
            if not (m.signature or "").endswith("TypeAlias"):
                return False
        else:
            return False
    return True


def typing_classes(index: FileIndex | None) -> frozenset[str]:
    """The typing classes of one file (module-level class names)."""
    if index is None:
        return frozenset()
    candidates: dict[str, tuple[str, ...]] = {}
    members: dict[str, list[Symbol]] = {}
    for qual, sym in index.symbols.items():
        top, _, rest = qual.partition(".")
        if not rest and sym.kind is SymbolKind.CLASS and sym.bases:
            candidates[qual] = tuple(origin(b) for b in sym.bases)
        elif rest and "." not in rest:
            members.setdefault(top, []).append(sym)
    found: set[str] = set()
    grew = True
    while grew:  # a typing class may derive from another (torch 2.14: three levels)
        grew = False
        for name, bases in candidates.items():
            if name in found:
                continue
            known = GENERIC_BASES | NEUTRAL_BASES | found
            if not all(b in known for b in bases):
                continue
            if not any(b in GENERIC_BASES or b in found for b in bases):
                continue
            if _stub_members(members.get(name, [])):
                found.add(name)
                grew = True
    return frozenset(found)


def typing_only(old: tuple[str, ...], new: tuple[str, ...], typing: frozenset[str]) -> bool:
    """Do two base lists differ only in typing bases (added, removed, or re-parameterised)?"""

    def runtime(bases: tuple[str, ...]) -> list[str]:
        return [o for o in map(origin, bases) if o not in GENERIC_BASES | NEUTRAL_BASES | typing]

    # the same runtime bases in the same order: what differs is a typing base or a type
    # parameter (``Foo[int]`` is ``Foo`` at run time, through ``__mro_entries__``)
    return runtime(old) == runtime(new)
