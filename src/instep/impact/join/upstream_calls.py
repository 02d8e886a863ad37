"""Call sites of names in the *new* upstream, found on demand: its ``.py`` files read once,
parsed when wanted, and visited only where a name is mentioned.

:class:`UpstreamCalls` holds every ``.py`` file of the new upstream (``texts``), the
syntax trees of the latest files asked for (``tree``: within :data:`TREE_BUDGET` bytes of
source, the least recently used dropped and parsed again if wanted; ``keep=False`` for a
pass over many files that holds one tree at a time) and lines, and answers
:meth:`UpstreamCalls.sites`: each call ``name(...)`` / ``x.name(...)`` as a
:class:`CallSite` (its receiver as written, its call shape, the enclosing class and def,
and a condition around it the backend never meets: ``join/call_conditions.py``). A text
filter comes first (``needle_lines``, ``holds_needle``): a file, def or statement that
does not name the callee is never visited. The breaking-path search
(``join/breaking_path.py``), the hook-name pass and the fork-gap pass read it. Nothing
here follows a call to its target or judges it.
"""

from __future__ import annotations

import ast
import re
from bisect import bisect_left
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from instep.impact.join import call_conditions
from instep.impact.upstream.sources.snapshot import read_texts
from instep.pyindex.model import SymbolKind, module_of
from instep.pyindex.signatures import call_shape

SELF_CONSTRUCTION = "<self>"  # cls(...), type(self)(...), self.__class__(...)
# Bytes of source whose syntax trees are kept: a tree takes 30-65 times its source in
# memory (torch/_inductor's files), so keeping every tree visited grew the join by
# hundreds of MiB; beyond this the least recently used tree is dropped and parsed again
# if wanted (docs/impact.md, "Memory of the join").
TREE_BUDGET = 400_000


@dataclass(frozen=True)
class CallSite:
    """One call ``name(...)`` / ``recv.name(...)`` in the new upstream."""

    path: str
    line: int
    name: str  # the called name, or SELF_CONSTRUCTION
    receiver: str | None  # unparsed callee object ('self', 'ir.Reduction'); None: a bare name
    shape: str  # pyindex.signatures.call_shape
    keywords: tuple[str, ...]
    cls: str | None  # qualname of the innermost enclosing class
    caller: str | None  # qualname of the enclosing def at module or class level
    nested: bool  # inside a def nested in ``caller`` (a closure may outlive a replacement)
    guard: str | None = None  # a condition the backend never meets around it (call_conditions)

    @property
    def at(self) -> str:
        return f"{self.path}:{self.line}"

    @property
    def module(self) -> str:
        return module_of(self.path)


