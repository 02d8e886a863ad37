"""Rewrites that change nothing observable are no body change (issue #31, noise).

``assert c, msg`` <-> ``if not c: raise AssertionError(msg)`` (torch 2.14 rewrote 112
functions so), ``typing.cast(T, x)`` -> ``x``, an ``if TYPE_CHECKING:`` block, a local's
annotation, renamed locals, an assertion's message (added, reworded, moved into ``raise
AssertionError(...)``), comments, docstrings and formatting: the body hash sees through
them (``pyindex/neutral.py``), so the downstream place that calls the function gets no
coupling. The same function with a changed assertion condition, a changed constant or a
renamed attribute stays a body change, Test.
"""

from __future__ import annotations

import pytest

from instep.pyindex.symbols import index_text

from .gitrepo import impact_of_commit

V1 = """\
def check_size(sizes, limit):
    assert len(sizes) <= limit, "too many"
    total = 0
    for s in sizes:
        total += s
    return total


def reworded(sizes, limit):
    assert len(sizes) <= limit, "too many"
    return sizes


def condition(sizes, limit):
    assert len(sizes) <= limit
    return sizes


def constant(sizes):
    return len(sizes) + 1


def attribute(node):
    return node.meta
"""

V2 = """\
import typing
from typing import TYPE_CHECKING


def check_size(sizes, limit):
    \"\"\"Sum of sizes, at most ``limit`` of them.\"\"\"
    if TYPE_CHECKING:
        from torch.types import Size
    if not len(sizes) <= limit:
        raise AssertionError("too many")  # same check, same message
    acc: int = 0
    for size in sizes:
        acc += size
    return typing.cast(int, acc)


def reworded(sizes, limit):
    if not len(sizes) <= limit:
        raise AssertionError(f"too many: {len(sizes)} > {limit}")
    return sizes


def condition(sizes, limit):
    assert len(sizes) < limit, "too many"
    return sizes


def constant(sizes):
    return len(sizes) + 2


def attribute(node):
    return node.metadata
"""

DOWN = """\
from torch._inductor.utils import attribute, check_size, condition, constant, reworded


def use(sizes, node):
    a, b, c = check_size(sizes, 4), reworded(sizes, 4), condition(sizes, 4)
    return a, b, c, constant(sizes), attribute(node)
"""


@pytest.fixture(scope="module")
def changed(tmp_path_factory) -> dict[str, tuple[str, str]]:
    doc = impact_of_commit(
        tmp_path_factory.mktemp("neutral"),
        {"torch/_inductor/utils.py": V1},
        {"torch/_inductor/utils.py": V2},
        "[inductor] asserts as raises, typing (#7)",
        {"torch_npu/use.py": DOWN},
    )
    out = {}
    for unit in doc["units"]:
        for c in unit["couplings"]:
            if c["owner"] == "use":
                out[c["upstream"].split("::")[1]] = (c["rule"], c["action"])
    return out


@pytest.mark.parametrize("name", ["check_size", "reworded"])
def test_a_neutral_rewrite_couples_to_nothing(changed, name):
    assert name not in changed


@pytest.mark.parametrize("name", ["condition", "constant", "attribute"])
def test_a_real_change_stays_test(changed, name):
    assert changed[name] == ("use.behaviour", "Test")


