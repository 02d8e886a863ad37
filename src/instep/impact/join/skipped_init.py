"""An inherited upstream member that reads ``self.<attr>`` which only an upstream
``__init__`` sets, on a downstream class whose own ``__init__`` never runs that one.

The shape (torch 2.15.0, torch-npu 2.14.0): ``CUDACombinedScheduling.can_fuse_reduction_pair``
reads ``self._nv_universal_gemm_scheduling``, set only by ``CUDACombinedScheduling.__init__``;
``NPUCombinedScheduling(CUDACombinedScheduling, …).__init__`` calls
``BaseScheduling.__init__(self, …)`` instead, so every call of the inherited member raises
AttributeError.

A break is claimed only when every step is read from the code: the read runs on the
member's path (not under an ``if``, a short-circuit or a conditional expression; a
``getattr(self, "_x", None)`` is no attribute read), no class of the upstream MRO gives the
name at class level (a method, a property, a class attribute default), an upstream
``__init__`` of the MRO assigns it and no other upstream method of the MRO does, and the
downstream ``__init__`` that runs (the class's own, or the first of its downstream bases)
calls no ``super().__init__`` and no ``X.__init__(self, …)`` of a class that has the setter
among its ancestors, while no downstream class of the chain sets the attribute (in any
method) or gives it a class-level default. Anything else is no finding. The same check
serves an added member and a changed one (then only the reads its old body did not have).
Nothing here picks a verdict: ``join/hook_names.py`` turns a finding into a failing default
with this evidence.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

UpClass = tuple[str, str]  # (module, class qualname) in the new upstream
_STORE_FUNCS = ("setattr",)
# a downstream class's own __init__: (its class record, the def, the bases named in it
# with their lines, what the class and its downstream bases set)
_OwnInit = tuple[
    object, ast.FunctionDef | ast.AsyncFunctionDef, list[tuple[str, int]], frozenset[str]
]


def unconditional_self_reads(stmts: list[ast.stmt]) -> list[tuple[str, int]]:
    """``self.<attr>`` loads that run whenever ``stmts`` run, in order: (attr, line)."""
    out: list[tuple[str, int]] = []

    def expr(node: ast.AST) -> None:
        if isinstance(node, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp)):
            return
        if isinstance(node, ast.GeneratorExp):
            return
        if isinstance(node, ast.BoolOp):
            expr(node.values[0])  # the others run only after the first
            return
        if isinstance(node, ast.IfExp):
            expr(node.test)
            return
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.ctx, ast.Load)
            and isinstance(node.value, ast.Name)
            and node.value.id == "self"
        ):
            out.append((node.attr, node.lineno))
            return
        for child in ast.iter_child_nodes(node):
            expr(child)

    for stmt in stmts:
        if isinstance(stmt, (ast.If, ast.While)):
            expr(stmt.test)
        elif isinstance(stmt, (ast.For, ast.AsyncFor)):
            expr(stmt.iter)
        elif isinstance(stmt, (ast.With, ast.AsyncWith)):
            for item in stmt.items:
                expr(item.context_expr)
            out.extend(unconditional_self_reads(stmt.body))
        elif isinstance(stmt, (ast.Try, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue  # a handler may catch it; a nested def does not run here
        else:
            expr(stmt)
    return out


def _stores(fn: ast.AST) -> set[str]:
    """Attribute names a def assigns on ``self`` (``self.x = …``, ``setattr(self, "x", …)``)."""
    out: set[str] = set()
    for node in ast.walk(fn):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.ctx, ast.Store)
            and isinstance(node.value, ast.Name)
            and node.value.id == "self"
        ):
            out.add(node.attr)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in _STORE_FUNCS
            and len(node.args) >= 2
            and isinstance(node.args[0], ast.Name)
            and node.args[0].id == "self"
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
        ):
            out.add(node.args[1].value)
    return out


def _class_level(cls: ast.ClassDef) -> set[str]:
    """Names a class body binds: defs, assignments, annotations with a value."""
    out: set[str] = set()
    for s in cls.body:
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(s.name)
        elif isinstance(s, ast.Assign):
            out.update(t.id for t in s.targets if isinstance(t, ast.Name))
        elif isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name) and s.value:
            out.add(s.target.id)
    return out


def _methods(cls: ast.ClassDef) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [s for s in cls.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))]


_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _named(tree: ast.Module | None, qualname: str, through: tuple[type, ...]):
    """The statement ``a.b.c`` of a module, each part one of ``through`` named so."""
    body = tree.body if tree is not None else []
    node = None
    for part in qualname.split("."):
        node = next((s for s in body if isinstance(s, through) and s.name == part), None)
        if node is None:
            return None
        body = node.body
    return node


def find_class(tree: ast.Module | None, qualname: str) -> ast.ClassDef | None:
    """The class ``A.B`` of a module (nested classes followed)."""
    return _named(tree, qualname, (ast.ClassDef,))


def find_def(
    tree: ast.Module | None, qualname: str
) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The def ``a.b.c`` of a module (classes and enclosing defs followed)."""
    node = _named(tree, qualname, _DEFS)
    return node if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else None


