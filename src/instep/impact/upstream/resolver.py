"""Resolve dotted upstream names to where the symbol is defined in the new upstream.

Downstream code writes ``torch._dynamo.optimize`` (a re-export) or overrides
``TritonKernel.codegen_body`` (defined on a base class); changes are keyed by the module
and class that define the symbol. The resolver follows module-level imports and class
bases through the upstream symbol index, parsing only the modules it is asked about
(cached by content hash). Static: nothing upstream is imported.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from functools import lru_cache

from instep.pyindex.model import SymbolKind, module_of

log = logging.getLogger(__name__)

MAX_HOPS = 6


class UpstreamResolver:
    """``resolve('torch._dynamo.optimize') -> 'torch._dynamo.eval_frame.optimize'``."""

    def __init__(self, paths: list[str], load_index: Callable[[str], object | None]) -> None:
        # module name -> path of its file in the (new) upstream snapshot
        self.module_paths: dict[str, str] = {module_of(p): p for p in paths}
        self._load_index = load_index
        self._indexes: dict[str, object | None] = {}
        self.resolve = lru_cache(maxsize=None)(self._resolve)  # type: ignore[method-assign]

    def index(self, module: str):  # -> FileIndex | None
        if module not in self._indexes:
            path = self.module_paths.get(module)
            self._indexes[module] = self._load_index(path) if path else None
        return self._indexes[module]

    def split(self, dotted: str) -> tuple[str | None, str]:
        """(longest module prefix that exists upstream, the rest) — rest may be ''."""
        parts = dotted.split(".")
        for cut in range(len(parts), 0, -1):
            mod = ".".join(parts[:cut])
            if mod in self.module_paths:
                return mod, ".".join(parts[cut:])
        return None, dotted

    def _resolve(self, dotted: str, hops: int = 0) -> str:
        if hops > MAX_HOPS:
            return dotted
        module, rest = self.split(dotted)
        if module is None or not rest:
            return dotted
        idx = self.index(module)
        if idx is None:
            return dotted
        symbols = idx.symbols  # type: ignore[attr-defined]
        head, _, tail = rest.partition(".")
        if head not in symbols:
            target = idx.imports.get(head)  # type: ignore[attr-defined]
            if target and target != dotted:
                return self._resolve(f"{target}.{tail}" if tail else target, hops + 1)
            return dotted
        if not tail:
            return dotted
        # a member: walk the class and its bases for where it is defined
        found = self.find_member(module, head, tail.split(".")[0], hops)
        if found is None:
            return dotted
        rest_tail = tail.partition(".")[2]
        return f"{found}.{rest_tail}" if rest_tail else found

    def defined(self, dotted: str) -> bool:
        """Is ``dotted`` (already resolved) a module or a symbol of the new upstream?"""
        module, rest = self.split(dotted)
        if module is None:
            return False
        if not rest:
            return True
        idx = self.index(module)
        return idx is not None and rest in idx.symbols  # type: ignore[attr-defined]

    def imported(self, dotted: str) -> bool:
        """Does the module of ``dotted`` bind its last name by an import statement (a
        re-export, from a Python module or from an extension such as ``torch._C``, whose
        names cannot be read)? The new upstream's own module imports it, so it exists."""
        module, rest = self.split(dotted)
        if module is None or not rest or "." in rest:
            return False
        idx = self.index(module)
        return idx is not None and rest in idx.imports  # type: ignore[attr-defined]

    def reachable(self, dotted: str) -> str | None:
        """How a name the new module no longer defines still resolves, or None: the module
        answers it through a module-level ``__getattr__``, a def or class in a branch of a
        module-level ``if``/``try`` binds it (``if TYPE_CHECKING: ... else: def f``), or
        ``X.m`` where ``X = _X()`` became an instance of a class that has ``m``."""
        module, rest = self.split(dotted)
        idx = self.index(module) if module is not None and rest else None
        if idx is None or not rest:
            return None
        symbols = idx.symbols  # type: ignore[attr-defined]
        if "." not in rest and "__getattr__" in symbols:
            return f"`{module}` answers missing names through its `__getattr__`"
        block = idx.bound_in_block(rest) if "." not in rest else None  # type: ignore[attr-defined]
        if block is not None:
            return f"`{module}` still defines `{rest}` in a branch of `{block.qualname}`"
        head, _, member = rest.partition(".")
        sym = symbols.get(head)
        value = (sym.value or "") if sym is not None else ""
        m = re.fullmatch(r"([A-Za-z_][\w.]*)\(\)", value)
        if member and "." not in member and m:
            cls = self.class_of(self.resolve(f"{module}.{m.group(1)}"))
            if cls is not None and self.find_member(*cls, member) is not None:
                return f"`{head}` is now an instance of `{cls[1]}`, which has `{member}`"
        return None

    def class_of(self, dotted: str) -> tuple[str, str] | None:
        """(module, class qualname) when ``dotted`` names an upstream class."""
        module, rest = self.split(dotted)
        if module is None or not rest:
            return None
        idx = self.index(module)
        sym = idx.symbols.get(rest) if idx is not None else None  # type: ignore[attr-defined]
        if sym is None or sym.kind is not SymbolKind.CLASS:
            return None
        return module, rest

    def declared_type(self, dotted: str) -> tuple[str, str] | None:
        """(module, class qualname) of the class upstream declares for the attribute
        ``dotted`` (already resolved, ``torch.fx.graph_module.GraphModule.graph``): a
        property whose getter is annotated ``-> Graph``, or a class-level ``graph: Graph``;
        ``Optional[T]``, ``T | None`` and a quoted ``"T"`` name ``T``. The name is looked up
        in the defining module (its classes and imports, ``TYPE_CHECKING`` ones too).
        None when nothing is declared or it is no upstream class."""
        module, rest = self.split(dotted)
        idx = self.index(module) if module is not None and rest else None
        sym = idx.symbols.get(rest) if idx is not None else None  # type: ignore[attr-defined]
        if sym is None:
            return None
        if sym.kind is SymbolKind.METHOD and any(
            d.rsplit(".", 1)[-1] == "property" or d.endswith("cached_property")
            for d in sym.decorators
        ):
            text = sym.returns
        elif sym.kind is SymbolKind.CLASS_ATTRIBUTE:
            text = sym.signature  # the annotation of ``name: T = ...``
        else:
            return None
        name = _one_class(text or "")
        if name is None:
            return None
        head, _, tail = name.partition(".")
        if head in idx.symbols:  # type: ignore[union-attr]
            found = f"{module}.{name}"
        elif head in idx.imports:  # type: ignore[union-attr]
            found = idx.imports[head] + (f".{tail}" if tail else "")  # type: ignore[union-attr]
        else:
            return None
        return self.class_of(self.resolve(found))

    def bases(self, module: str, qualname: str, hops: int = 0) -> list[tuple[str, str]]:
        """Upstream base classes of ``module.qualname`` as (module, class qualname)."""
        idx = self.index(module)
        sym = idx.symbols.get(qualname) if idx is not None else None  # type: ignore[attr-defined]
        if sym is None:
            return []
        out = []
        for base in sym.bases:
            head, _, tail = base.partition(".")
            if head in idx.symbols and not tail:  # type: ignore[attr-defined]
                dotted = f"{module}.{base}"
            elif head in idx.imports:  # type: ignore[attr-defined]
                dotted = idx.imports[head] + (f".{tail}" if tail else "")  # type: ignore[attr-defined]
            else:
                continue
            dotted = self._resolve(dotted, hops + 1)
            found = self.class_of(dotted)
            if found:
                out.append(found)
        return out

    def ancestors(self, module: str, qualname: str) -> list[tuple[str, str]]:
        """The class itself and its upstream ancestors, nearest first (no duplicates)."""
        seen: list[tuple[str, str]] = []
        todo = [(module, qualname)]
        while todo and len(seen) < 64:
            cur = todo.pop(0)
            if cur in seen:
                continue
            seen.append(cur)
            todo.extend(self.bases(*cur))
        return seen

    def find_member(self, module: str, cls: str, member: str, hops: int = 0) -> str | None:
        for mod, qual in self.ancestors(module, cls):
            idx = self.index(mod)
            if idx is not None and f"{qual}.{member}" in idx.symbols:  # type: ignore[attr-defined]
                return f"{mod}.{qual}.{member}"
        return None


_OPTIONAL = re.compile(r"(?:typing\.)?Optional\[(.+)\]")
_DOTTED = re.compile(r"[A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)*")


def _one_class(annotation: str) -> str | None:
    """The dotted name an annotation gives one class by: ``Graph``, ``"Graph"``,
    ``Optional[Graph]``, ``Graph | None``; None for anything else."""
    text = annotation.strip().strip("'\"").strip()
    m = _OPTIONAL.fullmatch(text)
    if m:
        text = m.group(1).strip().strip("'\"")
    parts = [p.strip().strip("'\"") for p in text.split("|")]
    parts = [p for p in parts if p != "None"]
    if len(parts) != 1 or not _DOTTED.fullmatch(parts[0]):
        return None
    return parts[0]
