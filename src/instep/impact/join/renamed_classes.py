"""Classes the new upstream renamed, and the members of the old name that survive on the new.

``WrapperCodeGen`` became ``PythonWrapperCodegen`` without an alias: the symbol diff says
the class is removed (its body changed) but pairs one or more of its members with the
same member of the new class (``PythonWrapperCodegen.x`` renamed from
``WrapperCodeGen.x``), or pairs the class itself. That pairing is the evidence of
succession used here; a class the new upstream still defines, or whose members went to
two different classes, has no successor.

A downstream override or use of ``Old.m`` is then not a removal of ``m`` when the
successor still has ``m`` (itself or through a base) with the same parameters: the one
break is the old class name at the import or subclass line, which couples on its own.
A member gone from the successor, or whose parameters changed, is left to the rules.
Nothing here decides a verdict.
"""

from __future__ import annotations

from instep.impact.model import ChangeKind, SymbolChange, UpstreamChange
from instep.pyindex.model import SymbolKind, module_of


class RenamedClasses:
    """Old class (dotted) -> its successor (module, qualname) in the new upstream."""

    def __init__(self, units: list[UpstreamChange], resolver) -> None:
        self.resolver = resolver
        found: dict[str, set[tuple[str, str]]] = {}
        for u in units:
            for c in u.changes:
                pair = _class_pair(c)
                if pair is not None:
                    found.setdefault(pair[0], set()).add(pair[1])
        self.successor: dict[str, tuple[str, str]] = {}
        for old, news in found.items():
            if len(news) != 1 or resolver.class_of(old) is not None:
                continue  # ambiguous, or the old name is still a class
            new = next(iter(news))
            if resolver.class_of(f"{new[0]}.{new[1]}") is not None:
                self.successor[old] = new

    def survives(self, target: str, c: SymbolChange) -> str | None:
        """Why the removed or renamed member ``target`` (``module.Old.m``, as the
        downstream names it) still exists, or None."""
        if c.kind not in (ChangeKind.REMOVED, ChangeKind.RENAMED) or c.old is None:
            return None
        if c.symbol_kind not in (SymbolKind.METHOD, SymbolKind.CLASS_ATTRIBUTE):
            return None
        found = self._successor_member(target)
        if found is None:
            return None
        old_cls, _, member = target.rpartition(".")
        new = self.successor[old_cls]
        module, rest = self.resolver.split(found)
        sym = self.resolver.index(module).symbols.get(rest)
        if sym is None or sym.kind is not c.old.kind or sym.signature != c.old.signature:
            return None
        return (
            f"`{old_cls.rsplit('.', 1)[-1]}` was renamed `{new[1]}`, which still has "
            f"`{member}({sym.signature or ''})`: only the class name breaks"
        )

    def successor_has(self, target: str) -> bool:
        """Whether the successor of the class of ``target`` (``module.Old.m``) has a
        member ``m`` (itself or through a base), whatever its parameters."""
        return self._successor_member(target) is not None

    def _successor_member(self, target: str):
        """Where the successor of ``target``'s class defines ``m`` (``find_member``), or
        None: no successor, or it lacks the member."""
        old_cls, _, member = target.rpartition(".")
        new = self.successor.get(old_cls)
        return None if new is None else self.resolver.find_member(new[0], new[1], member)


def _class_pair(c: SymbolChange) -> tuple[str, tuple[str, str]] | None:
    """(old class dotted, (new module, new class)) when ``c`` pairs a class with a class
    or a member ``Old.x`` with the same member ``New.x``; else None."""
    if c.kind is not ChangeKind.RENAMED or not c.renamed_from:
        return None
    origin, _, old_q = c.renamed_from.rpartition("::")
    old_module = module_of(origin) if origin else c.module
    if c.symbol_kind is SymbolKind.CLASS and "." not in old_q and "." not in c.qualname:
        return f"{old_module}.{old_q}", (c.module, c.qualname)
    old, new = old_q.split("."), c.qualname.split(".")
    if len(old) < 2 or len(old) != len(new) or old[1:] != new[1:] or old[0] == new[0]:
        return None
    return f"{old_module}.{old[0]}", (c.module, new[0])
