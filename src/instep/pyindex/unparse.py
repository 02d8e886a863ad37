"""``ast.unparse``, several times faster for the shapes signatures and decorators take.

Indexing a release unparses every function's arguments, decorator and base class
(~100,000 calls for torch plus torch_npu), and :func:`ast.unparse`'s visitor machinery
was ~8 % of a cold analysis. :func:`unparse` writes the common shapes itself (names,
attributes, simple constants, subscripts, calls, ``X | None``, argument lists) and hands
anything else to :func:`ast.unparse`, so the text is always exactly what
:func:`ast.unparse` gives (a test compares the two on every definition of real files).

It does not pretty-print, truncate or evaluate anything.
"""

from __future__ import annotations

import ast

__all__ = ["unparse"]


class _Fallback(Exception):
    """The node has a shape this module leaves to :func:`ast.unparse`."""


def unparse(node: ast.AST) -> str:
    """Exactly ``ast.unparse(node)``."""
    try:
        if type(node) is ast.arguments:
            return _arguments(node)
        return _expr(node)
    except _Fallback:
        return ast.unparse(node)


def _constant(value: object) -> str:
    t = type(value)
    if t is str or t is int or t is bool or t is bytes or value is None:
        return repr(value)
    if value is Ellipsis:
        return "..."
    if t is float and value == value and value not in (float("inf"), float("-inf")):
        return repr(value)
    raise _Fallback


def _expr(node: ast.AST) -> str:
    """Atom-level expressions (no parentheses needed where an atom is expected)."""
    t = type(node)
    if t is ast.Name:
        return node.id  # type: ignore[attr-defined]
    if t is ast.Attribute:
        value = node.value  # type: ignore[attr-defined]
        if type(value) is ast.Constant and isinstance(value.value, int):
            raise _Fallback  # `1 .real`
        return f"{_expr(value)}.{node.attr}"  # type: ignore[attr-defined]
    if t is ast.Constant:
        if node.kind is not None:  # type: ignore[attr-defined]  # u'' strings
            raise _Fallback
        return _constant(node.value)  # type: ignore[attr-defined]
    if t is ast.Subscript:
        s = node.slice  # type: ignore[attr-defined]
        if type(s) is ast.Tuple and s.elts:
            if any(type(e) is ast.Starred for e in s.elts):
                raise _Fallback
            inner = ", ".join(_test(e) for e in s.elts)
            if len(s.elts) == 1:
                inner += ","
        else:
            if type(s) in (ast.Tuple, ast.Slice, ast.Starred):
                raise _Fallback
            inner = _test(s)
        return f"{_expr(node.value)}[{inner}]"  # type: ignore[attr-defined]
    if t is ast.Call:
        args = node.args  # type: ignore[attr-defined]
        if any(type(a) in (ast.Starred, ast.GeneratorExp) for a in args):
            raise _Fallback
        parts = [_test(a) for a in args]
        for k in node.keywords:  # type: ignore[attr-defined]
            parts.append(f"{k.arg}={_test(k.value)}" if k.arg else f"**{_test(k.value)}")
        return f"{_expr(node.func)}({', '.join(parts)})"  # type: ignore[attr-defined]
    if t is ast.List:
        return f"[{', '.join(_test(e) for e in node.elts)}]"  # type: ignore[attr-defined]
    if t is ast.Tuple:
        elts = node.elts  # type: ignore[attr-defined]
        if any(type(e) is ast.Starred for e in elts):
            raise _Fallback
        inner = ", ".join(_test(e) for e in elts)
        return f"({inner},)" if len(elts) == 1 else f"({inner})"
    raise _Fallback


def _test(node: ast.AST) -> str:
    """Expressions where ``ast.unparse`` expects a full test (arguments, elements)."""
    t = type(node)
    if t is ast.BinOp and type(node.op) is ast.BitOr:  # type: ignore[attr-defined]
        return _bit_or(node)  # type: ignore[arg-type]
    if t is ast.UnaryOp and type(node.op) is ast.USub:  # type: ignore[attr-defined]
        operand = node.operand  # type: ignore[attr-defined]
        if type(operand) is ast.Constant and type(operand.value) in (int, float):
            return f"-{_constant(operand.value)}"
        raise _Fallback
    return _expr(node)


def _bit_or(node: ast.BinOp) -> str:
    """``a | b | c`` of atoms (left-associative, no parentheses)."""
    right = _expr(node.right)
    left = node.left
    if type(left) is ast.BinOp and type(left.op) is ast.BitOr:
        return f"{_bit_or(left)} | {right}"
    return f"{_expr(left)} | {right}"


def _arg(a: ast.arg) -> str:
    if a.annotation is None:
        return a.arg
    return f"{a.arg}: {_test(a.annotation)}"


def _arguments(node: ast.arguments) -> str:
    """``ast.unparse`` of an argument list, the same choices in the same order."""
    parts: list[str] = []
    positional = [*node.posonlyargs, *node.args]
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(node.defaults))
    defaults += node.defaults
    for index, (a, d) in enumerate(zip(positional, defaults, strict=True), 1):
        text = _arg(a) if d is None else f"{_arg(a)}={_test(d)}"
        if index == len(node.posonlyargs):
            text += ", /"
        parts.append(text)
    if node.vararg or node.kwonlyargs:
        parts.append(f"*{_arg(node.vararg)}" if node.vararg else "*")
    for a, kd in zip(node.kwonlyargs, node.kw_defaults, strict=True):
        parts.append(_arg(a) if kd is None else f"{_arg(a)}={_test(kd)}")
    if node.kwarg:
        parts.append(f"**{_arg(node.kwarg)}")
    return ", ".join(parts)
