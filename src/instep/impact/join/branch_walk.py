"""One def of the new upstream walked with what is known of its values: which calls of a
name (or which nested def) it reaches, which it never reaches and why, and what its
``return`` statements give.

The walk reads the statements in order with an environment of known values (constants,
``DEVICE`` for a ``torch.device``, ``UNKNOWN`` for the rest): a decided ``if`` takes one
branch, an undecided one both, their names joined (the values both agree on); a loop's, a
``try``'s or a ``match``'s assignments are unknown in and after it; ``and``, ``or`` and
``x if c else y`` short-circuit as Python does; a nested def is walked with the names its
def holds where it is defined and where that def ends, when both agree, its parameters
unknown. A test is decided by ``call_conditions`` (a device the backend never is, an
environment variable, a debug flag) or by the known values (``Values.truth``); an unknown
test decides nothing. Used by ``route_conditions`` (whether an operator's route runs on the
backend); it knows nothing of routes or operators, and imports and runs nothing.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from instep.impact.join.call_conditions import BUILD_FLAGS, DEVICE_FLAGS, never_met, on_backend


class Marker:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


UNKNOWN = Marker("UNKNOWN")  # a value the route does not decide
DEVICE = Marker("DEVICE")  # a torch.device object (truthy)
_DEVICE_CLASSES = frozenset({"torch.device", "device"})
DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)
Env = dict[str, object]


class Lazy:
    """A value assigned from an expression that calls something, computed when a test
    reads it (most are never read): the expression and the names known when it ran (an
    environment is never changed once made, so keeping it is keeping a snapshot)."""

    __slots__ = ("env", "expr", "value")

    def __init__(self, expr: ast.expr, env: Env) -> None:
        self.expr = expr
        self.env = env
        self.value: object = None  # None: not computed yet (computed values are boxed)


def same(a: object, b: object) -> bool:
    return a is b or (type(a) is type(b) and not isinstance(a, Marker) and a == b)


def join(a: Env, b: Env) -> Env:
    """The names two paths agree on; the others unknown."""
    return {
        k: a.get(k, UNKNOWN) if same(a.get(k, UNKNOWN), b.get(k, UNKNOWN)) else UNKNOWN
        for k in {*a, *b}
    }


def havoc(env: Env, names: Iterable[str]) -> Env:
    return {**env, **dict.fromkeys(names, UNKNOWN)}


def stored_names(nodes: Iterable[ast.AST]) -> set[str]:
    """Every name a statement or its sub-statements assign."""
    out: set[str] = set()
    for node in nodes:
        for n in ast.walk(node):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                out.add(n.id)
            elif isinstance(n, (ast.ExceptHandler, *DEFS, ast.ClassDef)) and n.name:
                out.add(n.name)
    return out


@dataclass
class Site:
    """A call of the next step (or the definition of the nested def it is), as reached."""

    node: ast.AST
    env: Env  # what the walk knew there


@dataclass
class Walk:
    """What one walk of a def found: the sites it reached, those it did not (with why),
    and the values of the ``return`` statements it reached."""

    sites: list[Site] = field(default_factory=list)
    blocked: list[str] = field(default_factory=list)
    returns: list[object] = field(default_factory=list)


class Values:
    """The values of expressions and the truth of tests, for one walk of a def of
    ``path``. ``decided`` keeps what ``call_conditions`` says of a test node, for every walk
    over the same parsed files (the nodes live as long as their trees)."""

    def __init__(
        self,
        path: str,
        returns_of: Callable[[str, ast.expr], object],
        decided: dict[int, bool | None] | None = None,
        line_offset: int = 0,
    ) -> None:
        self.path = path
        self.line_offset = line_offset  # the def was parsed from its own lines
        self.returns_of = returns_of  # (path, called expression) -> its constant result
        self.decided = {} if decided is None else decided

    def _decided(self, test: ast.expr) -> bool | None:
        """The test's value on the backend by ``call_conditions`` alone, or None."""
        key = id(test)
        if key not in self.decided:
            value = on_backend(test)
            if value is None and never_met(test):
                value = False
            self.decided[key] = value
        return self.decided[key]

    def truth(self, test: ast.expr, env: Env) -> bool | None:
        decided = self._decided(test)
        if decided is not None:
            return decided
        value = self.value(test, env)
        if value is UNKNOWN:
            return None
        return True if value is DEVICE else bool(value)

    def value(self, node: ast.expr, env: Env) -> object:
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            value = env.get(node.id, UNKNOWN)
            return self._forced(value) if isinstance(value, Lazy) else value
        if isinstance(node, ast.Attribute):
            if node.attr == "hip" and ast.unparse(node) in BUILD_FLAGS:
                return None
            if node.attr in DEVICE_FLAGS:
                return False
            return DEVICE if node.attr == "device" else UNKNOWN
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            t = self.truth(node.operand, env)
            return UNKNOWN if t is None else not t
        if isinstance(node, ast.BoolOp):
            return self._bool_op(node, env)
        if isinstance(node, ast.Compare):
            return self._compare(node, env)
        if isinstance(node, ast.IfExp):
            t = self.truth(node.test, env)
            if t is None:
                return UNKNOWN
            return self.value(node.body if t else node.orelse, env)
        if isinstance(node, ast.Call):
            return self._call(node, env)
        return UNKNOWN

    def _forced(self, lazy: Lazy) -> object:
        if lazy.value is None:
            lazy.value = (UNKNOWN,)  # while it is computed: unknown (no cycle)
            lazy.value = (self.value(lazy.expr, lazy.env),)
        return lazy.value[0]  # type: ignore[index]

    def _bool_op(self, node: ast.BoolOp, env: Env) -> object:
        """``a and b``: the first falsy operand, else the last (``or``: truthy)."""
        stops_at = isinstance(node.op, ast.Or)  # the truth that decides the operator
        for operand in node.values:
            t = self.truth(operand, env)
            if t is None:
                return UNKNOWN
            if t is stops_at:
                value = self.value(operand, env)
                return t if value is UNKNOWN else value
        return self.value(node.values[-1], env)

    def _compare(self, node: ast.Compare, env: Env) -> object:
        decided = self._decided(node)
        if decided is not None:
            return decided
        if len(node.ops) != 1:
            return UNKNOWN
        left, right = self.value(node.left, env), self.value(node.comparators[0], env)
        if any(isinstance(v, Marker) for v in (left, right)):
            return UNKNOWN
        op = node.ops[0]
        if isinstance(op, (ast.Is, ast.IsNot)) and all(
            v in (None, True, False) for v in (left, right)
        ):
            return (left is right) is isinstance(op, ast.Is)
        if isinstance(op, (ast.Eq, ast.NotEq)):
            return (left == right) is isinstance(op, ast.Eq)
        return UNKNOWN

    def _call(self, node: ast.Call, env: Env) -> object:
        func = node.func
        if isinstance(func, ast.Name) and func.id == "isinstance" and len(node.args) == 2:
            classes = node.args[1]
            names = classes.elts if isinstance(classes, ast.Tuple) else [classes]
            if not any(ast.unparse(c) in _DEVICE_CLASSES for c in names):
                return UNKNOWN
            value = self.value(node.args[0], env)
            if value is DEVICE:
                return True
            only_device = all(ast.unparse(c) in _DEVICE_CLASSES for c in names)
            known = value is not UNKNOWN and not isinstance(value, Marker)
            return False if known and only_device else UNKNOWN
        return self.returns_of(self.path, func)


