"""Whether an operator's route to a changed upstream symbol runs on the backend.

``upstream/op_reach.py`` walks the new upstream's calls back from a change to the
operators whose registered functions reach it: it follows calls, not the branches around
them. This module follows one such route forward, from the registered function to the
change, reading each def on it statically, and answers why the route never makes its
next call on an out-of-tree backend (quoting the test and its line), or None when it
may. ``test_suggestions`` leaves such a route out: compiling that operator would not run
the change (``aten.sum``'s lowering reaches ``ops.masked`` only in a strict-sum branch
that needs a CUDA tensor; ``is_big_gpu`` calls ``get_gpu_type`` only for an int index,
and the template path passes a device).

A branch test is decided when:

- ``call_conditions.on_backend`` decides it (a device type the backend never has:
  ``x.is_cuda``, ``x.type == "cuda"``, ``torch.version.hip``), or
  ``call_conditions.never_met`` names it (an environment variable, a debug flag: off
  unless a user sets them);
- it reads values known on the route: constants; the parameters the route's previous call
  binds (the arguments it passes, the defaults of those it does not); locals assigned from
  known values; the result of a function of the new upstream whose every reachable
  ``return`` gives one constant (``_strict_sum_layout_eligible`` returns False once ``not
  value.is_cuda`` holds); a ``.device`` attribute, taken as a ``torch.device`` (so
  ``isinstance(layout.device, torch.device)`` holds).

Each def on the route is walked by ``branch_walk`` (values flow forward through its
statements; nothing else is followed: globals, attributes and containers are unknown), and
an unknown test is never decided: a route is left out only when, at some step, every call
it can make lies under a branch decided against it. Nothing is imported or run.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from instep.impact.join.branch_walk import (
    DEFS,
    UNKNOWN,
    DefShape,
    Env,
    Marker,
    Site,
    Values,
    Walk,
    Walker,
    all_args,
    havoc,
    join,
    same,
)
from instep.impact.upstream.op_reach import VIA, OpRoute
from instep.pyindex.model import SymbolKind, module_of
from instep.pyindex.symbols import FileIndex


def _nothing(node: ast.AST) -> bool:
    """A walk for returns only: no site anywhere."""
    return False


def _steps(chain: tuple[str, ...]) -> Iterator[tuple[str, str, str]]:
    """(caller, callee, how the call dispatches: '' for a call by name) along a route."""
    caller, via = chain[0], ""
    for entry in chain[1:]:
        if entry.startswith(VIA):
            via = entry[len(VIA) :]
            continue
        yield caller, entry, via
        caller, via = entry, ""


@dataclass(frozen=True)
class _Def:
    """A def on a route, parsed from its own lines; a class stands for its ``__init__``
    (``node`` None when it has none)."""

    node: ast.FunctionDef | ast.AsyncFunctionDef | None
    in_class: bool  # a method (its parent is a class)
    is_class: bool
    line_offset: int  # its lines start after this many of its file's


class RouteConditions:
    """The operator routes of the new upstream that never reach their change on the
    backend (the module docstring); each file parsed once, each route judged once."""

    def __init__(
        self,
        read: Callable[[str], bytes],
        index_of: Callable[[str], FileIndex | None],
        paths: Iterable[str],
    ) -> None:
        self._read = read
        self._index_of = index_of
        self._modules = {module_of(p): p for p in paths if p.endswith(".py")}
        self._lines: dict[str, list[str] | None] = {}
        self._defs: dict[str, _Def | None] = {}
        self._returns: dict[str, object] = {}
        self._memo: dict[OpRoute, str | None] = {}
        # (caller, callee, via, what is known) -> the step; routes share most of their steps
        self._steps: dict[tuple[str, str, str, tuple], tuple[Walk, Env] | None] = {}
        self._shapes: dict[int, DefShape] = {}
        self._decided: dict[int, bool | None] = {}  # call_conditions on a test node

    def unmet(self, route: OpRoute) -> str | None:
        """Why the route never makes one of its calls on the backend, or None (it may, or
        the route cannot be read)."""
        if route not in self._memo:
            self._memo[route] = self._unmet(route)
        return self._memo[route]

    def _unmet(self, route: OpRoute) -> str | None:
        env: Env = {}  # the registered function: the graph passes its arguments
        for caller, callee, via in _steps(route.chain):
            stepped = self._step(caller, callee, via, env)
            if stepped is None:
                return None
            walk, env = stepped
            if not walk.sites:
                if not walk.blocked:
                    return None  # the call is not seen in the def: cannot tell
                who, what = caller.partition("::")[2], callee.partition("::")[2]
                return f"`{who}` never calls `{what}` on this route: {walk.blocked[0]}"
        return None

    # ---- one step ---------------------------------------------------------------------

    def _step(self, caller: str, callee: str, via: str, env: Env) -> tuple[Walk, Env] | None:
        """The walk of ``caller`` with ``env`` for the sites of ``callee``, and what
        ``callee``'s parameters hold when the route calls it (None: a def not found)."""
        known = tuple(sorted((k, repr(v)) for k, v in env.items() if v is not UNKNOWN))
        key = (caller, callee, via, known)
        if key not in self._steps:
            self._steps[key] = self._walk_step(caller, callee, via, env)
        return self._steps[key]

    def _walk_step(self, caller: str, callee: str, via: str, env: Env) -> tuple[Walk, Env] | None:
        outer, inner = self._def(caller), self._def(callee)
        if outer is None or outer.node is None or inner is None:
            return None
        path = caller.partition("::")[0]
        tail, how = self._edge(caller, callee, via, inner)
        nested = how == "closure"
        values = self._values(path, outer.line_offset)
        walker = Walker(values, tail, nested, Walk(), self._holds(outer, tail, nested))
        end, _ = walker.block(outer.node.body, dict(env))
        walker.closure_bodies(end)
        walk = walker.walk
        bound: Env | None = None
        for site in walk.sites:
            here = self._bind(inner, how, site, end, walker.values)
            bound = here if bound is None else join(bound, here)
        return walk, bound or {}

    def _edge(self, caller: str, callee: str, via: str, inner: _Def) -> tuple[str, str]:
        """The name the caller's call uses, and how the callee's parameters are bound:
        'closure' (a def nested in the caller), 'init' (a class constructed), 'method',
        'function', or 'none' (a dispatch: unknown)."""
        if via:
            return via.removesuffix("(...)").rsplit(".", 1)[-1], "none"
        c_path, _, c_q = caller.partition("::")
        e_path, _, e_q = callee.partition("::")
        parts = e_q.split(".")
        if e_path == c_path and e_q.rsplit(".", 1)[0] == c_q and not inner.in_class:
            return parts[-1], "closure"
        if inner.is_class:
            return parts[-1], "init"
        if parts[-1] == "__init__" and len(parts) > 1:
            return parts[-2], "init"
        return parts[-1], ("method" if inner.in_class else "function")

    def _bind(self, inner: _Def, how: str, site: Site, end: Env, values: Values) -> Env:
        """What the callee's parameters hold at one site (names it does not bind:
        unknown)."""
        fn = inner.node
        if fn is None:
            return {}
        if how == "closure":
            return havoc(join(site.env, end), (a.arg for a in all_args(fn.args)))
        if how == "none" or not isinstance(site.node, ast.Call):
            return {}
        static = any(ast.unparse(d) == "staticmethod" for d in fn.decorator_list)
        skip_first = how == "init" or (how == "method" and not static)
        return _bind_call(fn.args, site.node, site.env, skip_first, values)

    def _values(self, path: str, line_offset: int = 0) -> Values:
        return Values(path, self._returns_of, self._decided, line_offset)

    def _holds(self, found: _Def, tail: str, nested: bool) -> Callable[[ast.AST], bool]:
        key = id(found.node)
        if key not in self._shapes:
            self._shapes[key] = DefShape(found.node)
        return self._shapes[key].holding(tail, nested)

    # ---- the new upstream's defs ---------------------------------------------------------

    def _def(self, ref: str) -> _Def | None:
        """The def ``path::qualname`` of the index (a class: its ``__init__``), parsed from
        its own lines (a big module is not parsed whole); None when it cannot be read."""
        if ref not in self._defs:
            self._defs[ref] = self._read_def(ref)
        return self._defs[ref]

    def _read_def(self, ref: str) -> _Def | None:
        path, _, qualname = ref.partition("::")
        idx = self._index_of(path)
        sym = idx.symbols.get(qualname) if idx is not None else None
        if idx is None or sym is None:
            return None
        parent = idx.symbols.get(qualname.rpartition(".")[0])
        in_class = parent is not None and parent.kind is SymbolKind.CLASS
        if sym.kind is SymbolKind.CLASS:
            init = self._def(f"{ref}.__init__")
            if init is None:
                return _Def(None, False, True, 0)
            return _Def(init.node, False, True, init.line_offset)
        if sym.kind not in (SymbolKind.FUNCTION, SymbolKind.METHOD):
            return None
        lines = self._file_lines(path)
        if lines is None:
            return None
        segment = "".join(lines[sym.line - 1 : sym.end_line])
        indented = segment[:1].isspace()
        # an indented def parses under an `if 1:` as it stands (a multi-line string at
        # column 0 inside it stays valid, where dedenting would not)
        try:
            tree = ast.parse("if 1:\n" + segment if indented else segment)
        except (SyntaxError, ValueError):
            return None
        body = tree.body[0].body if indented and isinstance(tree.body[0], ast.If) else tree.body
        node = body[0] if body else None
        if not isinstance(node, DEFS):
            return None
        return _Def(node, in_class, False, sym.line - 1 - (1 if indented else 0))

    def _file_lines(self, path: str) -> list[str] | None:
        if path not in self._lines:
            try:
                text = self._read(path).decode("utf-8", "replace")
            except (OSError, KeyError, ValueError):
                text = None
            self._lines[path] = text.splitlines(keepends=True) if text is not None else None
        return self._lines[path]

    def _returns_of(self, path: str, func: ast.expr) -> object:
        """The one constant a called function of the new upstream returns on the backend
        (every ``return`` its walk reaches gives it), else UNKNOWN."""
        ref = self._resolve(path, func)
        if ref is None:
            return UNKNOWN
        if ref not in self._returns:
            self._returns[ref] = UNKNOWN  # a recursive call: unknown
            self._returns[ref] = self._constant_return(ref)
        return self._returns[ref]

    def _constant_return(self, ref: str) -> object:
        found = self._def(ref)
        if found is None or found.node is None or found.in_class or found.is_class:
            return UNKNOWN
        fn = found.node
        if any(isinstance(n, (ast.Yield, ast.YieldFrom)) for n in ast.walk(fn)):
            return UNKNOWN
        values = self._values(ref.partition("::")[0])
        walker = Walker(values, "", False, Walk(), _nothing)
        _, done = walker.block(fn.body, {})
        returns = walker.walk.returns + ([] if done else [None])
        first = returns[0] if returns else UNKNOWN
        if isinstance(first, Marker) or not all(same(first, r) for r in returns):
            return UNKNOWN
        return first

    def _resolve(self, path: str, func: ast.expr) -> str | None:
        """``f`` or ``m.f`` called in ``path``: the module-level function of the new
        upstream it names (``path::f``), or None."""
        idx = self._index_of(path)
        if idx is None:
            return None
        if isinstance(func, ast.Name):
            if func.id in idx.symbols:
                return f"{path}::{func.id}"
            target = idx.imports.get(func.id, "")
            module, _, name = target.rpartition(".")
        elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            module, name = idx.imports.get(func.value.id, ""), func.attr
        else:
            return None
        where = self._modules.get(module)
        return f"{where}::{name}" if where is not None else None


