"""The static symbol index on small upstream-style files, bad input and real torch files."""

from __future__ import annotations

import logging
import random
from dataclasses import fields, replace

import pytest

from instep.pyindex.model import SymbolKind
from instep.pyindex.symbols import (
    ReuseStats,
    _amended,
    decode_source,
    index_against,
    index_source,
    index_text,
)

LOWERING = b'''"""Lowerings (a synthetic file in the style of torch/_inductor/lowering.py)."""
from __future__ import annotations

import torch.utils._pytree as pytree
from torch._inductor import config as inductor_config
from .virtualized import V, ops
from ..utils import sympy_product
from . import ir

aten = torch.ops.aten
FALLBACK_LIST = [aten.uniform, aten.randint]
inplaceable: dict = {aten.index_put.default: "x"}
lowerings[aten.abs] = abs_impl
a, b = 1, 2
threshold: int = 8


@register_lowering(aten.expand, type_promotion_kind=None)
def expand(x, sizes, *, implicit=False):
    """Docstring, ignored by the body hash."""
    if V.graph.sizevars.size_hint(sizes[0]) == 1:  # a comment
        return TensorBox(x)
    return ir.ExpandView.create(x, tuple(sizes))


def outer(x):
    def inner(y):
        return helper(y)

    return inner(x)


make_fallback(aten.uniform, warn=False)
make_fallback(aten.randint)

if inductor_config.triton.cudagraphs:
    make_fallback(aten.cumsum)

if inductor_config.triton.cudagraphs:
    pass


class Base:
    pass


class Kernel(Base, metaclass=Meta):
    """A kernel."""

    overrides = None
    name: str = "k"

    def __init__(self, args):
        super().__init__(args)
        self.args = args

    @property
    def size(self):
        return self._size

    @size.setter
    def size(self, value):
        self._size = value

    class Inner:
        def m(self):
            return Kernel(1)
'''


@pytest.fixture(scope="module")
def idx():
    return index_source("torch/_inductor/lowering.py", LOWERING)


def test_definitions_and_kinds(idx):
    kinds = {q: s.kind for q, s in idx.symbols.items()}
    assert kinds["expand"] is SymbolKind.FUNCTION
    assert kinds["outer"] is SymbolKind.FUNCTION
    assert kinds["outer.inner"] is SymbolKind.FUNCTION
    assert kinds["Kernel"] is SymbolKind.CLASS
    assert kinds["Kernel.__init__"] is SymbolKind.METHOD
    assert kinds["Kernel.size"] is SymbolKind.METHOD
    assert kinds["Kernel.size.setter"] is SymbolKind.METHOD
    assert kinds["Kernel.Inner"] is SymbolKind.CLASS
    assert kinds["Kernel.Inner.m"] is SymbolKind.METHOD
    assert kinds["Kernel.overrides"] is SymbolKind.CLASS_ATTRIBUTE
    assert kinds["Kernel.name"] is SymbolKind.CLASS_ATTRIBUTE
    for name in ("aten", "FALLBACK_LIST", "inplaceable", "a", "b", "threshold"):
        assert kinds[name] is SymbolKind.ASSIGNMENT, name
    assert idx.symbols["a"].value == "1" and idx.symbols["b"].value == "2"
    assert idx.symbols["threshold"].signature == "int"


def test_blocks_have_stable_names(idx):
    blocks = [q for q, s in idx.symbols.items() if s.kind is SymbolKind.BLOCK]
    assert blocks == [
        "lowerings[aten.abs]",
        "make_fallback(aten.uniform)",
        "make_fallback(aten.randint)",
        "<if inductor_config.triton.cudagraphs>",
        "<if inductor_config.triton.cudagraphs>#2",
    ]


def test_signature_lines_decorators_calls(idx):
    exp = idx.symbols["expand"]
    assert exp.signature == "x, sizes, *, implicit=False"
    assert exp.decorators == ("register_lowering(aten.expand, type_promotion_kind=None)",)
    assert (
        exp.line
        == LOWERING.decode().splitlines().index("def expand(x, sizes, *, implicit=False):") + 1
    )
    assert exp.end_line == exp.line + 4
    assert {"V.graph.sizevars.size_hint", "TensorBox", "ir.ExpandView.create", "tuple"} <= (
        exp.calls
    )
    assert [(r.registrar, r.key, r.symbol) for r in exp.registrations] == [
        ("register_lowering", "aten.expand", "expand")
    ]
    assert "super.__init__" in idx.symbols["Kernel.__init__"].calls
    assert "Kernel" in idx.symbols["Kernel.Inner.m"].calls
    assert "helper" in idx.symbols["outer"].calls  # through the nested def
    assert idx.symbols["Kernel"].bases == ("Base", "metaclass=Meta")


