"""Which statements of a downstream file are worth visiting: the lines that name an
imported upstream name, a registrar or a keyword (a prefix-factored regex scan).

:class:`HotLines` keeps the hot line numbers of the file being indexed and adds a name's
lines when a new local alias of upstream is bound. Nothing here records a reference.
"""

from __future__ import annotations

import ast
import bisect
import re
from collections import deque
from collections.abc import Iterable
from functools import lru_cache
from itertools import accumulate, count
from operator import add

from instep.impact.downstream import forks
from instep.pyindex.registrations import item_assignment_tables, registrars

# Words that make a statement worth visiting besides imported names.
ALWAYS = frozenset({"setattr", "super", "torch", "aten", "prims", "aoti_torch_"})


SIMPLE_STMTS = frozenset(
    {
        ast.Expr,
        ast.Assign,
        ast.AugAssign,
        ast.AnnAssign,
        ast.Return,
        ast.Delete,
        ast.Raise,
        ast.Assert,
        ast.Pass,
        ast.Break,
        ast.Continue,
        ast.Global,
        ast.Nonlocal,
    }
)


def _trie(words: Iterable[str]) -> dict:
    trie: dict = {}
    for word in words:
        node = trie
        for ch in word:
            node = node.setdefault(ch, {})
        node[""] = {}
    return trie


def _trie_body(node: dict) -> str:
    branches = [re.escape(ch) + _trie_body(child) for ch, child in sorted(node.items()) if ch]
    if not branches:
        return ""
    body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
    if "" in node:
        return f"(?:{body})?"
    return body


def trie_pattern(words: Iterable[str]) -> str:
    """A regex matching exactly ``words``, factored by common prefix.

    ``re`` tries the branches of ``a|b|c`` one after another at every position; a
    prefix-factored pattern rejects a position on its first character, which makes the
    scan for a file's few hundred imported names several times faster.
    """
    return "(?:" + _trie_body(_trie(words)) + ")"


@lru_cache(maxsize=4096)
def names_pattern(present: tuple[str, ...]) -> re.Pattern:
    """A regex that matches where ``\\b(?:w1|w2|...)\\b`` does (``aoti_torch_``: a
    prefix, no word bounds), for a scan with ``search`` (only where matches start counts).

    Each branch starts with a literal (``t(?<!\\w.)orch\\b`` rather than
    ``\\btorch\\b``; the look-behind, after the first character, is the same word bound),
    so ``re`` skips ahead over the characters no name starts with instead of trying the
    pattern at every position: the scan is about twice as fast. Files share their sets of
    names often, hence the cache.
    """
    trie = _trie(n for n in present if n != "aoti_torch_")
    branches = [
        re.escape(ch)
        # \b before ch: the character before it is a word character iff ch is not one
        + (r"(?<!\w.)" if _WORD.match(ch) else r"(?<=\w.)")
        + _trie_body(child)
        + r"\b"
        for ch, child in sorted(trie.items())
    ]
    if "aoti_torch_" in present:
        branches.append("aoti_torch_")
    return re.compile("|".join(branches))


_WORD = re.compile(r"\w")


TRY_STMTS = frozenset({ast.Try, getattr(ast, "TryStar", ast.Try)})


BLOCK_STMTS = frozenset(
    {
        ast.If,
        ast.For,
        ast.AsyncFor,
        ast.While,
        ast.With,
        ast.AsyncWith,
        ast.Try,
        ast.Match,
        getattr(ast, "TryStar", ast.Try),
    }
)


_STMT_LIKE = (ast.stmt, ast.excepthandler, ast.match_case)


def statements_in_walk_order(tree: ast.AST):
    """The statements of ``tree`` (``tree`` itself first) in ``ast.walk``'s order, without
    visiting an expression: breadth first through the statement lists, ``except``
    handlers and ``case`` s (a level of their own, as in ``ast.walk``), field by field."""
    todo = deque([tree])
    fields = _BLOCK_FIELDS
    while todo:
        node = todo.popleft()
        t = type(node)
        if t not in _NOT_YIELDED:
            yield node
        names = fields.get(t)
        if names is None:
            names = fields[t] = _block_fields(t)
        for name in names:
            value = getattr(node, name, None)
            if type(value) is list and value and isinstance(value[0], _STMT_LIKE):
                todo.extend(value)


