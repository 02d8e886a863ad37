"""Members a class of the new upstream inherits from a compiled extension type.

``class _StreamBase(torch.Stream): pass`` keeps the name ``_StreamBase`` but its Python
members are gone: they now come from ``torch.Stream``, a type of the extension
``torch._C``, whose members only its stubs show (``torch/_C/__init__.pyi``). A base that
is no Python class of the new upstream is looked up as a class of the stubs of the module
that names it, or of a module that module star-imports (``from torch._C import *`` in
``torch/__init__.py``); the member counts when that stub class declares it. A base that
no stub declares, or a stub class without the member, answers nothing (stubs are not
complete, and an unread base is no evidence). Nothing here picks a verdict.
"""

from __future__ import annotations

import ast


class ExtensionBases:
    """``declares('torch._streambase._StreamBase', 'query')`` -> evidence or None."""

    def __init__(self, resolver, probes) -> None:
        self.resolver = resolver
        self.probes = probes  # join/probe_outcomes.ProbeOutcomes: reads the new side's stubs
        self._memo: dict[tuple[str, str], str | None] = {}

    def declares(self, cls_dotted: str, member: str) -> str | None:
        key = (cls_dotted, member)
        if key not in self._memo:
            self._memo[key] = self._declares(cls_dotted, member)
        return self._memo[key]

    def _declares(self, cls_dotted: str, member: str) -> str | None:
        if self.probes is None:
            return None
        cls = self.resolver.class_of(cls_dotted)
        if cls is None:
            return None
        for module, qual in self.resolver.ancestors(*cls):
            sym = self.resolver.index(module).symbols.get(qual)
            for base in sym.bases if sym is not None else ():
                dotted = self._base_dotted(module, base)
                if dotted is None or self.resolver.class_of(dotted) is not None:
                    continue  # a Python class: ancestors() reads it
                found = self._stub_class(dotted)
                if found is not None and member in _members(found[1]):
                    return (
                        f"`{qual}` derives from `{base}`, an extension type: its stub "
                        f"`{found[0]}` declares `{found[1].name}.{member}`"
                    )
        return None

    def _base_dotted(self, module: str, base: str) -> str | None:
        idx = self.resolver.index(module)
        head, _, tail = base.partition(".")
        if head in idx.imports:
            dotted = idx.imports[head] + (f".{tail}" if tail else "")
        elif head in idx.symbols:
            dotted = f"{module}.{base}"
        else:
            return None
        return self.resolver.resolve(dotted)

    def _stub_class(self, dotted: str) -> tuple[str, ast.ClassDef] | None:
        owner, _, name = dotted.rpartition(".")
        if not owner:
            return None
        for source in (owner, *self.probes.star_sources("new", owner)):
            found = self.probes.stub_class("new", source, name)
            if found is not None:
                return found
        return None


def _members(node: ast.ClassDef) -> set[str]:
    out: set[str] = set()
    for n in node.body:
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out.add(n.name)
        elif isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name):
            out.add(n.target.id)
    return out
