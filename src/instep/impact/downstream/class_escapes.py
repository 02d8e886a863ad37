"""Does a downstream class, or an instance of it, ever leave downstream code?

An upstream call reaches a downstream override only through an object upstream holds:
one upstream built from a class it was handed, or one it was handed. A downstream class
that the downstream only builds and uses itself is out of reach of every upstream call
but those the downstream makes on its own instances. :meth:`ClassEscapes.kept_downstream`
reads every place the downstream tree names the class (or a downstream subclass of it,
by name) and says it is kept downstream when each one is:

* a base in a downstream ``class`` statement, the class argument of ``isinstance`` /
  ``issubclass``, a comparison, ``D.__name__`` / ``D.__qualname__`` (a string), or a class
  attribute read;
* a construction ``D(...)`` / ``D.factory(...)`` whose result is discarded, used as a
  receiver (``D(...).m()``) or bound to a local name only used as a receiver;
* ``return D`` in a method whose every call, upstream and downstream, reads only the
  returned class's ``__name__`` (a grid-type hook whose name upstream then looks up in its
  own module);

and no method of those classes passes ``self`` on (an argument, a return, a store). A
string equal to the class's bare name counts as a mention (a downstream module looks it up
in its own namespace: ``globals()[meta["grid_type"]]``); a dotted path ending in it
(``"pkg.mod.D"``) lets it escape, since any importer may load it. A class the downstream
never names outside its ``class`` statements is not judged (it may be built from a name
in a configuration or an entry point).
Anything else (the class passed to a registrar, stored in a table or an upstream
attribute, an instance handed to a call) lets it escape: the answer is None, and the
breaking-path search goes on as before. Static and by name only: a dynamic construction
(``globals()[name](...)``) is downstream code too and is not followed. Nothing here
matches references or picks a rule.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterable

from instep.impact.downstream.pruning import statements_in_walk_order
from instep.impact.upstream.sources.snapshot import read_texts
from instep.pyindex.parsed_files import ParsedFiles

_NAME_ATTRS = frozenset({"__name__", "__qualname__", "__module__"})
_TYPE_TESTS = frozenset({"isinstance", "issubclass"})


class _Parents:
    """The parent of each node of a module, mapped one top-level statement at a time:
    only the statements where the class is named need it (:meth:`cover`); a node outside
    them (a module-wide scope walk) maps the rest of the module."""

    def __init__(self, tree: ast.Module) -> None:
        self.tree = tree
        self.map: dict[ast.AST, ast.AST] = {}
        self.covered: set[int] = set()

    def cover(self, top: ast.AST) -> None:
        """Map every node under the top-level statement ``top`` (to the module for it)."""
        if id(top) in self.covered:
            return
        self.covered.add(id(top))
        self.map[top] = self.tree
        self.map.update(
            (child, node) for node in ast.walk(top) for child in ast.iter_child_nodes(node)
        )

    def _all(self) -> None:
        for top in self.tree.body:
            self.cover(top)

    def get(self, node: ast.AST) -> ast.AST | None:
        if node not in self.map and len(self.covered) < len(self.tree.body):
            self._all()
        return self.map.get(node)

    def __contains__(self, node: ast.AST) -> bool:
        return self.get(node) is not None

    def __getitem__(self, node: ast.AST) -> ast.AST:
        got = self.get(node)
        if got is None:
            raise KeyError(node)
        return got


def _enclosing(node: ast.AST, parents: _Parents) -> ast.AST | None:
    while node in parents:
        node = parents[node]
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Module)):
            return node
    return None


def _only_receiver(name: str, scope: ast.AST, parents: _Parents) -> bool:
    """Every load of the local ``name`` in ``scope`` is the object of an attribute."""
    for n in ast.walk(scope):
        if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load):
            p = parents.get(n)
            if not (isinstance(p, ast.Attribute) and p.value is n):
                return False
    return True


def _walk_by_statement(tree: ast.Module):
    """(top-level statement, node) for every node under each top-level statement."""
    for top in tree.body:
        for node in ast.walk(top):
            yield top, node


class ClassEscapes:
    """The downstream tree's texts, read once on demand; answers memoised per class."""

    def __init__(
        self,
        paths: Iterable[str],
        read: Callable[[str], bytes | None],
        upstream_texts: Callable[[], dict[str, bytes]] = dict,
        shared: ParsedFiles | None = None,
    ) -> None:
        self.paths = [p for p in paths if p.endswith(".py")]
        self.shared = shared  # the downstream's trees over ``read``, parsed once for all
        self.read = read
        self.upstream_texts = upstream_texts
        self._texts: dict[str, bytes] | None = None
        self._trees: dict[str, tuple[ast.Module, _Parents] | None] = {}
        self._memo: dict[str, str | None] = {}
        self._named: dict[str, bool] = {}

    def _all(self) -> dict[str, bytes]:
        if self._texts is None:
            self._texts = read_texts(self.paths, self.read)
        return self._texts

    def _tree(self, path: str) -> tuple[ast.Module, _Parents] | None:
        """The file's tree and its parent map, filled only where asked (:class:`_Parents`)."""
        if path not in self._trees:
            data = self._all()[path]
            shared = self.shared.tree(path) if self.shared is not None and data else None
            if shared is not None:
                self._trees[path] = (shared, _Parents(shared))
                return self._trees[path]
            try:  # not shared, an empty file or no Python: parsed here as before
                tree = ast.parse(data.decode("utf-8", "replace"), path)
                self._trees[path] = (tree, _Parents(tree))
            except (SyntaxError, ValueError):
                self._trees[path] = None
        return self._trees[path]

    def _files_naming(self, names: set[str]) -> list[str]:
        raw = [n.encode() for n in names]
        return [p for p, t in self._all().items() if any(r in t for r in raw)]

    def named(self, member: str) -> bool:
        """Does any downstream file name ``member`` (an attribute, a string, a def)?"""
        if member not in self._named:
            word = re.compile(rb"\b" + re.escape(member.encode()) + rb"\b")
            self._named[member] = any(word.search(t) for t in self._all().values())
        return self._named[member]

    def _subclasses(self, name: str) -> set[str]:
        names, grew = {name}, True
        while grew:
            grew = False
            for p in self._files_naming(names):
                got = self._tree(p)
                # a class is a statement: the expressions, most of the nodes, are not visited
                for node in statements_in_walk_order(got[0]) if got else ():
                    if isinstance(node, ast.ClassDef) and node.name not in names:
                        bases = {
                            b.id if isinstance(b, ast.Name) else getattr(b, "attr", None)
                            for b in node.bases
                        }
                        if bases & names:
                            names.add(node.name)
                            grew = True
        return names

    def _returns_only_named(self, fn: str) -> bool:
        """Every call of ``fn`` (upstream and downstream) reads only ``.__name__`` of it."""
        call = re.compile(rb"(?<!def )\b" + re.escape(fn.encode()) + rb"\s*\(")
        named = re.compile(rb"\s*\)\s*\.__(?:qual)?name__\b")
        seen = False
        for texts in (self.upstream_texts(), self._all()):
            for t in texts.values():
                for m in call.finditer(t):
                    if not named.match(t, m.end()):
                        return False
                    seen = True
        return seen

    def _why_not(self, node: ast.AST, names: set[str], parents: _Parents) -> str:
        """'' when this mention of the class keeps it downstream, else what it does."""
        p = parents.get(node)
        if isinstance(p, ast.ClassDef) and node in p.bases:
            return ""
        if isinstance(p, ast.Compare):
            return ""
        if isinstance(p, ast.Attribute) and p.value is node:
            q = parents.get(p)
            if p.attr in _NAME_ATTRS or not (isinstance(q, ast.Call) and q.func is p):
                return ""
            return self._why_result(q, parents)
        holder = parents.get(p) if isinstance(p, ast.Tuple) else None
        test = holder if holder is not None else p
        if (
            isinstance(test, ast.Call)
            and isinstance(test.func, ast.Name)
            and test.func.id in _TYPE_TESTS
            and (p in test.args[1:] or node in test.args[1:])
        ):
            return ""
        if isinstance(p, ast.Call) and p.func is node:
            return self._why_result(p, parents)
        if isinstance(p, ast.Return):
            fn = _enclosing(p, parents)
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if self._returns_only_named(fn.name):
                    return ""
                return f"`{fn.name}` returns the class"
        return "passed on"

    def _why_result(self, call: ast.Call, parents: _Parents) -> str:
        p = parents.get(call)
        if isinstance(p, ast.Expr) or (isinstance(p, ast.Attribute) and p.value is call):
            return ""
        if isinstance(p, ast.Assign) and len(p.targets) == 1 and isinstance(p.targets[0], ast.Name):
            scope = _enclosing(p, parents)
            if scope is not None and _only_receiver(p.targets[0].id, scope, parents):
                return ""
        return "an instance is passed on"

    def _self_passed(self, cls: ast.ClassDef, parents: _Parents) -> bool:
        for fn in cls.body:
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or not fn.args.args:
                continue
            if not _only_receiver(fn.args.args[0].arg, fn, parents):
                return True
        return False

    def kept_downstream(self, cls: str) -> str | None:
        """Why the top-level downstream class ``cls`` (and its downstream subclasses) never
        reaches upstream code, or None when it may (or ``cls`` is nested)."""
        if "." in cls:
            return None
        if cls not in self._memo:
            self._memo[cls] = self._judge(cls)
        return self._memo[cls]

    def _judge(self, cls: str) -> str | None:
        names = self._subclasses(cls)
        mentions = 0
        for path in self._files_naming(names):
            got = self._tree(path)
            if got is None:
                return None
            tree, parents = got
            for top, node in _walk_by_statement(tree):
                if isinstance(node, ast.Constant) and isinstance(node.value, str):
                    if node.value in names:
                        mentions += 1  # looked up by its bare name: in a downstream module
                    elif "." in node.value and node.value.rsplit(".", 1)[-1] in names:
                        return None  # a dotted path: anything may import it
                    continue
                if isinstance(node, ast.ClassDef) and node.name in names:
                    parents.cover(top)
                    if self._self_passed(node, parents):
                        return None
                    continue
                hit = (isinstance(node, ast.Name) and node.id in names) or (
                    isinstance(node, ast.Attribute) and node.attr in names
                )
                if not hit or not isinstance(node.ctx, ast.Load):  # type: ignore[attr-defined]
                    if hit:
                        return None  # rebound or stored under the class's name
                    continue
                parents.cover(top)
                if self._why_not(node, names, parents):
                    return None
                mentions += 1
        if not mentions:
            return None  # never named in code: it may be built from a name in a config
        listed = ", ".join(f"`{n}`" for n in sorted(names))
        return (
            f"{listed} {'is' if len(names) == 1 else 'are'} built and used only downstream "
            f"({mentions} mention(s): bases, type tests, names, constructions used as "
            "receivers); no upstream code constructs or receives one"
        )
