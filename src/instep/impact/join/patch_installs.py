"""Is a downstream monkey-patch installed only under a switch that is off by default?

A patch made inside a function (``def _patch_ir(): ir.Reduction.create = f``) is
installed when that function runs. :meth:`PatchInstalls.off_by_default` says why it runs
only when someone turns a switch on, or answers '': the assignment sits in the body of an
``if`` whose test is off by default, or every call of the installing function does (in
the caller's own body, or, up to :data:`DEPTH` levels, through callers that are
themselves installed that way). A file that imports the function by name only under such
a switch calls it only then, whatever the call's own place (``if dump_fx_graph: from
.lowering_fx import f`` / ``else: from .lowering import f`` / ``f()``). A patch made at
module level, in a class, in a function never called by name, or in one whose name is also
passed around is not decided.

"Off by default" is the value the test has when the process starts with no environment
variable set and nothing changed by hand (:class:`SwitchValues`):

* a downstream module attribute (``npu_config.dump_fx_graph``, through the module's
  import, at module level or inside the function) takes the value its one module-level
  assignment computes: ``os.environ.get("X", False)``, ``os.getenv("X")`` give their
  default, ``== "1"``, ``in (...)``, ``not``, ``and``/``or``, ``bool()``/``int()``/``str()``
  and ``.lower()`` are evaluated, another name is followed, and so is an attribute of a
  module-level class that serves as a namespace of settings (torch-npu 2.8.0's
  ``class aot_inductor: debug_kernel = os.environ.get(…)``); a name assigned twice in its
  module, written by any downstream file (``.name = ``, ``setattr(…, "name", …)``,
  ``{"name": …}``) or read from anything else is not decided;
* an upstream config attribute (``torch._inductor.config.x``, ``config.trace.enabled``)
  takes the default written in the *new* upstream's config module (a literal, an
  environment read as above, or ``Config(default=…)``), provided the downstream never
  writes it.

Static only: nothing is imported or run. This module finds no coupling and picks no
verdict (the breaking-path search reads it: ``join/breaking_path.py``).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterable

from instep.impact.upstream.sources.snapshot import read_texts
from instep.pyindex.model import module_of
from instep.pyindex.parsed_files import ParsedFiles

DEPTH = 3  # how many installing functions up the search follows calls
_UNKNOWN = object()
_ENV_GETS = frozenset({"os.environ.get", "os.getenv", "environ.get", "getenv"})
_CASTS = {"bool": bool, "int": int, "str": str, "float": float}
_STR_METHODS = frozenset({"lower", "upper", "strip"})
_FOLLOW = 4  # how many names one value may follow (config.py: ``b = a or c``)


def _parents(tree: ast.AST) -> dict[ast.AST, ast.AST]:
    return {c: p for p in ast.walk(tree) for c in ast.iter_child_nodes(p)}


def _def_of(tree: ast.Module, name: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            return node
    return None


class SwitchValues:
    """The default value of a switch read in a downstream file (see the module's
    docstring): ``value(test, path, scope)`` is the value, or ``_UNKNOWN``."""

    def __init__(
        self,
        texts: Callable[[], dict[str, bytes]],
        tree: Callable[[str], ast.Module | None],
        upstream_source: Callable[[str], bytes | None],
    ) -> None:
        self.texts = texts
        self.tree = tree
        self.upstream_source = upstream_source
        self._modules: dict[str, str] | None = None
        self._written: dict[str, bool] = {}
        self._up_trees: dict[str, ast.Module | None] = {}

    def _module_path(self, module: str) -> str | None:
        if self._modules is None:
            self._modules = {}
            for p in self.texts():
                self._modules.setdefault(module_of(p), p)
        return self._modules.get(module)

    def written(self, name: str) -> bool:
        """Does any downstream file write an attribute or key called ``name``?"""
        if name not in self._written:
            n = re.escape(name)
            pat = re.compile(
                rf"\.{n}\s*=(?!=)|setattr\([^)\n]*[\"']{n}[\"']|[\"']{n}[\"']\s*:".encode()
            )
            raw = name.encode()  # every match names it: a substring test first, cheaper
            self._written[name] = any(raw in t and pat.search(t) for t in self.texts().values())
        return self._written[name]

    def value(self, node: ast.expr, path: str, scope: ast.AST, hops: int = 0) -> object:
        """The value of ``node`` (an ``if`` test in ``path``, inside ``scope``) when no
        environment variable is set, or ``_UNKNOWN``."""
        if hops > _FOLLOW:
            return _UNKNOWN
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            v = self.value(node.operand, path, scope, hops)
            return _UNKNOWN if v is _UNKNOWN else not v
        if isinstance(node, ast.BoolOp):
            return self._bool_op(node, path, scope, hops)
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            return _compare(
                node.ops[0],
                self.value(node.left, path, scope, hops),
                self.value(node.comparators[0], path, scope, hops),
            )
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            vals = [self.value(e, path, scope, hops) for e in node.elts]
            return _UNKNOWN if _UNKNOWN in vals else tuple(vals)
        if isinstance(node, ast.Call):
            return self._call(node, path, scope, hops)
        if isinstance(node, ast.Name):
            return self._name(node.id, path, scope, hops)
        if isinstance(node, ast.Attribute):
            return self._attribute(node, path, scope, hops)
        return _UNKNOWN

    def _bool_op(self, node: ast.BoolOp, path: str, scope: ast.AST, hops: int) -> object:
        vals = [self.value(v, path, scope, hops) for v in node.values]
        decisive = isinstance(node.op, ast.Or)  # a truthy operand decides an `or`
        for v in vals:
            if v is not _UNKNOWN and bool(v) is decisive:
                return v
        return _UNKNOWN if _UNKNOWN in vals else vals[-1]

    def _call(self, node: ast.Call, path: str, scope: ast.AST, hops: int) -> object:
        func = ast.unparse(node.func)
        if func in _ENV_GETS:
            default = node.args[1] if len(node.args) > 1 else None
            for kw in node.keywords:
                if kw.arg == "default":
                    default = kw.value
            return None if default is None else self.value(default, path, scope, hops)
        if func in _CASTS and len(node.args) == 1 and not node.keywords:
            v = self.value(node.args[0], path, scope, hops)
            try:
                return _UNKNOWN if v is _UNKNOWN else _CASTS[func](v)
            except (TypeError, ValueError):
                return _UNKNOWN
        if (
            isinstance(node.func, ast.Attribute)
            and node.func.attr in _STR_METHODS
            and not node.args
        ):
            v = self.value(node.func.value, path, scope, hops)
            return getattr(v, node.func.attr)() if isinstance(v, str) else _UNKNOWN
        if func.rsplit(".", 1)[-1] == "Config":  # upstream config: Config(default=...)
            for kw in node.keywords:
                if kw.arg == "default":
                    return self.value(kw.value, path, scope, hops)
        return _UNKNOWN

    def _imports(self, path: str, scope: ast.AST) -> dict[str, str]:
        """Local name -> dotted name, from every import of the file (any level) and of
        ``scope``; a name imported as two different things is left out."""
        tree = self.tree(path)
        got: dict[str, set[str]] = {}
        package = module_of(path) if path.endswith("__init__.py") else None
        base = package or module_of(path).rpartition(".")[0]
        for node in ast.walk(tree) if tree is not None else ():
            if isinstance(node, ast.Import):
                for a in node.names:
                    local = a.asname or a.name.split(".", 1)[0]
                    got.setdefault(local, set()).add(a.name if a.asname else local)
            elif isinstance(node, ast.ImportFrom):
                mod = absolute_module(node, base)
                for a in node.names:
                    got.setdefault(a.asname or a.name, set()).add(f"{mod}.{a.name}")
        return {k: next(iter(v)) for k, v in got.items() if len(v) == 1}

    def _name(self, name: str, path: str, scope: ast.AST, hops: int) -> object:
        tree = self.tree(path)
        if tree is None or _local(scope, name):
            return _UNKNOWN
        bound = _module_bindings(tree, name)
        if bound is not None:
            if self.written(name):
                return _UNKNOWN
            return self.value(bound, path, tree, hops + 1) if bound is not False else _UNKNOWN
        dotted = self._imports(path, scope).get(name)
        return _UNKNOWN if dotted is None else self._dotted(dotted, hops + 1)

    def _attribute(self, node: ast.Attribute, path: str, scope: ast.AST, hops: int) -> object:
        parts: list[str] = []
        cur: ast.expr = node
        while isinstance(cur, ast.Attribute):
            parts.append(cur.attr)
            cur = cur.value
        if not isinstance(cur, ast.Name):
            return _UNKNOWN
        imported = self._imports(path, scope).get(cur.id)
        if imported is None and len(parts) == 1 and not _local(scope, cur.id):
            own = self._class_attribute(self.tree(path), cur.id, parts[0], path, hops)
            if own is not None:
                return own  # a class of this module used as a namespace of settings
        head = imported or cur.id
        return self._dotted(".".join([head, *reversed(parts)]), hops + 1)

    def _class_attribute(
        self, tree: ast.Module | None, cls: str, attr: str, path: str, hops: int
    ) -> object | None:
        """The value of ``cls.attr`` for a module-level class ``cls`` of ``tree`` that
        binds ``attr`` once in its body (``class aot_inductor: debug_kernel = os.environ
        .get(…)``), ``_UNKNOWN`` when written elsewhere; None when ``cls`` is no such class."""
        body = tree.body if tree is not None else []
        node = next((n for n in body if isinstance(n, ast.ClassDef) and n.name == cls), None)
        if node is None or tree is None:
            return None
        bound = _bindings_in(node.body, attr)
        if not bound or self.written(attr):
            return _UNKNOWN
        return self.value(bound, path, tree, hops + 1)  # type: ignore[arg-type]

    def _dotted(self, dotted: str, hops: int) -> object:
        """The value of the module attribute ``dotted`` (downstream or upstream)."""
        parts = dotted.split(".")
        for i in range(len(parts) - 1, 0, -1):
            module, rest = ".".join(parts[:i]), parts[i:]
            down = self._module_path(module)
            if down is not None:
                if len(rest) == 2:  # a class of the module used as a namespace
                    got = self._class_attribute(self.tree(down), rest[0], rest[1], down, hops)
                    return _UNKNOWN if got is None else got
                if len(rest) != 1:
                    return _UNKNOWN
                tree = self.tree(down)
                bound = _module_bindings(tree, rest[0]) if tree is not None else None
                if not bound or self.written(rest[0]):
                    return _UNKNOWN
                return self.value(bound, down, tree, hops)  # type: ignore[arg-type]
            up = self._up_tree(module)
            if up is not None:
                return self._upstream_default(up, module, rest, hops)
        return _UNKNOWN

    def _up_tree(self, module: str) -> ast.Module | None:
        if module not in self._up_trees:
            text = self.upstream_source(module)
            try:
                self._up_trees[module] = ast.parse(text) if text else None
            except (SyntaxError, ValueError):
                self._up_trees[module] = None
        return self._up_trees[module]

    def _upstream_default(self, tree: ast.Module, module: str, rest: list[str], hops) -> object:
        """The default of ``module.<rest>`` written in the new upstream (a class body
        holds a nested section: ``config.trace.enabled``), unless the downstream writes it."""
        body: list[ast.stmt] = tree.body
        for part in rest[:-1]:
            cls = next((n for n in body if isinstance(n, ast.ClassDef) and n.name == part), None)
            if cls is None:
                return _UNKNOWN
            body = cls.body
        if self.written(rest[-1]):
            return _UNKNOWN
        bound = _bindings_in(body, rest[-1])
        if not bound:
            return _UNKNOWN
        return _UpstreamValues(self).value(bound, module, tree, hops)


class _UpstreamValues(SwitchValues):
    """Values in an upstream config module: literals, environment reads, ``Config``;
    no name is followed (another module's default would need its own reading)."""

    def __init__(self, outer: SwitchValues) -> None:
        super().__init__(outer.texts, lambda _p: None, outer.upstream_source)

    def _name(self, name: str, path: str, scope: ast.AST, hops: int) -> object:
        return _UNKNOWN

    def _attribute(self, node: ast.Attribute, path: str, scope: ast.AST, hops: int) -> object:
        return _UNKNOWN


def absolute_module(node: ast.ImportFrom, base: str) -> str:
    if not node.level:
        return node.module or ""
    parts = base.split(".")
    parts = parts[: len(parts) - (node.level - 1)] if node.level > 1 else parts
    return ".".join([*parts, node.module] if node.module else parts)


def _bindings_in(body: Iterable[ast.stmt], name: str) -> ast.expr | bool | None:
    """The value of the one assignment of ``name`` among ``body``'s statements (ifs
    included: their branches bind at that level); False when assigned more than once or
    otherwise (an import, a def, a loop); None when not bound."""
    found: list[ast.expr | None] = []

    def walk(stmts: Iterable[ast.stmt]) -> None:
        for s in stmts:
            if isinstance(s, ast.Assign):
                for t in s.targets:
                    if isinstance(t, ast.Name) and t.id == name:
                        found.append(s.value)
                    elif isinstance(t, (ast.Tuple, ast.List)) and any(
                        isinstance(e, ast.Name) and e.id == name for e in t.elts
                    ):
                        found.append(None)
            elif isinstance(s, (ast.AnnAssign, ast.AugAssign)):
                if isinstance(s.target, ast.Name) and s.target.id == name:
                    found.append(s.value if isinstance(s, ast.AnnAssign) else None)
            elif isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                if s.name == name:
                    found.append(None)
            elif isinstance(s, (ast.If, ast.Try, ast.With, ast.For, ast.While)):
                for field in ("body", "orelse", "finalbody", "handlers"):
                    walk(getattr(s, field, []))
            elif isinstance(s, ast.ExceptHandler):
                walk(s.body)

    walk(body)
    if not found:
        return None
    return found[0] if len(found) == 1 and found[0] is not None else False


def _module_bindings(tree: ast.Module | None, name: str) -> ast.expr | bool | None:
    """:func:`_bindings_in` at module level, False as well when a function rebinds the
    name through ``global``."""
    if tree is None:
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.Global) and name in node.names:
            return False
    return _bindings_in(tree.body, name)


