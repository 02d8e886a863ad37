"""instep.pyindex.unparse must give exactly ast.unparse's text, on every shape."""

from __future__ import annotations

import ast
import json
import pathlib
import typing

import pytest

from instep.pyindex.unparse import unparse

TRICKY = """
def f(a, b: int = 1, /, c: "x" = 'q', *args: int, d, e: list[int] | None = None, **kw: str): ...
def g(*, k=-1, j=(1,), i=(), h=[1, (2, 3)], g=1 .real, f=True .real, e=1.5, d=float("inf")): ...
def h(x: Dict[str, Tuple[int, ...]], y: Optional[Callable[[int], str]] = None): ...
def i(x=f(*a), y=f(**k), z=f(a, b=c, **d), w=f(x for x in y), v=a[1:2], u=a[b, c], t=a[b,]): ...
def j(x=lambda: 1, y=a if b else c, z=not a, w=a + b * c, v=-x, u=~x, t=a | -1, s=(a | b) | c): ...
def k(x=u"s", y=b"b", z="it's", w="\\n", v="é", u=1e309, t=-1e309, s=1j, r=..., q=(1, *a)): ...
def l(x: a | b | c = {1: 2}, y: "A[B]" = {a}, z=f"{a}", w=a[b:c, d], v=a[*b]): ...
@a.b(c, d=e)
@a[b].c
class C(A, B[int], metaclass=M): ...
"""


def _targets(tree: ast.AST) -> typing.Iterator[ast.AST]:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield node.args
            yield from node.decorator_list
        elif isinstance(node, ast.ClassDef):
            yield from node.bases
            yield from node.decorator_list
        elif isinstance(node, ast.expr):
            yield node


def test_tricky_shapes_match_ast_unparse():
    tree = ast.parse(TRICKY)
    checked = 0
    for node in _targets(tree):
        assert unparse(node) == ast.unparse(node), ast.dump(node)
        checked += 1
    assert checked > 150


@pytest.mark.parametrize("module", [ast, json, typing, pathlib])
def test_real_stdlib_files_match_ast_unparse(module):
    tree = ast.parse(pathlib.Path(module.__file__).read_text(encoding="utf-8"))
    mismatches = [n for n in _targets(tree) if unparse(n) != ast.unparse(n)]
    assert not mismatches, ast.dump(mismatches[0])