def _hash(src: str, name: str = "f") -> str:
    return index_text("m.py", src).symbols[name].body_hash


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("def f(c):\n    assert c\n", "def f(c):\n    if not c:\n        raise AssertionError\n"),
        (
            "def f(c):\n    assert not c, 'm'\n",
            "def f(c):\n    if c:\n        raise AssertionError('m')\n",
        ),
        ("def f(x):\n    return x\n", "def f(x):\n    return cast('T', x)\n"),
        ("def f(x):\n    y = x\n    return y\n", "def f(x):\n    z = x\n    return z\n"),
        ("def f(x):\n    return [i for i in x]\n", "def f(x):\n    return [j for j in x]\n"),
        ("def f(x):\n    return x\n", "def f(x):\n    y: int\n    return x\n"),
        # `not in` and `is not` are the negations of `in` and `is`
        (
            "def f(a, b):\n    assert a in b\n",
            "def f(a, b):\n    if a not in b:\n        raise AssertionError(f'{a}')\n",
        ),
        (
            "def f(a):\n    assert a is not None\n",
            "def f(a):\n    if a is None:\n        raise AssertionError\n",
        ),
        # an assertion's message is read only when it fails
        ("def f(c):\n    assert c\n", "def f(c):\n    assert c, 'm'\n"),
        (
            "def f(c, n):\n    assert c, f'{n}'\n",
            "def f(c, n):\n    if not c:\n        raise AssertionError(f'got {n}')\n",
        ),
    ],
)
def test_the_hash_sees_through(a, b):
    assert _hash(a) == _hash(b)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("f = _add_docstr(torch._C.f, 'old')\n", "f = _add_docstr(torch._C.f, 'new text')\n"),
        (
            "f = torch._C._add_docstr(g, r'a {x}'.format(**args))\n",
            "f = torch._C._add_docstr(g, r'b {x}'.format(**args))\n",
        ),
    ],
)
def test_a_docstring_set_by_add_docstr_is_documentation(a, b):
    """torch 2.14.1 reworded ``F.scaled_dot_product_attention``'s docstring, an assignment
    of ``_add_docstr(torch._C._nn.scaled_dot_product_attention, r\"\"\"…\"\"\")``: vllm's
    three calls of it were Test for that text alone."""
    assert _hash(a) == _hash(b)


def test_add_docstr_on_another_object_is_a_change():
    a = _hash("f = _add_docstr(torch._C.f, 'doc')\n")
    assert a != _hash("f = _add_docstr(torch._C.g, 'doc')\n")


@pytest.mark.parametrize(
    ("a", "b"),
    [
        # a global is no local: renaming it changes what the function reads
        ("def f(x):\n    return y\n", "def f(x):\n    return z\n"),
        ("def f(x):\n    global g\n    g = x\n", "def f(x):\n    global h\n    h = x\n"),
        # locals() can see the names
        (
            "def f(x):\n    y = x\n    return locals()\n",
            "def f(x):\n    z = x\n    return locals()\n",
        ),
        # two locals swapped in use
        ("def f(a, b):\n    return a - b\n", "def f(a, b):\n    return b - a\n"),
        # an assert with another condition, or an else branch
        (
            "def f(c, d):\n    assert c, 'a'\n",
            "def f(c, d):\n    if not d:\n        raise AssertionError('a')\n",
        ),
        ("def f(c):\n    assert c, 'a'\n", "def f(c):\n    assert not c, 'a'\n"),
        # `!=` is not `not ==`: a class may define `__ne__` on its own
        (
            "def f(a, b):\n    assert a == b\n",
            "def f(a, b):\n    if a != b:\n        raise AssertionError\n",
        ),
        (
            "def f(a, b):\n    assert a in b\n",
            "def f(a, b):\n    if a in b:\n        raise AssertionError\n",
        ),
        ("def f(c):\n    assert c\n", "def f(c):\n    if not c:\n        raise ValueError\n"),
        # a class body's annotation is a field (dataclasses read it)
    ],
)
def test_the_hash_keeps_a_real_change(a, b):
    assert _hash(a) != _hash(b)


def test_a_class_annotation_still_counts() -> None:
    a = index_text("m.py", "class C:\n    x: int\n").symbols["C"].body_hash
    b = index_text("m.py", "class C:\n    pass\n").symbols["C"].body_hash
    assert a != b


def test_the_message_s_calls_are_still_collected() -> None:
    sym = index_text("m.py", "def f(c):\n    assert c, describe(c)\n").symbols["f"]
    assert "describe" in sym.calls