def _local(scope: ast.AST, name: str) -> bool:
    """Is ``name`` a parameter of the function ``scope`` or bound inside it?"""
    if not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    a = scope.args
    params = [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg]
    if any(p is not None and p.arg == name for p in params):
        return True
    return any(
        isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store)
        for n in ast.walk(scope)
    )


def _compare(op: ast.cmpop, left: object, right: object) -> object:
    if left is _UNKNOWN or right is _UNKNOWN:
        return _UNKNOWN
    try:
        if isinstance(op, ast.Eq):
            return left == right
        if isinstance(op, ast.NotEq):
            return left != right
        if isinstance(op, ast.In):
            return left in right  # type: ignore[operator]
        if isinstance(op, ast.NotIn):
            return left not in right  # type: ignore[operator]
        if isinstance(op, ast.Is):
            return left is right
        if isinstance(op, ast.IsNot):
            return left is not right
    except TypeError:
        return _UNKNOWN
    return _UNKNOWN


class PatchInstalls:
    """Where the downstream's patches are installed (see the module's docstring); the
    downstream texts read once, trees parsed on demand, answers memoised."""

    def __init__(
        self,
        paths: Iterable[str],
        read: Callable[[str], bytes | None],
        upstream_source: Callable[[str], bytes | None],
        trees: ParsedFiles | None = None,
    ) -> None:
        self.paths = [p for p in paths if p.endswith(".py")]
        self.read = read
        self._texts: dict[str, bytes] | None = None
        # the downstream's trees: the join's shared store over ``read`` when given
        self._shared = trees
        self._trees: dict[str, ast.Module | None] = {}
        self._parents: dict[str, dict[ast.AST, ast.AST]] = {}
        self._memo: dict[tuple[str, str], str] = {}
        self._called: dict[str, bool] = {}
        self.switches = SwitchValues(self.texts, self.tree, upstream_source)

    def texts(self) -> dict[str, bytes]:
        if self._texts is None:
            self._texts = read_texts(self.paths, self.read)
        return self._texts

    def tree(self, path: str) -> ast.Module | None:
        if self._shared is not None:
            return self._shared.tree(path) if path in self.texts() else None
        if path not in self._trees:
            data = self.texts().get(path)
            try:
                self._trees[path] = ast.parse(data.decode("utf-8", "replace")) if data else None
            except (SyntaxError, ValueError):
                self._trees[path] = None
        return self._trees[path]

    def parents(self, path: str) -> dict[ast.AST, ast.AST]:
        if path not in self._parents:
            tree = self.tree(path)
            self._parents[path] = _parents(tree) if tree is not None else {}
        return self._parents[path]

    def off_by_default(self, path: str, line: int, owner: str | None) -> str:
        """Why the patch at ``path:line`` (made in the function ``owner``) is installed
        only under a switch off by default, or ''."""
        tree = self.tree(path)
        if tree is None or not owner:
            return ""
        top = owner.split(".", 1)[0]
        fn = _def_of(tree, top)
        if fn is None:
            return ""  # a method or a class body: who runs it is not followed here
        stmt = next((n for n in ast.walk(fn) if isinstance(n, ast.stmt) and n.lineno == line), None)
        why = self.guard(stmt, path, fn) if stmt is not None else ""
        return why or self.calls_off(path, top, 0)

    def called_on_path(self, name: str) -> bool:
        """Does the downstream call ``name`` (``name(...)``, ``x.name(...)``) anywhere but
        in functions that run only under a switch off by default (called there, or
        installed there as a patch: :meth:`calls_off`)?"""
        if name not in self._called:
            self._called[name] = self._calls_anywhere(name)
        return self._called[name]

    def _calls_anywhere(self, name: str) -> bool:
        raw = name.encode()
        needle = re.compile(rb"\b" + re.escape(raw) + rb"\s*\(")
        for path, text in self.texts().items():
            tree = self.tree(path) if raw in text and needle.search(text) else None
            if tree is None:
                continue
            parents = self.parents(path)
            for node in ast.walk(tree):
                func = node.func if isinstance(node, ast.Call) else None
                hit = (isinstance(func, ast.Name) and func.id == name) or (
                    isinstance(func, ast.Attribute) and func.attr == name
                )
                if not hit:
                    continue
                fn = enclosing_function(node, parents)
                if fn is None or parents.get(fn) is not tree:
                    return True  # module level, or a method: runs when loaded or called
                if not (self.guard(node, path, tree) or self.calls_off(path, fn.name, 0)):
                    return True
        return False

    def guard(self, node: ast.AST, path: str, scope: ast.AST) -> str:
        """The off-by-default ``if`` of ``scope`` whose body holds ``node``, said, or ''."""
        parents = self.parents(path)
        child, cur = node, parents.get(node)
        while cur is not None and cur is not scope:
            if isinstance(cur, ast.If) and child in cur.body:
                where = enclosing_function(cur, parents) or scope
                v = self.switches.value(cur.test, path, where)
                if v is not _UNKNOWN and not v:
                    return (
                        f"under `if {ast.unparse(cur.test)}:` at {path}:{cur.lineno}, "
                        "off by default (no environment variable set)"
                    )
            child, cur = cur, parents.get(cur)
        return ""

    def calls_off(self, path: str, name: str, depth: int) -> str:
        """Why every call of the module function ``name`` of ``path`` runs only under an
        off-by-default switch, or ''."""
        key = (path, name)
        if key in self._memo:
            return self._memo[key]
        self._memo[key] = ""  # a cycle decides nothing
        if depth >= DEPTH:
            return ""
        raw = name.encode()
        word = re.compile(rb"\b" + re.escape(raw) + rb"\b")
        whys: list[str] = []
        for p, text in self.texts().items():
            if raw not in text or not word.search(text):  # the substring test is cheaper
                continue
            tree = self.tree(p)
            if p != path and tree is not None and _def_of(tree, name) is not None:
                continue  # another module's own function of that name
            through = self._imported_off(p, name, module_of(path)) if p != path else None
            if through:
                whys.append(through)  # its calls reach this def only through that import
                continue
            got = self._calls_in(p, name, depth)
            if got is None:
                return ""
            whys.extend(got)
        self._memo[key] = whys[0] if whys else ""
        return self._memo[key]

    def _imported_off(self, path: str, name: str, module: str) -> str | None:
        """Why every ``from <module> import name`` of the file ``path`` sits under a
        switch off by default (so the file's calls of ``name`` reach ``module``'s def
        only when it is on: ``if dump_fx_graph: from .lowering_fx import f / else: from
        .lowering import f``), '' when one does not, None when the file imports no
        ``name`` from ``module``."""
        tree = self.tree(path)
        if tree is None:
            return None
        package = module_of(path) if path.endswith("__init__.py") else None
        base = package or module_of(path).rpartition(".")[0]
        whys = []
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom) or absolute_module(node, base) != module:
                continue
            if not any(a.name == name and a.asname is None for a in node.names):
                continue
            scope = enclosing_function(node, self.parents(path)) or tree
            why = self.guard(node, path, scope)
            if not why:
                return ""
            whys.append(f"imported {why}")
        return whys[0] if whys else None

    def _calls_in(self, path: str, name: str, depth: int) -> list[str] | None:
        """The reason each call of ``name`` in ``path`` (or assignment of it onto an
        attribute: a patch installing it) is off by default, or None when one is not (or
        the name is used otherwise than called, installed or imported)."""
        tree = self.tree(path)
        if tree is None:
            return None
        parents = self.parents(path)
        out: list[str] = []
        for node in ast.walk(tree):
            if isinstance(node, ast.alias) and node.name == name and node.asname:
                return None  # imported under another name: its calls are not followed
            hit = (isinstance(node, ast.Name) and node.id == name) or (
                isinstance(node, ast.Attribute) and node.attr == name
            )
            if not hit or not isinstance(node.ctx, ast.Load):  # type: ignore[attr-defined]
                continue
            call = parents.get(node)
            patch = isinstance(call, ast.Assign) and call.value is node
            if patch and not all(isinstance(t, ast.Attribute) for t in call.targets):  # type: ignore[union-attr]
                return None
            if not (patch or (isinstance(call, ast.Call) and call.func is node)):
                return None  # passed on: who calls it is not followed
            why = self.guard(call, path, tree)  # type: ignore[arg-type]
            if not why:
                caller = enclosing_function(call, parents)  # type: ignore[arg-type]
                if caller is None or parents.get(caller) is not tree:
                    return None  # module level, or a method: runs whenever loaded
                why = self.calls_off(path, caller.name, depth + 1)
                if why:
                    why = f"through `{caller.name}`, {why}"
            if not why:
                return None
            out.append(why)
        return out


def enclosing_function(node: ast.AST, parents: dict[ast.AST, ast.AST]):
    cur = parents.get(node)
    while cur is not None:
        if isinstance(cur, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return cur
        cur = parents.get(cur)
    return None
