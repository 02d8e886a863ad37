"""Find the upstream modules whose functions the downstream swaps wholesale for its own.

A backend that carries its own copy of an upstream module may install it by rebinding, in
a loop, every upstream function that its copy also defines::

    def apply_patch(fork_module):
        from torch._inductor import lowering as upstream
        mine = module_functions(fork_module)
        for name in module_functions(upstream):
            if name in mine:
                setattr(upstream, name, mine[name])

    apply_patch(fork_lowering)   # from .fork import lowering as fork_lowering

Under that swap an upstream function that the copy defines no longer runs, and neither do
the calls inside it. :func:`find_swaps` reports each such loop as a :class:`Swap`: the
upstream module, the downstream module whose functions replace its own (named in the loop,
or passed to the function holding the loop by a call in the downstream), and the functions
that module defines. A replacement shipped in the same package as the copy is installed
with it (:mod:`instep.impact.join.breaking_path` reads it so).

Static only: nothing is imported. A ``setattr`` with a constant name is a monkey-patch
(:mod:`instep.impact.downstream.monkeypatches`), not a swap. This module decides no verdict.
"""

from __future__ import annotations

import ast
from bisect import bisect_left
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from instep.pyindex.model import module_of
from instep.pyindex.parsed_files import ParsedFiles


@dataclass(frozen=True)
class Swap:
    upstream: str  # dotted upstream module whose functions are rebound
    downstream: str  # dotted downstream module whose functions replace them
    functions: frozenset[str]  # the module-level functions the downstream module defines
    at: str  # path:line of the rebinding setattr

    @property
    def package(self) -> str:
        return self.downstream.rsplit(".", 1)[0]

    def replaces(self, module: str, function: str) -> bool:
        return module == self.upstream and function in self.functions

    def installs(self, downstream_module: str) -> bool:
        """Is a replacement in ``downstream_module`` shipped with the swapped-in copy?"""
        return downstream_module.startswith(self.package + ".")