class _Sites(call_conditions.GuardedVisitor):
    def __init__(
        self,
        path: str,
        names: frozenset[str],
        lines: list[str] | None = None,
        conditions: dict[tuple[int, int], dict[str, str]] | None = None,
        text: bytes | None = None,
    ) -> None:
        super().__init__()
        self.path = path
        self.names = names
        # the file's defs' conditional names by (line, column), shared by every visit
        self.conditions = {} if conditions is None else conditions
        # with the file's lines, a def or class whose text names none of ``names`` is skipped
        self.lines = None if lines is None or SELF_CONSTRUCTION in names else lines
        # with its bytes too, any statement whose lines (the parser's) name none is skipped
        self.hits = needle_lines(text, tuple(names)) if self.lines and text else None
        self.stack: list[tuple[str, str]] = []  # ('class'|'def', name)
        self.out: dict[str, list[CallSite]] = {n: [] for n in names}
        self.conditional: list[dict[str, str]] = [{}]

    def unmet(self, test: ast.expr) -> str | None:
        return call_conditions.never_met(test, self.conditional[-1])

    def visit(self, node: ast.AST) -> None:
        if (
            self.hits is not None
            and isinstance(node, ast.stmt)
            and not holds_needle(self.hits, node)
        ):
            return  # no call of the names in it: nothing to record, no state left changed
        super().visit(node)

    def _names_none(self, node: ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
        if self.lines is None or self.hits is not None:
            return False  # without lines nothing is skipped; with hits, visit() skipped it
        start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
        text = "\n".join(self.lines[start - 1 : node.end_lineno])
        return not any(n in text for n in self.names)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        if self._names_none(node):
            return
        self.stack.append(("class", node.name))
        self.generic_visit(node)
        self.stack.pop()

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        if self._names_none(node):
            return
        self.stack.append(("def", node.name))
        at = (node.lineno, node.col_offset)
        if at not in self.conditions:
            self.conditions[at] = call_conditions.conditional_names(node)
        self.conditional.append({**self.conditional[-1], **self.conditions[at]})
        self.generic_visit(node)
        self.conditional.pop()
        self.stack.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def _where(self) -> tuple[str | None, str | None, bool]:
        cls = caller = None
        nested = False
        names: list[str] = []
        for kind, name in self.stack:
            if caller is not None:
                nested = True
                break
            names.append(name)
            if kind == "class":
                cls = ".".join(names)
            else:
                caller = ".".join(names)
        return cls, caller, nested

    def visit_Call(self, node: ast.Call) -> None:
        f = node.func
        name = receiver = None
        if isinstance(f, ast.Name):
            name = SELF_CONSTRUCTION if f.id == "cls" else f.id
        elif isinstance(f, ast.Attribute):
            if f.attr == "__class__":
                name = SELF_CONSTRUCTION
            else:
                name, receiver = f.attr, ast.unparse(f.value)
        elif (
            isinstance(f, ast.Call)
            and isinstance(f.func, ast.Name)
            and f.func.id == "type"
            and len(f.args) == 1
        ):
            name = SELF_CONSTRUCTION
        if name in self.names:
            cls, caller, nested = self._where()
            self.out[name].append(
                CallSite(
                    self.path,
                    node.lineno,
                    name,
                    receiver,
                    call_shape(node),
                    tuple(k.arg for k in node.keywords if k.arg is not None),
                    cls,
                    caller,
                    nested,
                    self.guards[-1] if self.guards else None,
                )
            )
        self.generic_visit(node)


def needle_lines(text: bytes, needles: tuple[str, ...]) -> list[int]:
    """The numbers of the lines of ``text`` (a file's bytes) holding one of ``needles``,
    sorted (a needle never spans lines). Lines as the parser counts them: a form feed or
    a U+2028 in a comment breaks no line here (``str.splitlines`` breaks there)."""
    if b"\r" in text:
        text = text.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    hits: set[int] = set()
    for needle in (n.encode() for n in needles):
        at, line, counted = text.find(needle), 1, 0
        while at != -1:
            line += text.count(b"\n", counted, at)
            counted = at
            hits.add(line)
            end = text.find(b"\n", at)  # the next needle on a later line
            at = text.find(needle, end) if end != -1 else -1
    return sorted(hits)


def holds_needle(hits: list[int], stmt: ast.stmt) -> bool:
    """Does a line of ``stmt`` (a def's or class's decorators included) hold a needle?
    ``hits``: :func:`needle_lines`."""
    decorators = getattr(stmt, "decorator_list", None)
    start = min([stmt.lineno, *(d.lineno for d in decorators)]) if decorators else stmt.lineno
    k = bisect_left(hits, start)
    return k < len(hits) and hits[k] <= (stmt.end_lineno or stmt.lineno)


def _parse(data: bytes | None, path: str) -> ast.Module | None:
    """The syntax tree of a file's bytes; None when absent or not Python."""
    if data is None:
        return None
    try:
        return ast.parse(data.decode("utf-8", "replace"), path)
    except (SyntaxError, ValueError):
        return None


class UpstreamCalls:
    """Call sites of names in the new upstream, found on demand and memoised."""

    def __init__(
        self,
        paths: Iterable[str],
        read: Callable[[str], bytes | None],
        budget: int = TREE_BUDGET,
    ) -> None:
        self.paths = [p for p in paths if p.endswith(".py")]
        self.read = read
        self._texts: dict[str, bytes] | None = None
        # the trees kept, least recently used first, of at most ``budget`` bytes of source
        self._trees: OrderedDict[str, ast.Module | None] = OrderedDict()
        self._budget = budget
        self._kept = 0  # bytes of source behind the trees kept
        self.parses = 0  # how many files were parsed (a file dropped and wanted again: twice)
        self._memo: dict[tuple[str, str | None, tuple[str, ...]], list[CallSite]] = {}
        self._lines: dict[str, list[str]] = {}
        self._conditions: dict[str, dict[tuple[int, int], dict[str, str]]] = {}

    def texts(self) -> dict[str, bytes]:
        """Every ``.py`` file of the new upstream, path -> bytes (read once)."""
        return self._all_texts()

    def tree(self, path: str, keep: bool = True) -> ast.Module | None:
        """The file's syntax tree (parsed once; None when it does not parse). With
        ``keep=False`` a tree not parsed yet is parsed for the caller alone and not kept:
        a pass over many files then holds one tree at a time."""
        if keep or path in self._trees:
            return self._tree(path)
        return self._parse(path)

    def keep(self, path: str, tree: ast.Module, lines: list[str]) -> None:
        """Keep a tree (and lines) got with ``keep=False`` after all: its caller found that
        a later pass will read that file again (not parsed again while it is kept)."""
        if path not in self._trees:
            self._store(path, tree)
        self._lines.setdefault(path, lines)

    def lines(self, path: str, keep: bool = True) -> list[str]:
        """The file's text as lines (empty when it cannot be read); ``keep`` as in
        :meth:`tree`."""
        if path in self._lines:
            return self._lines[path]
        lines = self._all_texts().get(path, b"").decode("utf-8", "replace").splitlines()
        if keep:
            self._lines[path] = lines
        return lines

    def prefetch(self, names: Iterable[str]) -> None:
        """Find the calls of many names at once: each file that mentions one of them is
        visited once, for the names it mentions (what :meth:`sites` then answers)."""
        todo = {n for n in names if (n, None, ()) not in self._memo and n != SELF_CONSTRUCTION}
        if not todo:
            return
        found: dict[str, list[CallSite]] = {n: [] for n in todo}
        raws = [(n, n.encode()) for n in todo]
        for p, t in self._all_texts().items():
            here = frozenset(n for n, raw in raws if raw in t)
            if not here:
                continue
            tree = self._tree(p)
            if tree is None:
                continue
            conditions = self._conditions.setdefault(p, {})
            visitor = _Sites(p, here, self.lines(p), conditions, t)
            visitor.visit(tree)
            for n in here:
                found[n].extend(visitor.out[n])
        for n, out in found.items():
            self._memo[(n, None, ())] = out

    def _all_texts(self) -> dict[str, bytes]:
        if self._texts is None:
            self._texts = read_texts(self.paths, self.read)
        return self._texts

    def _tree(self, path: str) -> ast.Module | None:
        if path in self._trees:
            self._trees.move_to_end(path)
            return self._trees[path]
        tree = self._parse(path)
        self._store(path, tree)
        return tree

    def _parse(self, path: str) -> ast.Module | None:
        self.parses += 1
        return _parse(self._all_texts().get(path), path)

    def _store(self, path: str, tree: ast.Module | None) -> None:
        """Keep ``tree`` as the most recently used; drop the least recently used trees
        beyond the budget (the newest is kept whatever its size)."""
        self._trees[path] = tree
        self._kept += len(self._all_texts().get(path, b""))
        while self._kept > self._budget and len(self._trees) > 1:
            old, _ = self._trees.popitem(last=False)
            self._kept -= len(self._all_texts().get(old, b""))

    def definers(self, name: str, resolver) -> set[tuple[str, str]] | None:
        """The (module, class) pairs whose body defines a method ``name`` in the new
        upstream; None when a module-level function or a class attribute of that name
        exists too (a call of the name could then go there)."""
        key = ("<definers>", name, ())
        if key not in self._memo:
            needle = re.compile(
                rb"\b(def\s+"
                + re.escape(name.encode())
                + rb"\s*\(|"
                + re.escape(name.encode())
                + rb"\s*=)"
            )
            raw = name.encode()
            found: set[tuple[str, str]] | None = set()
            for p, t in self._all_texts().items():
                if raw not in t or not needle.search(t):
                    continue
                idx = resolver.index(module_of(p))
                for q, sym in idx.symbols.items() if idx is not None else ():
                    if q.rsplit(".", 1)[-1] != name:
                        continue
                    if sym.kind is SymbolKind.METHOD:
                        found.add((module_of(p), q.rsplit(".", 1)[0]))  # type: ignore[union-attr]
                    elif sym.kind in (SymbolKind.FUNCTION, SymbolKind.CLASS_ATTRIBUTE):
                        found = None
                        break
                if found is None:
                    break
            self._memo[key] = found  # type: ignore[assignment]
        return self._memo[key]  # type: ignore[return-value]

    def sites(
        self, name: str, only_in: str | None = None, keywords: tuple[str, ...] = ()
    ) -> list[CallSite]:
        """Calls of ``name`` (``name(...)``, ``x.name(...)``), or of :data:`SELF_CONSTRUCTION`
        in the file ``only_in``; with ``keywords``, only in files that pass one of them
        (``kw=``): a keyword-only parameter can be passed no other way."""
        key = (name, only_in, keywords)
        if key not in self._memo:
            if only_in is not None:
                paths = [only_in]
            else:
                needle = re.compile(rb"\b" + re.escape(name.encode()) + rb"\s*\(")
                kw = re.compile(rb"\b(" + b"|".join(k.encode() for k in keywords) + rb")\s*=")
                raw, kws = name.encode(), [k.encode() for k in keywords]
                paths = [  # plain substring tests first: they cost little on every file
                    p
                    for p, t in self._all_texts().items()
                    if raw in t
                    and (not kws or any(k in t for k in kws))
                    and needle.search(t)
                    and (not kws or kw.search(t))
                ]
            out: list[CallSite] = []
            for p in paths:
                tree = self._tree(p)
                if tree is not None:
                    conditions = self._conditions.setdefault(p, {})
                    text = self._all_texts().get(p)
                    visitor = _Sites(p, frozenset({name}), self.lines(p), conditions, text)
                    visitor.visit(tree)
                    out.extend(visitor.out[name])
            self._memo[key] = out
        return self._memo[key]