def is_site(node: ast.AST, tail: str, nested: bool) -> bool:
    """A call whose name or last attribute is ``tail``, or (``nested``) the def so named."""
    if nested:
        return isinstance(node, DEFS) and node.name == tail
    if not isinstance(node, ast.Call):
        return False
    f = node.func
    return (isinstance(f, ast.Name) and f.id == tail) or (
        isinstance(f, ast.Attribute) and f.attr == tail
    )


class DefShape:
    """One def's calls and nested defs by name, found once, and which expressions a walk
    for a name needs to look into (:meth:`holding`: those whose lines hold a site)."""

    def __init__(self, fn: ast.AST) -> None:
        self.named: dict[tuple[str, bool], list[tuple[int, int]]] = {}
        for node in ast.walk(fn):
            if isinstance(node, ast.Call):
                f = node.func
                name = f.id if isinstance(f, ast.Name) else getattr(f, "attr", None)
                nested = False
            elif isinstance(node, DEFS):
                name, nested = node.name, True
            else:
                continue
            if name is not None:
                span = (node.lineno, node.end_lineno or node.lineno)
                self.named.setdefault((name, nested), []).append(span)

    def holding(self, tail: str, nested: bool) -> Callable[[ast.AST], bool]:
        """Whether a node's lines hold a site of ``tail`` (a few more than the nodes that
        hold one: only a walk's time depends on it)."""
        spans = self.named.get((tail, nested), [])

        def holds(node: ast.AST) -> bool:
            start = getattr(node, "lineno", None)
            if start is None:
                return True
            end = getattr(node, "end_lineno", None) or start
            return any(start <= a and b <= end for a, b in spans)

        return holds


