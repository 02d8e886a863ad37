"""The shortcuts of the call scans (hook names' ``_Reads``, breaking paths' ``_Sites``)
find what a full visit finds: the statements they skip (no line names a wanted call) and
the files hook names does not parse (no attribute read of the name) hold no call of the
names, and the conditions and guards of the calls found are the same. The lines they skip
by are the parser's, also where ``str.splitlines`` breaks more."""

from __future__ import annotations

import ast
import collections
import inspect
import pathlib
import textwrap
from pathlib import Path

import pytest

from instep.impact.join import backend_handles
from instep.impact.join.hook_reads import ATTRIBUTE, reads_in_tree, shortest
from instep.impact.join.upstream_calls import _Sites, needle_lines

# calls under early exits, decorators naming the call, calls split over lines, a comment
# between the dot and the name, a backslash continuation, a nested def and class
TRICKY = textwrap.dedent(
    """
    import functools

    @functools.partial(register, key=obj.flush)
    def decorated():
        return 1

    class Scheduler:
        def run(self, node):
            if not node.ready:
                return None
            self.backend.flush(
                node,
            )
            if node.big:
                (self.  # the backend
                    flush)()
            x = self.\\
                flush()
            def inner():
                class Local:
                    def go(self):
                        return self.flush() if ok else self.other()
            return x and self.flush()

    def unrelated(a, b):
        total = 0
        for i in range(a):
            total += b.sum(i) * 2
        return total

    if CONDITION:
        obj.flush()

    def guarded(device):
        if device.type == "cuda":
            helper = make()
        if helper is not None:
            obj.flush()
    """
)


def _stdlib_sources() -> list[tuple[str, str]]:
    out = []
    for module in (ast, inspect, collections, textwrap, pathlib):
        path = inspect.getsourcefile(module)
        assert path is not None
        out.append((path, Path(path).read_text(encoding="utf-8")))
    return out


def _common_call_names(tree: ast.Module, k: int, plain: bool = False) -> frozenset[str]:
    """The ``k`` names most called as ``x.name(…)`` (with ``plain``, as ``name(…)`` too)."""
    counts = collections.Counter(
        n.func.attr if isinstance(n.func, ast.Attribute) else n.func.id
        for n in ast.walk(tree)
        if isinstance(n, ast.Call)
        and (isinstance(n.func, ast.Attribute) or (plain and isinstance(n.func, ast.Name)))
    )
    return frozenset(name for name, _ in counts.most_common(k))


@pytest.mark.parametrize("k", [1, 3, 12])
def test_skipping_statements_without_the_names_finds_the_same_calls_and_conditions(k):
    for path, source in [("tricky.py", TRICKY), *_stdlib_sources()]:
        tree = ast.parse(source)
        names = _common_call_names(tree, k) | {"flush"}
        lines = source.splitlines()
        text = source.encode()
        assert needle_lines(text, tuple(names)) is not None  # the shortcut is taken
        full = reads_in_tree(path, tree, names, None, True)  # no lines: every node visited
        assert full, path
        assert reads_in_tree(path, tree, names, lines, True, text) == full, path


@pytest.mark.parametrize("k", [1, 3, 12])
def test_call_sites_of_a_visit_skipping_statements_are_those_of_a_full_visit(k):
    for path, source in [("tricky.py", TRICKY), *_stdlib_sources()]:
        tree = ast.parse(source)
        names = _common_call_names(tree, k, plain=True) | {"flush"}
        full = _Sites(path, names)  # no lines: every node visited
        full.visit(tree)
        fast = _Sites(path, names, source.splitlines(), {}, source.encode())
        fast.visit(tree)
        assert fast.hits is not None  # the shortcut is taken
        assert any(full.out.values()), path
        assert fast.out == full.out, path


def test_the_tricky_source_has_every_call_of_the_name_with_its_condition():
    tree = ast.parse(TRICKY)
    lines, text = TRICKY.splitlines(), TRICKY.encode()
    reads = reads_in_tree("t.py", tree, frozenset({"flush"}), lines, True, text)
    got = [(r.at, r.condition) for _, r in reads]
    assert got == [
        ("t.py:12", "if node.ready (line 10 returns otherwise)"),
        ("t.py:16", "if node.big"),
        ("t.py:18", "if node.ready (line 10 returns otherwise)"),
        ("t.py:23", "if ok"),
        ("t.py:24", "if x"),
        ("t.py:33", "if CONDITION"),
        ("t.py:39", "if helper is not None"),
    ]  # the decorator's `obj.flush` is read, not called


def test_a_call_guarded_by_a_device_test_keeps_its_guard_when_statements_are_skipped():
    tree = ast.parse(TRICKY)
    sites = _Sites("t.py", frozenset({"flush"}), TRICKY.splitlines(), {}, TRICKY.encode())
    sites.visit(tree)
    assert sites.hits is not None
    guarded = [(c.line, c.guard) for c in sites.out["flush"] if c.guard]
    why = "`device.type == 'cuda'` (a device type the backend never has), through `helper`"
    assert guarded == [(39, why)]


@pytest.mark.parametrize("brk", ["\x0c", "\x0b", "\x1c", "\x85", "\u2028"])
def test_a_line_break_only_splitlines_sees_moves_no_call_out_of_its_def(brk):
    source = f"x = 1  # a{brk}b\ndef f():\n    y = 2\n    return obj.flush()\n"
    lines = source.splitlines()
    assert len(lines) == 5  # one line more than the parser's four
    text = source.encode()
    assert needle_lines(text, ("flush",)) == [4]
    reads = reads_in_tree("f.py", ast.parse(source), frozenset({"flush"}), lines, True, text)
    assert [r.at for _, r in reads] == ["f.py:4"]


def test_needle_lines_are_the_lines_that_hold_a_needle():
    text = b"a.flush()\r\n\nb = flushy + c.sync()\nflush"
    assert needle_lines(text, ("flush", "sync")) == [1, 3, 4]
    assert needle_lines(text, ("absent",)) == []
    assert needle_lines(b"a\rb.flush()\r\nflush", ("flush",)) == [2, 3]  # a lone CR breaks


def test_every_attribute_call_of_a_real_file_is_an_attribute_read_in_its_text():
    for path, source in [("tricky.py", TRICKY), *_stdlib_sources()]:
        called = {
            n.func.attr
            for n in ast.walk(ast.parse(source))
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
        }
        read = {m.decode() for m in ATTRIBUTE.findall(source.encode())}
        assert called <= read, (path, called - read)
    # a name that only appears otherwise is not read as an attribute
    assert b"flush" not in ATTRIBUTE.findall(b"def flush():\n    flush = 1\n")


def test_the_handle_needles_that_hold_another_are_dropped():
    handles = {h.split("(", 1)[0].encode() for h in backend_handles.load_handles()}
    short = shortest(handles)
    assert set(short) < handles
    texts = [h + b" x" for h in handles] + [b"nothing here", b"V.graph.other"]
    for text in texts:
        assert any(h in text for h in handles) == any(h in text for h in short)
