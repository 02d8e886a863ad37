"""Which ATen operators reach a changed upstream symbol, read from the new upstream's code.

A change to ``Reduction.create`` is tested by compiling an operator whose lowering calls
it: ``sum_`` is registered for ``aten.sum`` (``@register_lowering``) and calls
``make_reduction``, which calls ``Reduction.create``. This module walks the new upstream's
callers backwards from a changed symbol, through the files where operators are
registered and the code between (``SCOPE``: Inductor, the decompositions, refs, prims,
meta and fake impls), until it meets functions registered for an operator (a lowering, a
decomposition, a meta or fake impl), and returns those operators with the call chain.

How a call is recognised, from the names the symbol index records per def (no types are
inferred; a static over-approximation, as ``call_paths``):
- a function ``f`` of module ``M``: ``f(...)`` in ``M`` or in a module that imports ``f``
  from ``M``, ``m.f(...)`` where ``m`` is bound to ``M``;
- a method ``C.m``: ``C.m(...)`` anywhere (``ir.Reduction.create``), ``self.m``/``cls.m``
  in a method of ``C``; ``C(...)`` for ``C.__init__``;
- a method of a kernel or handler class under ``torch/_inductor/codegen/`` whose name is
  a method of upstream's ``OpsHandler`` (``reduction``, ``scan``, ``masked``, ``load``):
  ``ops.m(...)`` in lowering code, which Inductor dispatches to the kernel being generated;
- a method of an IR node class (``torch/_inductor/ir.py``): where the class is constructed
  or its ``create`` is called (the method runs for the nodes made there);
- a def nested in a function: its enclosing def (it is called there, or returned as a
  closure that runs where the enclosing def's result runs).

A symbol reached by more than ``BROAD`` operators (``TritonKernel.load``: every kernel
loads) reaches no operator in particular: ``broad`` says so, and the caller picks a test of
the whole stage instead. Nothing here imports or runs upstream code.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from instep.pyindex.model import SymbolKind, module_of
from instep.pyindex.registrations import role_of
from instep.pyindex.symbols import FileIndex

# upstream files whose defs can lie between an operator's registration and a change
SCOPE = (
    "torch/_inductor/",
    "torch/_decomp/",
    "torch/_refs/",
    "torch/_prims/",
    "torch/_prims_common/",
    "torch/_meta_registrations.py",
    "torch/_subclasses/fake_impls.py",
)
OPS_HANDLER = ("torch/_inductor/ops_handler.py", "OpsHandler")
KERNEL_CODE = "torch/_inductor/codegen/"
VIA = "via::"  # a chain entry naming how a call is dispatched, not a def
IR_CODE = "torch/_inductor/ir.py"  # IR node classes: their methods run for the nodes made
MAX_DEPTH = 5  # calls between a registered function and the change
# more defs than this on one level of callers, or more operators than BROAD: the symbol
# lies on the path of every kernel of its stage (``TritonKernel.load``), not of some ops
MAX_FRONTIER = 80
BROAD = 40
_FUNCS = (SymbolKind.FUNCTION, SymbolKind.METHOD)


@dataclass(frozen=True)
class OpRoute:
    """An operator whose registered function reaches the change."""

    op: str  # registration key: 'aten.sum'
    role: str | None  # 'lowering', 'decomposition', 'meta', 'py_impl' or None
    # 'path::qualname' from the registered function to the change; a dispatch through
    # Inductor's ops handler stands between as 'via::ops.masked'
    chain: tuple[str, ...]

    @property
    def depth(self) -> int:
        """Calls between the registered function and the change (0: it is the change)."""
        return sum(1 for ref in self.chain if not ref.startswith(VIA)) - 1


@dataclass(frozen=True)
class Reach:
    routes: tuple[OpRoute, ...]  # nearest first
    broad: bool  # reached by more than BROAD operators


class OpReach:
    """Callers of upstream symbols in the new upstream, walked back to registered ops."""

    def __init__(
        self,
        paths: Iterable[str],
        index_of: Callable[[str], FileIndex | None],
        scope: tuple[str, ...] = SCOPE,
    ) -> None:
        self.paths = sorted(p for p in paths if p.endswith(".py") and p.startswith(scope))
        self._index_of = index_of
        self._indexes: dict[str, FileIndex | None] = {}
        self._memo: dict[str, Reach] = {}
        self._by_tail: dict[str, list[tuple[str, str, str]]] | None = None
        self._handler_methods: frozenset[str] | None = None

    # ---- inputs -------------------------------------------------------------------

    def index(self, path: str) -> FileIndex | None:
        if path not in self._indexes:
            idx = self._index_of(path) if path in self._scope else None
            self._indexes[path] = idx if idx is not None and idx.error is None else None
        return self._indexes[path]

    @property
    def _scope(self) -> frozenset[str]:
        scope = self.__dict__.get("_scope_set")
        if scope is None:
            scope = self.__dict__["_scope_set"] = frozenset(self.paths)
        return scope

    def _calls_by_tail(self) -> dict[str, list[tuple[str, str, str]]]:
        """Every call of the scope's defs by its last name: ``create`` -> (path, caller,
        'ir.Reduction.create'); the files are indexed once."""
        if self._by_tail is None:
            by_tail: dict[str, list[tuple[str, str, str]]] = {}
            for path in self.paths:
                idx = self.index(path)
                if idx is None:
                    continue
                for q, sym in idx.symbols.items():
                    if sym.kind not in _FUNCS:
                        continue
                    for c in sym.calls:
                        by_tail.setdefault(c.rsplit(".", 1)[-1], []).append((path, q, c))
            self._by_tail = by_tail
        return self._by_tail

    def handler_methods(self) -> frozenset[str]:
        """The method names of upstream's ``OpsHandler`` (what ``ops.<name>`` calls)."""
        if self._handler_methods is None:
            path, cls = OPS_HANDLER
            idx = self.index(path)
            names = set()
            if idx is not None:
                for q, sym in idx.symbols.items():
                    head, _, name = q.partition(".")
                    public = "." not in name and not name.startswith("_")
                    if head == cls and sym.kind is SymbolKind.METHOD and public:
                        names.add(name)
            self._handler_methods = frozenset(names)
        return self._handler_methods

    # ---- the walk -----------------------------------------------------------------

    def reach(self, path: str, qualname: str) -> Reach:
        """The operators whose registered functions call ``path::qualname``, nearest first."""
        key = f"{path}::{qualname}"
        if key not in self._memo:
            self._memo[key] = self._walk(path, qualname)
        return self._memo[key]

    def _walk(self, path: str, qualname: str) -> Reach:
        start = f"{path}::{qualname}"
        own = self._registered(path, qualname)
        if own:
            return Reach(tuple(OpRoute(k, r, (start,)) for k, r in own), False)
        if path not in self._scope:
            return Reach((), False)
        routes: list[OpRoute] = []
        ops: set[str] = set()
        seen = {start}
        frontier: list[tuple[str, str, tuple[str, ...]]] = [(path, qualname, (start,))]
        for _ in range(MAX_DEPTH):
            nxt: list[tuple[str, str, tuple[str, ...]]] = []
            for p, q, chain in frontier:
                for cp, cq, via in self._callers(p, q):
                    ref = f"{cp}::{cq}"
                    if ref in seen:
                        continue
                    seen.add(ref)
                    longer = (ref, *((f"{VIA}{via}",) if via else ()), *chain)
                    registered = self._registered(cp, cq)
                    if registered:
                        for op, role in registered:
                            routes.append(OpRoute(op, role, longer))
                            ops.add(op)
                    else:
                        nxt.append((cp, cq, longer))
            if len(ops) > BROAD or len(nxt) > MAX_FRONTIER:
                return Reach(tuple(routes), True)
            frontier = nxt
            if not frontier:
                break
        return Reach(tuple(routes), False)

    def _registered(self, path: str, qualname: str) -> list[tuple[str, str | None]]:
        """The operator keys (``aten.x``) a def is registered for, with their roles."""
        idx = self.index(path)
        if idx is None:
            return []
        regs = []
        sym = idx.symbols.get(qualname)
        if sym is not None:
            regs += list(sym.registrations)
        regs += [r for r in idx.registrations if r.symbol == qualname]
        out: dict[tuple[str, str | None], None] = {}
        for r in regs:
            if "." in r.key and ":" not in r.key:
                out[(r.key, role_of(r.registrar))] = None
        return list(out)

    def _callers(self, path: str, qualname: str) -> list[tuple[str, str, str]]:
        """The scope's defs that call ``path::qualname`` (see the module's rules), each
        with how the call reaches it when not by name (``ops.masked``), else ''."""
        idx = self.index(path)
        sym = idx.symbols.get(qualname) if idx is not None else None
        kind = sym.kind if sym is not None else SymbolKind.FUNCTION
        parts = qualname.split(".")
        by_tail = self._calls_by_tail()
        found: dict[tuple[str, str], str] = {}
        if kind is SymbolKind.CLASS or (kind is SymbolKind.METHOD and parts[-1] == "__init__"):
            cls = parts[-2] if kind is SymbolKind.METHOD else parts[-1]
            for cp, cq, c in by_tail.get(cls, ()):
                if c == cls or c.endswith(f".{cls}"):
                    found[(cp, cq)] = ""
            return [(p, q, via) for (p, q), via in found.items()]
        if kind is SymbolKind.METHOD and len(parts) >= 2:
            cls, name = parts[-2], parts[-1]
            full = f"{cls}.{name}"
            handler = path.startswith(KERNEL_CODE) and name in self.handler_methods()
            own = (f"self.{name}", f"cls.{name}")
            for cp, cq, c in by_tail.get(name, ()):
                if (
                    c == full
                    or c.endswith(f".{full}")
                    or (cp == path and cq.startswith(f"{cls}.") and c in own)
                ):
                    found[(cp, cq)] = ""
                elif handler and c in (f"ops.{name}", f"V.ops.{name}"):
                    found.setdefault((cp, cq), f"ops.{name}")
            if path.startswith(IR_CODE) and name != "create":
                # a method of an IR node runs for the nodes its constructions make
                for cp, cq, _ in self._callers(path, f"{cls}.__init__"):
                    found.setdefault((cp, cq), f"{cls}(...)")
                if f"{cls}.create" in (idx.symbols if idx is not None else {}):
                    for cp, cq, _ in self._callers(path, f"{cls}.create"):
                        found.setdefault((cp, cq), f"{cls}.create")
            found.pop((path, qualname), None)
            return [(p, q, via) for (p, q), via in found.items()]
        if len(parts) > 1:
            # a def nested in a function: called there, or returned as a closure that runs
            # where the enclosing def's result is called; its enclosing def stands for it
            outer = qualname.rsplit(".", 1)[0]
            return [(path, outer, "")] if idx is not None and outer in idx.symbols else []
        module, name = module_of(path), parts[-1]
        for cp, cq, c in by_tail.get(name, ()):
            cidx = self.index(cp)
            imports = cidx.imports if cidx is not None else {}
            head = c[: -len(name) - 1] if c != name else ""
            bare = c == name and (cp == path or imports.get(name) == f"{module}.{name}")
            if bare or (head and imports.get(head) == module):
                found[(cp, cq)] = ""
        found.pop((path, qualname), None)
        return [(p, q, via) for (p, q), via in found.items()]