class Walker:
    """Walks one def's statements with what is known, collecting the sites of ``tail``:
    calls whose name or last attribute is ``tail``, or (``nested``) the def so named.
    ``holding``: :meth:`DefShape.holding` of the def walked (or of one it is nested in)."""

    def __init__(
        self,
        values: Values,
        tail: str,
        nested: bool,
        walk: Walk,
        holding: Callable[[ast.AST], bool],
    ) -> None:
        self.values = values
        self.tail = tail
        self.nested = nested
        self.walk = walk
        self.holding = holding
        self.closures: list[tuple[ast.FunctionDef | ast.AsyncFunctionDef, Env]] = []

    def why(self, test: ast.expr, taken: bool | None) -> str:
        """``taken`` None: the test is undecided, but every branch of it leaves."""
        line = test.lineno + self.values.line_offset
        where = f"({self.values.path}:{line})"
        if taken is None:
            return f"every branch of `{ast.unparse(test)}` leaves first {where}"
        return f"`{ast.unparse(test)}` is {taken} there {where}"

    def is_site(self, node: ast.AST) -> bool:
        return is_site(node, self.tail, self.nested)

    def skip(
        self, nodes: Iterable[ast.AST], test: ast.expr, taken: bool | None, leaves: bool = False
    ) -> None:
        """Sites in code the route never runs (``test`` is ``taken`` there; ``leaves``:
        and the branch it takes leaves the block; ``taken`` None: every branch does)."""
        for node in nodes:
            if not self.holding(node):
                continue
            for n in ast.walk(node):
                if self.is_site(n):
                    why = self.why(test, taken)
                    if leaves and taken is not None:
                        why = why.replace(" there (", " there and leaves first (", 1)
                    self.walk.blocked.append(why)

    # ---- statements -----------------------------------------------------------------

    def block(self, stmts: list[ast.stmt], env: Env) -> tuple[Env, bool]:
        """The names known after ``stmts``, and whether they always leave the block."""
        for i, stmt in enumerate(stmts):
            before = env
            env, done = self.stmt(stmt, env)
            if done:
                if isinstance(stmt, ast.If):  # the branch taken (or every one) leaves
                    taken = self.values.truth(stmt.test, before)
                    self.skip(stmts[i + 1 :], stmt.test, taken, leaves=True)
                return env, True
        return env, False

    def stmt(self, s: ast.stmt, env: Env) -> tuple[Env, bool]:
        if isinstance(s, ast.If):
            return self._if(s, env)
        if isinstance(s, (ast.Return, ast.Raise)):
            value = s.value if isinstance(s, ast.Return) else s.exc
            self.scan(value, env)
            if isinstance(s, ast.Return):
                self.walk.returns.append(self.values.value(value, env) if value else None)
            return env, True
        if isinstance(s, (ast.Break, ast.Continue)):
            return env, True
        if isinstance(s, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            return self._assign(s, env), False
        if isinstance(s, (ast.For, ast.AsyncFor, ast.While, ast.Try, ast.Match)):
            return self._loop_or_try(s, env), False
        if isinstance(s, ast.TryStar):
            return self._loop_or_try(s, env), False
        if isinstance(s, (ast.With, ast.AsyncWith)):
            for item in s.items:
                self.scan(item.context_expr, env)
            return self.block(
                s.body,
                havoc(env, stored_names(i.optional_vars for i in s.items if i.optional_vars)),
            )
        if isinstance(s, DEFS):
            for d in s.decorator_list:
                self.scan(d, env)
            if self.is_site(s):
                self.walk.sites.append(Site(s, dict(env)))
            self.closures.append((s, dict(env)))
            return {**env, s.name: UNKNOWN}, False
        if isinstance(s, ast.ClassDef):
            return {**env, s.name: UNKNOWN}, False
        for child in ast.iter_child_nodes(s):
            if isinstance(child, ast.expr):
                self.scan(child, env)
        return env, False

    def _if(self, s: ast.If, env: Env) -> tuple[Env, bool]:
        self.scan(s.test, env)
        taken = self.values.truth(s.test, env)
        if taken is True:
            self.skip(s.orelse, s.test, True)
            return self.block(s.body, env)
        if taken is False:
            self.skip(s.body, s.test, False)
            return self.block(s.orelse, env)
        body, body_done = self.block(s.body, dict(env))
        other, other_done = self.block(s.orelse, dict(env))
        if body_done and other_done:
            return env, True
        if body_done or other_done:
            return (other if body_done else body), False
        return join(body, other), False

    def _assign(self, s: ast.Assign | ast.AnnAssign | ast.AugAssign, env: Env) -> Env:
        self.scan(s.value, env)
        if isinstance(s, ast.AugAssign) or s.value is None:
            return havoc(env, stored_names([s.target]))
        simple = isinstance(s.value, (ast.Constant, ast.Name, ast.Attribute))
        value = self.values.value(s.value, env) if simple else Lazy(s.value, env)
        targets = s.targets if isinstance(s, ast.Assign) else [s.target]
        out = dict(env)
        for t in targets:
            if isinstance(t, ast.Name):
                out[t.id] = value
            else:
                out = havoc(out, stored_names([t]))
        return out

    def _loop_or_try(self, s: ast.stmt, env: Env) -> Env:
        """A loop, ``try`` or ``match``: its parts walked with every name it assigns
        unknown; the same after it."""
        if isinstance(s, ast.While) and self.values.truth(s.test, env) is False:
            self.skip(s.body, s.test, False)
            return self.block(s.orelse, env)[0]
        after = havoc(env, stored_names([s]))
        for expr in ("iter", "test", "subject"):
            self.scan(getattr(s, expr, None), after)
        parts = [getattr(s, name, []) for name in ("body", "orelse", "finalbody")]
        parts += [h.body for h in getattr(s, "handlers", [])]
        parts += [c.body for c in getattr(s, "cases", [])]
        for part in parts:
            self.block(part, dict(after))
        return after

    # ---- expressions ----------------------------------------------------------------

    def scan(self, node: ast.AST | None, env: Env) -> None:
        """Record the sites in an expression the route evaluates (short circuits kept)."""
        if node is None or not self.holding(node):
            return
        if isinstance(node, ast.BoolOp):
            stops_at = isinstance(node.op, ast.Or)
            for i, operand in enumerate(node.values):
                self.scan(operand, env)
                if self.values.truth(operand, env) is stops_at:
                    self.skip(node.values[i + 1 :], operand, stops_at)
                    return
            return
        if isinstance(node, ast.IfExp):
            self.scan(node.test, env)
            taken = self.values.truth(node.test, env)
            for branch, when in ((node.body, True), (node.orelse, False)):
                if taken is None or taken is when:
                    self.scan(branch, env)
                else:
                    self.skip([branch], node.test, taken)
            return
        if self.is_site(node):
            self.walk.sites.append(Site(node, dict(env)))
        if isinstance(node, ast.Lambda):
            self.scan(node.body, havoc(env, (a.arg for a in all_args(node.args))))
            return
        for child in ast.iter_child_nodes(node):
            self.scan(child, env)

    def closure_bodies(self, end: Env) -> None:
        """The nested defs met, walked with the names their def knew both where each is
        defined and at its end; their parameters unknown."""
        while self.closures:
            fn, at_def = self.closures.pop(0)
            if not self.holding(fn):
                continue  # no site in it: nothing to learn
            env = havoc(join(at_def, end), (a.arg for a in all_args(fn.args)))
            sites = Walk(self.walk.sites, self.walk.blocked)
            inner = Walker(self.values, self.tail, self.nested, sites, self.holding)
            inner_end, _ = inner.block(fn.body, env)
            inner.closure_bodies(inner_end)


def all_args(a: ast.arguments) -> list[ast.arg]:
    return [
        *a.posonlyargs,
        *a.args,
        *([a.vararg] if a.vararg else []),
        *a.kwonlyargs,
        *([a.kwarg] if a.kwarg else []),
    ]
