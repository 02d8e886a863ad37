"""Where a C++ declaration sits in a release's installed headers (``torch/include/**``):
the header, and the line, that declare a demangled function or variable, found by its
name after (or inside) the namespaces and classes of its scope.

Asked only for the symbols a report names (``join/linked_symbols``, ``join/native_units``);
reads each header of :class:`~instep.impact.upstream.sources.built.Headers` once, when first
needed. A text search, not a C++ parser: a declaration spelled through a macro or split
oddly across lines is not found, and the report then says "declared in no header found".
"""

from __future__ import annotations

import re

from instep.elfindex.demangle import Declaration

_ABI_TAG = re.compile(r"\[abi:\w+\]")


class HeaderSearch:
    """Where a C++ declaration sits in a release's installed headers: the header that
    names the function after (or inside) its scope's namespaces and classes. Headers are
    read when first needed, and asked only for the symbols a report names."""

    def __init__(self, headers) -> None:
        self.headers = headers
        self._texts: dict[str, str] = {}
        self._having: dict[str, list[str]] = {}  # word -> headers whose text holds it

    def _text(self, path: str) -> str:
        text = self._texts.get(path)
        if text is None:
            text = self._texts[path] = self.headers.read(path)
        return text

    def _with(self, word: str) -> list[str]:
        found = self._having.get(word)
        if found is None:
            found = self._having[word] = [p for p in self.headers.paths() if word in self._text(p)]
        return found

    def find(self, decl: Declaration, only: str | None = None) -> tuple[str, int] | None:
        """(header path, line) of ``decl``'s declaration; with ``only``, in that header."""
        name = _ABI_TAG.sub("", decl.name).split("<", 1)[0]
        if not name or not (_word(name) or name.startswith("operator")):
            return None
        scope = [
            _ABI_TAG.sub("", p).split("<", 1)[0]
            for p in _split_scope(decl.scope)
            if p and not p.startswith("(")
        ]
        words = [w for w in (*scope, name) if _word(w)]
        if not words:
            return None
        longest = max(words, key=len)
        paths = [only] if only is not None else self._with(longest)
        call = decl.parameters is not None
        pattern = re.compile(
            (re.escape(name) + r"\s*\(") if call else (r"\b" + re.escape(name) + r"\b")
        )
        best: tuple[int, int, str, int] | None = None
        for path in paths:
            text = self._text(path)
            if any(w not in text for w in words):
                continue
            found = _declaration_line(text, scope, pattern)
            if found is None:
                continue
            line, matched = found
            rank = (-matched, path.count("/"), path, line)
            if best is None or rank < best:
                best = rank
        if best is None:
            return None
        return best[2], best[3]


def _word(text: str) -> bool:
    return text.replace("_", "a").isalnum()


def _split_scope(scope: str) -> list[str]:
    parts, depth, cur = [], 0, []
    i = 0
    while i < len(scope):
        ch = scope[i]
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth -= 1
        if depth == 0 and scope.startswith("::", i):
            parts.append("".join(cur))
            cur = []
            i += 2
            continue
        cur.append(ch)
        i += 1
    parts.append("".join(cur))
    return parts


def _declaration_line(text: str, scope: list[str], pattern: re.Pattern) -> tuple[int, int] | None:
    """(line, scope parts found before it) of the first match of ``pattern`` after the
    innermost scope part the header opens as a namespace, class, struct or union."""
    start = 0
    matched = 0
    for part in scope:
        opener = re.compile(
            r"\b(?:namespace|class|struct|union)\b[^\n;{}()]*?\b" + re.escape(part) + r"\b"
        )
        m = opener.search(text, start)
        if m is None:
            continue
        start = m.start()
        matched += 1
    m = pattern.search(text, start)
    if m is None:
        return None
    return text.count("\n", 0, m.start()) + 1, matched