def _bind_call(
    args: ast.arguments, call: ast.Call, env: Env, skip_first: bool, values: Values
) -> Env:
    """The parameters ``call`` binds: its arguments' values, a default for one it does not
    pass (unknown after ``*args`` or ``**kwargs``), unknown for the rest."""
    positional = [*args.posonlyargs, *args.args]
    with_default = [p.arg for p in positional][len(positional) - len(args.defaults) :]
    defaults: dict[str, ast.expr] = dict(zip(with_default, args.defaults, strict=False))
    defaults.update(
        {p.arg: d for p, d in zip(args.kwonlyargs, args.kw_defaults, strict=False) if d is not None}
    )
    if skip_first:
        positional = positional[1:]
    spread = any(isinstance(a, ast.Starred) for a in call.args)
    spread = spread or any(k.arg is None for k in call.keywords)
    out: Env = {}
    for param, arg in zip(positional, call.args, strict=False):
        if isinstance(arg, ast.Starred):
            break
        out[param.arg] = values.value(arg, env)
    for k in call.keywords:
        if k.arg is not None:
            out[k.arg] = values.value(k.value, env)
    for param in [*positional, *args.kwonlyargs]:
        if param.arg not in out:
            default = defaults.get(param.arg)
            known = not spread and isinstance(default, ast.Constant)
            out[param.arg] = default.value if known else UNKNOWN  # type: ignore[union-attr]
    return havoc(out, (a.arg for a in (args.vararg, args.kwarg) if a is not None))