def test_overloads_keep_the_implementation_name():
    src = (
        b"from typing import overload\n"
        b"@overload\ndef f(x: int) -> int: ...\n"
        b"@typing.overload\ndef f(x: str) -> str: ...\n"
        b"def f(x):\n    return x\n"
    )
    symbols = index_source("m.py", src).symbols
    assert list(symbols) == ["f@overload", "f@overload#2", "f"]
    assert symbols["f"].signature == "x"


def test_imports_resolved(idx):
    assert idx.imports["V"] == "torch._inductor.virtualized.V"
    assert idx.imports["sympy_product"] == "torch.utils.sympy_product"
    assert idx.imports["ir"] == "torch._inductor.ir"
    assert idx.imports["pytree"] == "torch.utils._pytree"
    assert idx.imports["inductor_config"] == "torch._inductor.config"
    pkg = index_source("torch/_inductor/__init__.py", b"from .config import x\nimport a.b\n")
    assert pkg.imports == {"x": "torch._inductor.config.x", "a": "a"}


def test_registrations_of_the_file(idx):
    regs = {(r.registrar, r.key) for r in idx.registrations}
    assert {
        ("register_lowering", "aten.expand"),
        ("make_fallback", "aten.uniform"),
        ("make_fallback", "aten.randint"),
        ("make_fallback", "aten.cumsum"),  # inside a module-level if
        ("table:FALLBACK_LIST", "aten.uniform"),
        ("table:inplaceable", "aten.index_put"),
        ("table:lowerings", "aten.abs"),
    } <= regs


def test_body_hash_ignores_docstring_comments_formatting_and_decorators():
    one = index_source(
        "m.py",
        b"@dec\ndef f(x):\n    '''doc'''\n    return g(x,\n             1)  # c\n",
    ).symbols["f"]
    two = index_source("m.py", b"def f(x):\n    return g(x, 1)\n").symbols["f"]
    three = index_source("m.py", b"def f(x):\n    return g(x, 2)\n").symbols["f"]
    assert one.body_hash == two.body_hash != three.body_hash
    assert one.decorators == ("dec",) and two.decorators == ()


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"def f(:\n    pass\n", "not valid Python 3"),
        (b'print "hello"\n', "not valid Python 3"),
        (b"x = '\xff\xfe'\n", "not decodable"),
        (b"# -*- coding: klingon -*-\nx = 1\n", "encoding"),
        (b"x = 1\x00\n", "null bytes"),
    ],
)
def test_bad_input_gives_an_error_index_and_a_warning(data, why, caplog, monkeypatch):
    # the CLI, once run in this process, routes 'instep' to its own handler
    monkeypatch.setattr(logging.getLogger("instep"), "propagate", True)
    with caplog.at_level(logging.WARNING):
        idx = index_source("torch/bad.py", data)
    assert idx.symbols == {} and idx.error and why in idx.error
    assert "torch/bad.py" in caplog.text


def test_latin1_cookie_and_empty_file():
    idx = index_source("m.py", b"# -*- coding: latin-1 -*-\nname = '\xe9t\xe9'\n")
    assert idx.error is None and idx.symbols["name"].value == "'\u00e9t\u00e9'"
    empty = index_source("m.py", b"")
    assert empty.error is None and empty.symbols == {}
    crlf = index_source("m.py", b"def f():\r\n    return 1\r\n")
    assert crlf.symbols["f"].end_line == 2


# --- reuse of a related version (the fast old side) -----------------------------------

REF = """import os

X = 1


def top(a):
    return a


class A:
    def m(self):
        return 1

    @cache
    def n(self):
        return 2

    def tail(self):
        return 3


TEMPLATE = '''
def top(a):
    return a
'''
"""