def _imports(body: Iterable[ast.stmt], module: str, is_package: bool) -> dict[str, str]:
    """Local name -> dotted name of what it imports (a module or a module's attribute)."""
    out: dict[str, str] = {}
    base = module if is_package else module.rsplit(".", 1)[0]
    for node in body:
        if isinstance(node, ast.Import):
            for a in node.names:
                out[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = base.split(".")
                head = ".".join(parts[: len(parts) - node.level + 1])
                src = f"{head}.{node.module}" if node.module else head
            else:
                src = node.module or ""
            for a in node.names:
                out[a.asname or a.name] = f"{src}.{a.name}"
    return out


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


@dataclass
class _Loop:
    path: str
    line: int
    upstream: str
    function: str | None  # the def holding the loop
    param: int | None  # index of the parameter the rebound values come from
    downstream: str | None  # the downstream module, when the loop names it


def _loops(path: str, tree: ast.Module, modules: set[str], upstream: set[str]) -> list[_Loop]:
    module = module_of(path)
    package = path.endswith("__init__.py")
    defs: list[ast.FunctionDef | ast.AsyncFunctionDef] = []  # in the order of ast.walk
    at: list[int] = []  # lines of the rebinding calls
    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            defs.append(n)
        elif isinstance(n, ast.Call) and _rebinding(n):
            at.append(n.lineno)
    if not at:
        return []  # no setattr(name, <not a literal>, value) anywhere: no def holds a loop of one
    at.sort()
    top = _imports(tree.body, module, package)
    out: list[_Loop] = []
    for fn in defs:
        # a loop of the def, and so its calls, lies within the def's lines: a def with no
        # such call there is not walked (most defs of a file that has one)
        k = bisect_left(at, fn.lineno)
        if k == len(at) or at[k] > (fn.end_lineno or fn.lineno):
            continue
        calls = [
            call
            for loop in ast.walk(fn)
            if isinstance(loop, ast.For)
            for call in ast.walk(loop)
            if _rebinding(call)
        ]
        if not calls:
            continue
        scope = {**top, **_imports(ast.walk(fn), module, package)}  # type: ignore[arg-type]
        params = [a.arg for a in (*fn.args.posonlyargs, *fn.args.args)]
        assigned = {
            t.id: n.value
            for n in ast.walk(fn)
            if isinstance(n, ast.Assign)
            for t in n.targets
            if isinstance(t, ast.Name)
        }
        for call in calls:
            target = scope.get(call.args[0].id)
            if target not in upstream:
                continue
            names = _names(call.args[2])
            for n in list(names):
                if n in assigned:
                    names |= _names(assigned[n])
            down = next((scope[n] for n in names if scope.get(n) in modules), None)
            param = next((params.index(n) for n in sorted(names) if n in params), None)
            if down is not None or param is not None:
                out.append(_Loop(path, call.lineno, target, fn.name, param, down))
    return out


def _rebinding(node: ast.AST) -> bool:
    """``setattr(name, <not a literal>, value)``: a call that can rebind many names."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "setattr"
        and len(node.args) == 3
        and isinstance(node.args[0], ast.Name)
        and not isinstance(node.args[1], ast.Constant)
    )


def _top_functions(tree: ast.Module) -> frozenset[str]:
    return frozenset(
        n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
    )


def _tree(trees: ParsedFiles, path: str) -> ast.Module | None:
    """A downstream file's tree; an empty file is an empty module (a swap of no
    functions), a read error or a file that is not Python None."""
    try:
        got = trees.tree(path)
        if got is None and not trees.read(path):
            return ast.Module(body=[], type_ignores=[])
    except (OSError, KeyError):
        return None
    return got


def find_swaps(
    paths: Iterable[str],
    read: Callable[[str], bytes],
    upstream_modules: Iterable[str],
    trees: ParsedFiles | None = None,
) -> list[Swap]:
    """Every loop in the downstream that rebinds the functions of an upstream module with
    those of a downstream module (named there, or passed in by a downstream call).
    ``trees``: the downstream's shared trees over ``read`` (else each file is parsed here)."""
    by_module = {module_of(p): p for p in paths if p.endswith(".py")}
    modules, upstream = set(by_module), set(upstream_modules)
    shared = trees if trees is not None else ParsedFiles(read)

    def tree(path: str) -> ast.Module | None:
        return _tree(shared, path)

    texts: dict[str, bytes] = {}
    for p in by_module.values():
        try:
            texts[p] = read(p)
        except (OSError, KeyError):
            continue
    loops: list[_Loop] = []
    for p, data in texts.items():
        if b"setattr(" in data and b"for " in data and (t := tree(p)) is not None:
            loops.extend(_loops(p, t, modules, upstream))
    found: list[tuple[_Loop, str]] = [(lp, lp.downstream) for lp in loops if lp.downstream]
    for lp in (lp for lp in loops if lp.downstream is None and lp.function):
        needle = f"{lp.function}(".encode()
        for p, data in texts.items():
            if needle not in data or (t := tree(p)) is None:
                continue
            module = module_of(p)
            package = p.endswith("__init__.py")
            top = _imports(t.body, module, package)
            for fn in [t, *(n for n in ast.walk(t) if isinstance(n, ast.FunctionDef))]:
                scope = {**top, **_imports(ast.walk(fn), module, package)}  # type: ignore[arg-type]
                for call in (n for n in ast.walk(fn) if isinstance(n, ast.Call)):
                    name = call.func.id if isinstance(call.func, ast.Name) else None
                    if isinstance(call.func, ast.Attribute):
                        name = call.func.attr
                    if name != lp.function or lp.param is None or len(call.args) <= lp.param:
                        continue
                    arg = call.args[lp.param]
                    if isinstance(arg, ast.Name) and scope.get(arg.id) in modules:
                        found.append((lp, scope[arg.id]))
    out: dict[tuple[str, str], Swap] = {}
    for lp, down in found:
        t = tree(by_module[down])
        if t is not None:
            swap = Swap(lp.upstream, down, _top_functions(t), f"{lp.path}:{lp.line}")
            out.setdefault((swap.upstream, swap.downstream), swap)
    return list(out.values())