def _base_inits(init: ast.AST) -> tuple[bool, list[tuple[str, int]]]:
    """(calls ``super().__init__``, [(X, line) of each ``X.__init__(self, …)``])."""
    sup, named = False, []
    for node in ast.walk(init):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "__init__"
        ):
            continue
        recv = node.func.value
        if isinstance(recv, ast.Call) and isinstance(recv.func, ast.Name):
            sup = sup or recv.func.id == "super"
        elif isinstance(recv, (ast.Name, ast.Attribute)):
            named.append((ast.unparse(recv), node.lineno))
    return sup, named


def downstream_mros(down, resolver, cmap: dict) -> list[tuple[str, object, list[UpClass]]]:
    """Each downstream class of ``down`` (a downstream index) found in ``cmap`` (its
    ``_class_map()``), as (dotted name, class record, upstream MRO): the new upstream's
    ancestors of each of its upstream bases, in order, each once."""
    out = []
    for name, anc in down.classes().items():
        info = cmap.get(name)
        if info is None:
            continue
        mro: list[UpClass] = []
        for a in anc:
            found = resolver.class_of(resolver.resolve(a))
            if found is not None:
                mro.extend(x for x in resolver.ancestors(*found) if x not in mro)
        out.append((name, info, mro))
    return out


class SkippedInit:
    """Decides, per (downstream class, inherited member), the finding described above."""

    def __init__(
        self,
        resolver,
        tree_of: Callable[[str], ast.Module | None],
        down_tree_of: Callable[[str], ast.Module | None],
        down_classes: dict,
    ) -> None:
        self.resolver = resolver
        self.tree_of = tree_of  # new-upstream path -> parsed module
        self.down_tree_of = down_tree_of  # downstream path -> parsed module
        self.down_classes = down_classes  # module.qualname -> DownstreamClass
        self._setters: dict[tuple[tuple[UpClass, ...], str], list[tuple[UpClass, str]]] = {}
        self._up_memo: dict[UpClass, tuple] = {}  # upstream class -> up_stores
        self._own: dict[str, _OwnInit | None] = {}  # downstream class -> _own_init
        self._own_for: dict | None = None  # the down_classes _own was made from

    def _up_class(self, up: UpClass) -> tuple[ast.ClassDef | None, str]:
        mod, qual = up
        idx = self.resolver.index(mod)
        sym = idx.symbols.get(qual) if idx is not None else None
        if sym is None:
            return None, ""
        return find_class(self.tree_of(sym.path), qual), sym.path

    def up_stores(
        self, up: UpClass
    ) -> tuple[ast.ClassDef | None, str, set[str], list[tuple[ast.AST, set[str]]]]:
        """(the class, its path, :func:`_class_level`, each method with its
        :func:`_stores`) of an upstream class, memoised: :meth:`_setters_of` asks for each
        attribute read, and each class of an MRO, again."""
        if up not in self._up_memo:
            node, path = self._up_class(up)
            if node is None:
                self._up_memo[up] = (None, path, set(), [])
            else:
                methods = [(fn, _stores(fn)) for fn in _methods(node)]
                self._up_memo[up] = (node, path, _class_level(node), methods)
        return self._up_memo[up]

    def _setters_of(self, mro: list[UpClass], attr: str) -> list[tuple[UpClass, str]]:
        """Each upstream ``__init__`` of ``mro`` that sets ``attr``: (its class, path:line);
        empty when a class gives it at class level or has ``__getattr__``, another method
        sets it, or a class of ``mro`` is not read."""
        key = (tuple(mro), attr)
        if key in self._setters:
            return self._setters[key]
        found: list[tuple[UpClass, str]] = []
        for up in mro:
            node, path, level, methods = self.up_stores(up)
            if node is None or attr in level or "__getattr__" in level:
                found = []
                break
            stores = [(fn, attr in sets) for fn, sets in methods]
            if any(hit and fn.name != "__init__" for fn, hit in stores):
                found = []
                break
            found.extend((up, f"{path}:{fn.lineno}") for fn, hit in stores if hit)
        self._setters[key] = found
        return found

    def _down_chain(self, name: str) -> list[tuple[str, object]]:
        """The downstream class and its downstream bases, nearest first."""
        out, todo = [], [name]
        while todo:
            cur = todo.pop(0)
            info = self.down_classes.get(cur)
            if info is None or any(cur == n for n, _ in out):
                continue
            out.append((cur, info))
            todo.extend(info.bases)
        return out

    def down_sets(self, down_name: str) -> set[str] | None:
        """Attributes the downstream class or a downstream base sets (any method) or gives
        at class level; None when one of them is not read."""
        out: set[str] = set()
        for _, info in self._down_chain(down_name):
            node = find_class(self.down_tree_of(info.path), info.qualname)
            if node is None:
                return None
            out |= _class_level(node)
            for fn in _methods(node):
                out |= _stores(fn)
        return out

    def finding(
        self,
        down_name: str,
        mro: list[UpClass],
        member_where: str,
        reads: list[tuple[str, int]],
    ) -> str | None:
        """Evidence that ``reads`` (of the member defined at ``member_where``) fail on the
        downstream class ``down_name``, or None."""
        found = self.first_break(down_name, mro, member_where, reads)
        return found[1] if found is not None else None

    def _own_init(self, down_name: str, chain: list[tuple[str, object]]) -> _OwnInit | None:
        """The downstream side of :meth:`first_break` for ``down_name`` (``chain``: its
        :meth:`_down_chain`): the class's own ``__init__`` (the nearest in the chain), the
        bases it names there, and what the chain sets; None when a class of the chain is
        not read, none defines ``__init__``, that one calls ``super().__init__`` or the
        chain has ``__getattr__``. Memoised per class: it reads no upstream, and each
        inherited member of a class asks again."""
        if self._own_for is not self.down_classes:  # (set after construction)
            self._own, self._own_for = {}, self.down_classes
        if down_name not in self._own:
            self._own[down_name] = self._read_own_init(chain)
        return self._own[down_name]

    def _read_own_init(self, chain: list[tuple[str, object]]) -> _OwnInit | None:
        nodes = []
        for _, info in chain:
            node = find_class(self.down_tree_of(info.path), info.qualname)
            if node is None:
                return None  # a downstream class not read: nothing proven
            nodes.append((info, node))
        init = next(
            ((info, fn) for info, node in nodes for fn in _methods(node) if fn.name == "__init__"),
            None,
        )
        if init is None:
            return None  # the upstream __init__ runs
        dn_info, dn_init = init
        sup, named = _base_inits(dn_init)
        if sup:
            return None
        dn_set: set[str] = set()
        for _, node in nodes:
            dn_set |= _class_level(node)
            for fn in _methods(node):
                dn_set |= _stores(fn)
        if "__getattr__" in dn_set:
            return None
        return dn_info, dn_init, named, frozenset(dn_set)

    def first_break(
        self,
        down_name: str,
        mro: list[UpClass],
        member_where: str,
        reads: list[tuple[str, int]],
    ) -> tuple[str, str] | None:
        """(the attribute, the evidence) of the first of ``reads`` that fails on the
        downstream class ``down_name`` (see :meth:`finding`), or None."""
        chain = self._down_chain(down_name)
        if not chain or not reads:
            return None
        own = self._own_init(down_name, chain)
        if own is None:
            return None
        dn_info, dn_init, named, dn_set = own
        path = member_where.rsplit(":", 1)[0]
        for attr, line in reads:
            if attr in dn_set:
                continue
            setters = self._setters_of(mro, attr)
            if not setters:
                continue
            runs_it, called = False, []
            for base, _ in named:
                last = base.rsplit(".", 1)[-1]
                up = next((u for u in mro if u[1].rsplit(".", 1)[-1] == last), None)
                anc = self.resolver.ancestors(*up) if up is not None else []
                if up is None or any(s_up in anc for s_up, _ in setters):
                    runs_it = True  # a downstream base, an unknown name, or a path to it
                    break
                called.append(f"`{base}.__init__`")
            if runs_it:
                continue
            how = f"calls {', '.join(called)} instead" if called else "calls no base `__init__`"
            return attr, (
                f"it reads `self.{attr}` ({path}:{line}), which only "
                + " and ".join(f"`{u[1]}.__init__` ({w})" for u, w in setters)
                + f" set{'s' if len(setters) == 1 else ''}; `{dn_info.qualname}.__init__` "
                f"({dn_info.path}:{dn_init.lineno}) {how} and never sets it: AttributeError"
            )
        return None