# The only fields of a statement (or handler, case) that hold statements, handlers or cases;
# per node type, in ``_fields`` order (the rest hold expressions, names, numbers).
_STMT_LIST_FIELDS = frozenset({"body", "orelse", "finalbody", "handlers", "cases"})
_BLOCK_FIELDS: dict[type, tuple[str, ...]] = {}
_NOT_YIELDED = frozenset({ast.ExceptHandler, ast.match_case})  # levels, not statements


def _block_fields(t: type) -> tuple[str, ...]:
    return tuple(n for n in getattr(t, "_fields", ()) if n in _STMT_LIST_FIELDS)


class HotLines:
    """The hot lines of the file being indexed (state initialised by ``Scope``)."""

    source: str
    names: set[str]
    hot: list[int]
    _offsets: list[int] | None
    setattr_lines: list[int]
    spans: list[tuple[int, int]]
    scopes: list
    walk_statements: list[ast.AST]

    def is_up(self, dotted) -> bool:  # defined by Scope
        raise NotImplementedError

    def abs_module(self, node: ast.ImportFrom) -> str:  # defined by Scope
        raise NotImplementedError

    def prepare(self, tree: ast.Module, source: str) -> None:
        """Find the lines worth visiting: those naming an imported name or a keyword."""
        self.source = source
        names = set(ALWAYS)
        names.update(registrars())
        names.update(item_assignment_tables())
        # every statement, in ast.walk's order: kept for the other readers of the file
        self.walk_statements = list(statements_in_walk_order(tree))
        for node in self.walk_statements:
            if isinstance(node, ast.Import):
                for a in node.names:
                    if self.is_up(a.name):
                        names.add(a.asname or a.name.split(".", 1)[0])
            elif isinstance(node, ast.ImportFrom) and self.is_up(self.abs_module(node)):
                names.update(a.asname or a.name for a in node.names)
        self.names = names
        self.norm = forks.normalised_lines(source)
        self.grams = forks.line_grams(self.norm)
        self.hot = self._lines_of(names)
        self.setattr_lines = self._lines_of({"setattr"}) if "setattr" in source else []

    def _lines_of(self, names: Iterable[str], start: int = 1, end: int = 0) -> list[int]:
        """Sorted numbers of the lines in [start, end] naming one of ``names`` (a word)."""
        src = self.source
        lo = self.offset(start)
        hi = self.offset(end + 1) if end > 0 else len(src)
        offs = self._offsets
        assert offs is not None
        present = sorted(n for n in names if n in src)
        if not present:
            return []
        # one scan for all names (a scan per name costs names x size)
        pat = names_pattern(tuple(present))
        # one search per hot line: after a match, go on at the next line's start
        lines: list[int] = []
        search = pat.search
        m = search(src, lo, hi)
        while m is not None:
            line = bisect.bisect_right(offs, m.start())
            lines.append(line)
            m = search(src, offs[line], hi)  # offs[line]: where line + 1 starts
        return lines

    def offset(self, line: int) -> int:
        """Character offset of the start of a 1-based line."""
        if self._offsets is None:  # line k + 1 starts after k lines and their k newlines
            lengths = accumulate(map(len, self.source.split("\n")), initial=0)
            self._offsets = list(map(add, lengths, count()))
        if line <= 1:
            return 0
        return self._offsets[min(line - 1, len(self._offsets) - 1)]

    def add_name(self, name: str) -> None:
        """A name newly bound to an upstream chain: its lines in the scope become hot."""
        scope = self.scopes[-1][0]
        if name in self.names or scope.get(f"<hot>{name}", "") is None:
            return
        if self.spans:
            start, end = self.spans[-1]
            scope[f"<hot>{name}"] = None
        else:
            self.names.add(name)
            start, end = 1, 0
        extra = self._lines_of([name], start, end)
        if extra:
            self.hot = sorted(set(self.hot).union(extra))

    @staticmethod
    def _touches(lines: list[int], start: int, end: int) -> bool:
        i = bisect.bisect_left(lines, start)
        return i < len(lines) and lines[i] <= end
