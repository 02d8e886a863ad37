"""One snapshot's Python files, each parsed at most once per process: the shared trees.

:class:`ParsedFiles` wraps a reader (``path -> bytes``) and keeps, per path, the file's
syntax tree (:meth:`ParsedFiles.tree`) and its decoded lines (:meth:`ParsedFiles.lines`),
made the first time any user asks. Several passes of the impact join used to keep their
own memo of the same downstream files and parse each again; they now read one store
(``JoinInputs.down_trees``). A tree is the parse of the text decoded as UTF-8 with
replacement, as those passes did; :meth:`ParsedFiles.tree_of_bytes` serves a pass that
parsed the raw bytes (PEP 263 coding cookie, BOM): the shared tree when the bytes are
plain UTF-8 (the two parses then agree), else a parse of the bytes of its own.

A read error is not kept (the next caller meets it again, as a direct read would) and is
raised to the caller; a file that does not parse gives None. Callers read the trees and
never change them. Nothing here knows what a file is for.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable

from instep.pyindex.source_lines import SourceLines

_PARSE_ERRORS = (SyntaxError, ValueError, RecursionError, MemoryError)
# PEP 263: a coding cookie in a comment on the first or second line
_COOKIE = re.compile(rb"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)", re.MULTILINE)
_UTF8_NAMES = frozenset({b"utf-8", b"utf8", b"utf_8"})


def _plain_utf8(data: bytes) -> bool:
    """Does ``ast.parse(data)`` read the same text as ``data.decode('utf-8')``? Yes when
    the bytes decode strictly, carry no BOM and no cookie naming another encoding."""
    if data.startswith(b"\xef\xbb\xbf"):
        return False
    head = b"\n".join(data.split(b"\n", 2)[:2])
    cookie = _COOKIE.search(head)
    if cookie is not None and cookie.group(1).lower().replace(b"_", b"-") not in _UTF8_NAMES:
        return False
    if data.isascii():
        return True
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


class ParsedFiles:
    """Trees and lines of a snapshot's files, each made once (see the module's docstring)."""

    def __init__(self, read: Callable[[str], bytes | None]) -> None:
        self.read = read
        self._trees: dict[str, ast.Module | None] = {}
        self._byte_trees: dict[str, ast.Module | None] = {}  # files not plain UTF-8
        self._plain: dict[str, bool] = {}  # path -> the bytes are plain UTF-8
        self._lines: dict[str, SourceLines] = {}
        self.parsed = 0  # how many parses this store made (stats, tests)

    def _parse(self, source: str | bytes, path: str) -> ast.Module | None:
        self.parsed += 1
        try:
            return ast.parse(source, path)
        except _PARSE_ERRORS:
            return None

    def tree(self, path: str) -> ast.Module | None:
        """The tree of the file's text decoded as UTF-8 with replacement; None when the
        file is empty, absent (the reader gave None) or not Python."""
        if path not in self._trees:
            data = self.read(path)
            text = data.decode("utf-8", "replace") if data else ""
            self._trees[path] = self._parse(text, path) if text else None
        return self._trees[path]

    def tree_of_bytes(self, path: str) -> ast.Module | None:
        """What ``ast.parse(bytes)`` gives for the file (None: empty, absent, not Python)."""
        if path in self._byte_trees:
            return self._byte_trees[path]
        if path not in self._plain:
            data = self.read(path)
            self._plain[path] = bool(data) and _plain_utf8(data)
            if not self._plain[path]:
                self._byte_trees[path] = self._parse(data, path) if data else None
                return self._byte_trees[path]
        return self.tree(path)  # plain UTF-8: the same text either way, the shared tree

    def lines(self, path: str) -> SourceLines:
        """The file's decoded text split as ``str.splitlines`` does (empty when absent)."""
        if path not in self._lines:
            data = self.read(path)
            self._lines[path] = SourceLines(data.decode("utf-8", "replace") if data else "")
        return self._lines[path]
