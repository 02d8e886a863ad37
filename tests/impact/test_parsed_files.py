"""The shared parse store (pyindex/parsed_files.py) and its lines (pyindex/source_lines.py):
each file parsed once, the same tree a direct parse gives, read errors not kept; the lines
exactly what ``str.splitlines`` gives."""

from __future__ import annotations

import ast
import random

import pytest

from instep.pyindex.parsed_files import ParsedFiles
from instep.pyindex.source_lines import SourceLines

FILES = {
    "a.py": b"import torch\n\nclass A(torch.nn.Module):\n    def f(self):\n        return 1\n",
    "latin.py": "# -*- coding: latin-1 -*-\nx = 'caf\xe9'\n".encode("latin-1"),
    "bom.py": b"\xef\xbb\xbfx = 1\n",
    "bad.py": b"def (:\n",
    "empty.py": b"",
    "accent.py": "x = 'café'\n".encode(),
}


class Reader:
    """A real reader over a dict, counting reads; a missing path raises as a snapshot does."""

    def __init__(self) -> None:
        self.reads: list[str] = []

    def __call__(self, path: str) -> bytes:
        self.reads.append(path)
        return FILES[path]


def test_each_file_is_parsed_once_and_gives_the_direct_parse() -> None:
    store = ParsedFiles(Reader())
    first = store.tree("a.py")
    assert store.tree("a.py") is first and store.tree_of_bytes("a.py") is first
    assert store.parsed == 1
    assert ast.dump(first) == ast.dump(ast.parse(FILES["a.py"]))


def test_bytes_not_plain_utf8_are_parsed_as_bytes() -> None:
    store = ParsedFiles(Reader())
    for path in ("latin.py", "bom.py"):
        got = store.tree_of_bytes(path)
        assert ast.dump(got) == ast.dump(ast.parse(FILES[path])), path
    # the decoded tree keeps the replacement character, the bytes' tree the real letter
    text_tree = store.tree("latin.py")
    assert "\ufffd" in ast.dump(text_tree) and "é" in ast.dump(store.tree_of_bytes("latin.py"))
    assert ast.dump(store.tree_of_bytes("accent.py")) == ast.dump(ast.parse(FILES["accent.py"]))
    assert store.tree_of_bytes("accent.py") is store.tree("accent.py")


def test_no_python_and_empty_give_none_and_read_errors_are_not_kept() -> None:
    reader = Reader()
    store = ParsedFiles(reader)
    assert store.tree("bad.py") is None and store.tree("empty.py") is None
    for _ in range(2):
        with pytest.raises(KeyError):
            store.tree("missing.py")
    assert reader.reads.count("missing.py") == 2
    assert list(store.lines("a.py")) == FILES["a.py"].decode().splitlines()


def test_source_lines_are_splitlines() -> None:
    breaks = ["\n", "\r\n", "\r", "\v", "\f", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]
    rng = random.Random(7)
    texts = ["", "\n", "a", "a\n", "a\r\n", "\r\n\r\n", "a\r\rb"]
    texts += ["".join(rng.choice(["ab", "é", *breaks]) for _ in range(40)) for _ in range(500)]
    for text in texts:
        lines, want = SourceLines(text), text.splitlines()
        assert list(lines) == want and len(lines) == len(want), repr(text)
        assert lines[1:4] == want[1:4] and lines[-2:] == want[-2:], repr(text)
        assert [lines[k] for k in range(-len(want), len(want))] == want + want, repr(text)
