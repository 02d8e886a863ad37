"""Module-internal call paths: which changed upstream symbols a used symbol reaches.

``make_fx`` is public and unchanged, but it calls ``_build_proxy_for_sym_expr`` in the
same module, which changed: a downstream that calls ``make_fx`` inherits the change.
Calls are the names recorded per symbol by the symbol index (``foo``, ``self.bar``,
``Cls``); only names defined in the same module are followed, to a bounded depth. A call
on another object (``tracer.trace(...)``) is followed to the module's methods of that
name when at most ``MAX_METHOD_CANDIDATES`` classes of the module define one (no types
are inferred: this is a static over-approximation, labelled as a path, never as a use).
"""

from __future__ import annotations

from collections import deque

from instep.pyindex.model import Symbol, SymbolKind

CONSTRUCTION = ("__init__", "__new__", "__post_init__", "__call__", "eval")
MAX_METHOD_CANDIDATES = 2
DEFAULT_DEPTH = 6


def methods_by_name(symbols: dict[str, Symbol]) -> dict[str, list[str]]:
    """Method name -> qualnames of the module's methods with that name."""
    index: dict[str, list[str]] = {}
    for q, sym in symbols.items():
        if sym.kind is SymbolKind.METHOD:
            index.setdefault(q.rsplit(".", 1)[1], []).append(q)
    return index


def _callees(symbols: dict[str, Symbol], sym: Symbol, methods: dict[str, list[str]]) -> set[str]:
    owner = sym.qualname.rsplit(".", 1)[0] if sym.kind is SymbolKind.METHOD else None
    out: set[str] = set()
    for call in sym.calls:
        head, _, rest = call.partition(".")
        if head in ("self", "cls") and owner and rest:
            cand = f"{owner}.{rest.split('.')[0]}"
        elif head == "super":
            continue
        else:
            cand = call
        target = symbols.get(cand)
        if target is None:
            if rest and head not in ("self", "cls"):
                named = methods.get(call.rsplit(".", 1)[1], [])
                if 0 < len(named) <= MAX_METHOD_CANDIDATES:
                    out.update(named)
            continue
        if target.kind is SymbolKind.CLASS:
            out.update(f"{cand}.{m}" for m in CONSTRUCTION if f"{cand}.{m}" in symbols)
        elif target.kind in (SymbolKind.FUNCTION, SymbolKind.METHOD):
            out.add(cand)
    return out


def entry_points(symbols: dict[str, Symbol], qualname: str) -> list[str]:
    """Where execution enters when downstream uses ``qualname`` (a class: its construction)."""
    sym = symbols.get(qualname)
    if sym is None:
        return []
    if sym.kind is SymbolKind.CLASS:
        return [f"{qualname}.{m}" for m in CONSTRUCTION if f"{qualname}.{m}" in symbols]
    if sym.kind in (SymbolKind.FUNCTION, SymbolKind.METHOD):
        return [qualname]
    return []


def reached(
    symbols: dict[str, Symbol],
    start: str,
    targets: set[str],
    max_depth: int = DEFAULT_DEPTH,
    methods: dict[str, list[str]] | None = None,
) -> dict[str, list[str]]:
    """Changed ``targets`` reachable from ``start`` -> the call chain (qualnames) to each.

    ``start`` itself is not reported (a direct use is a direct coupling, not a path).
    """
    found: dict[str, list[str]] = {}
    seen: set[str] = set()
    methods = methods if methods is not None else methods_by_name(symbols)
    queue: deque[tuple[str, list[str]]] = deque(
        (e, [start] if e == start else [start, e]) for e in entry_points(symbols, start)
    )
    while queue:
        name, chain = queue.popleft()
        if name in seen:
            continue
        seen.add(name)
        if name in targets and name != start and name not in found:
            found[name] = chain
        if len(chain) > max_depth:
            continue
        sym = symbols.get(name)
        if sym is None:
            continue
        for callee in sorted(_callees(symbols, sym, methods)):
            if callee not in seen:
                queue.append((callee, [*chain, callee]))
    return found