VARIANTS = {
    "unchanged": REF,
    "method body changed": REF.replace("return 2", "return 22"),
    "method grew a line": REF.replace("        return 1\n", "        x = 0\n        return 1\n"),
    "decorator moved onto a reused def": REF.replace(
        "    def m(self):", "    @cache\n    def m(self):"
    ),
    "code appears inside a string": REF.replace("TEMPLATE = '''\n", "TEMPLATE = '''\nX = 1\n"),
    "def inside an if": REF.replace(
        "class A:\n    def m(self):", "class A:\n  if True:\n    def m(self):"
    ).replace("        return 1\n", "        return 1\n  if 1:\n    pass\n", 1),
    "top-level statement grew": REF.replace("X = 1\n", "X = 1\nif X:\n    pass\n"),
    "class renamed": REF.replace("class A:", "class B:"),
    "syntax error": REF.replace("return 3", "return (3"),
    "method removed at the end": REF.replace("\n    def tail(self):\n        return 3\n", "\n"),
}


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_index_against_equals_a_full_parse(name):
    text = VARIANTS[name]
    ref = index_text("m.py", REF)
    stats = ReuseStats()
    fast = index_against("m.py", text, ref, REF, stats)
    full = index_text("m.py", text)
    assert (fast.symbols, fast.imports, fast.registrations, fast.error is None) == (
        full.symbols,
        full.imports,
        full.registrations,
        full.error is None,
    )
    if name == "method body changed":
        assert stats.reused_units >= 2 and not stats.full_parse  # m and tail reused
    if name == "unchanged":
        assert stats.parsed_regions == 0 and stats.reused_chunks == len(ref.chunks)


def _changed_pairs(old_wheel, new_wheel, limit: int) -> list[str]:  # type: ignore[no-untyped-def]
    paths = []
    for rel in new_wheel.python_files("torch/"):
        if rel in old_wheel.names and old_wheel.read(rel) != new_wheel.read(rel):
            paths.append(rel)
    random.Random(7).shuffle(paths)
    keep = ["torch/_inductor/lowering.py", "torch/_inductor/config.py", "torch/_dynamo/codegen.py"]
    return keep + [p for p in paths if p not in keep][:limit]


@pytest.mark.realworld
def test_index_against_equals_a_full_parse_on_real_torch_files(torch_wheels):
    old_wheel, new_wheel = torch_wheels
    reused = 0
    for rel in _changed_pairs(old_wheel, new_wheel, 40):
        old_text = decode_source(old_wheel.read(rel))
        new_text = decode_source(new_wheel.read(rel))
        ref = index_text(rel, new_text)
        stats = ReuseStats()
        fast = index_against(rel, old_text, ref, new_text, stats)
        full = index_text(rel, old_text)
        assert fast.symbols == full.symbols, rel
        assert fast.imports == full.imports, rel
        assert fast.registrations == full.registrations, rel
        reused += stats.reused_chunks + stats.reused_units
    assert reused > 1000  # the fast path was really taken


def test_long_values_are_shown_from_the_source_and_truncated():
    src = '# -*- coding: utf-8 -*-\nX = {\n    "é": [1,\n          2],\n    "b": 3}\n'
    big = "T = [\n" + "".join(f"    aten.op{i},\n" for i in range(200)) + "]\n"
    symbols = index_source("m.py", (src + big).encode()).symbols
    assert symbols["X"].value == '{ "é": [1, 2], "b": 3}'
    assert len(symbols["T"].value) <= 300 and symbols["T"].value.endswith("...")
    other = index_source("m.py", (src + big.replace("op199", "op200")).encode()).symbols
    assert other["T"].body_hash != symbols["T"].body_hash  # the hash sees the whole value


def test_reused_records_are_copied_as_dataclasses_replace_would():
    """index_against shifts and renames the symbols it reuses with ``_amended``, a copy
    of the instance dict; that is ``dataclasses.replace`` only while every field is an
    ``__init__`` argument and nothing runs after ``__init__``."""
    index = index_source(
        "torch/_inductor/x.py", b"@register_lowering(aten.add)\ndef add(x):\n    return x\n"
    )
    sym = index.symbols["add"]
    (reg,) = sym.registrations
    for record, changes in (
        (sym, {"qualname": "add#2", "line": 9, "end_line": 10}),
        (reg, {"symbol": "add#2", "line": 9}),
    ):
        before = record.__dict__.copy()
        assert all(f.init for f in fields(record))
        assert not hasattr(record, "__post_init__")
        copied, replaced = _amended(record, **changes), replace(record, **changes)
        assert type(copied) is type(replaced)
        assert copied == replaced and copied.__dict__ == replaced.__dict__
        assert record.__dict__ == before and record.line != 9  # the original is untouched
