"""Rewrites that change nothing a caller can observe, which the body hash sees through.

The symbol index (``pyindex.symbols``) hashes a normalised body; a change that survives the
normalisation is a BODY change, and every downstream place that reaches the symbol is
then asked to test it. These rewrites are no behaviour change, so they hash alike:

* ``if not c: raise AssertionError(msg)`` is ``assert c, msg`` (and ``if c: raise
  AssertionError`` is ``assert not c``): torch 2.14 rewrote 112 functions this way, the
  same check with the same message (what ``python -O`` strips differs; nobody runs
  PyTorch under ``-O``); ``if a not in b: raise AssertionError`` is ``assert a in b``
  (``is not`` too, not ``!=``: a class may define ``__ne__`` apart from ``__eq__``);
* an assertion's message is not read: ``assert c`` -> ``assert c, "msg"``, ``assert c, m1``
  -> ``if not c: raise AssertionError(m2)`` change nothing for an assertion that holds
  (the message is only evaluated when it fails), so only the condition is hashed; a
  changed condition is a change. The calls the message makes are still collected (the
  call graph does not shrink);
* ``typing.cast(T, x)`` (or ``cast(T, x)``, two positional arguments) is ``x``: ``cast``
  returns its argument;
* ``_add_docstr(x, doc)`` (``torch._C._add_docstr``, ``add_docstr``; two positional
  arguments) is ``x``: it sets ``x.__doc__`` and returns ``x``, so a rewritten text is a
  docstring change (torch 2.14.1 reworded ``F.scaled_dot_product_attention``'s, an
  assignment ``scaled_dot_product_attention = _add_docstr(torch._C._nn.<f>, <text>)``);
* ``if TYPE_CHECKING:`` never runs: only its ``else`` counts (``typing.TYPE_CHECKING`` too);
* in a function, an annotated assignment ``x: T = v`` is ``x = v``, and ``x: T`` alone is
  nothing: Python never evaluates the annotations of a function's local names;
* a function's local names (its parameters and the names its body binds, unless declared
  ``global``/``nonlocal``) are renamed in the order they first appear (alpha-renaming:
  ``for i in xs`` and ``for idx in xs`` hash alike); not when the body reads ``locals``,
  ``vars``, ``eval`` or ``exec``, which can see the names. ``except E as e`` names and
  the parameters of lambdas are left as written (renaming them is a body change).

Comments, docstrings and formatting never reached the hash (the AST has none of them).
What it does not do: a reordered statement, a changed constant, a
renamed attribute (``self.x``) or keyword argument are changes. Nothing here reads files
or imports the code it normalises.
"""

from __future__ import annotations

import ast

_ASSERTION = "AssertionError"
_NAME_READERS = frozenset({"locals", "vars", "eval", "exec"})
LOCAL_TOKEN = "\x01L{}"  # a renamed local in the token stream (no identifier collides)


def cast_value(call: ast.Call) -> ast.expr | None:
    """``x`` of ``typing.cast(T, x)`` / ``cast(T, x)``; None for any other call."""
    func = call.func
    if len(call.args) != 2 or call.keywords:
        return None
    if func.__class__ is ast.Name:
        named = func.id == "cast"  # type: ignore[attr-defined]
    elif func.__class__ is ast.Attribute:
        value = func.value  # type: ignore[attr-defined]
        named = (
            func.attr == "cast"  # type: ignore[attr-defined]
            and value.__class__ is ast.Name
            and value.id in ("typing", "t", "typing_extensions")
        )
    else:
        return None
    if not named or isinstance(call.args[1], ast.Starred):
        return None
    return call.args[1]


_DOCSTRING_SETTERS = frozenset({"_add_docstr", "add_docstr"})


def documented_value(call: ast.Call) -> ast.expr | None:
    """``x`` of ``_add_docstr(x, doc)`` / ``torch._C._add_docstr(x, doc)`` /
    ``add_docstr(x, doc)``; None for any other call."""
    func = call.func
    if func.__class__ is ast.Name:
        name = func.id  # type: ignore[attr-defined]
    elif func.__class__ is ast.Attribute:
        name = func.attr  # type: ignore[attr-defined]
    else:
        return None
    if name not in _DOCSTRING_SETTERS or len(call.args) != 2 or call.keywords:
        return None
    if any(isinstance(a, ast.Starred) for a in call.args):
        return None
    return call.args[0]


def is_type_checking(test: ast.expr) -> bool:
    """``TYPE_CHECKING`` or ``typing.TYPE_CHECKING`` (a test that is false at run time)."""
    if test.__class__ is ast.Name:
        return test.id == "TYPE_CHECKING"  # type: ignore[attr-defined]
    return test.__class__ is ast.Attribute and test.attr == "TYPE_CHECKING"  # type: ignore[attr-defined]


def _assertion_raise(stmt: ast.stmt) -> tuple[bool, ast.expr | None]:
    """(whether ``stmt`` is ``raise AssertionError`` or ``raise AssertionError(msg)``,
    the message)."""
    if stmt.__class__ is not ast.Raise or stmt.cause is not None:  # type: ignore[attr-defined]
        return False, None
    exc = stmt.exc  # type: ignore[attr-defined]
    if exc.__class__ is ast.Name and exc.id == _ASSERTION:
        return True, None
    if (
        exc.__class__ is ast.Call
        and exc.func.__class__ is ast.Name
        and exc.func.id == _ASSERTION
        and not exc.keywords
        and len(exc.args) <= 1
        and not (exc.args and isinstance(exc.args[0], ast.Starred))
    ):
        return True, exc.args[0] if exc.args else None
    return False, None


def as_assert(node: ast.If) -> ast.Assert | None:
    """``assert c, msg`` for ``if not c: raise AssertionError(msg)`` (no ``else``); the
    test negated for ``if c: raise AssertionError(...)``; None for any other ``if``."""
    if node.orelse or len(node.body) != 1:
        return None
    is_raise, msg = _assertion_raise(node.body[0])
    if not is_raise:
        return None
    return ast.Assert(test=negated(node.test), msg=msg)


_OPPOSITE = {ast.In: ast.NotIn, ast.NotIn: ast.In, ast.Is: ast.IsNot, ast.IsNot: ast.Is}


def negated(test: ast.expr) -> ast.expr:
    """``c`` for ``not c``; ``a in b`` for ``a not in b`` (and ``is``/``is not``: Python
    defines each as the other's negation, unlike ``==``/``!=``, which a class may define
    apart); ``not c`` otherwise."""
    if test.__class__ is ast.UnaryOp and test.op.__class__ is ast.Not:  # type: ignore[attr-defined]
        return test.operand  # type: ignore[attr-defined]
    if test.__class__ is ast.Compare and len(test.ops) == 1:  # type: ignore[attr-defined]
        opposite = _OPPOSITE.get(test.ops[0].__class__)  # type: ignore[attr-defined]
        if opposite is not None:
            return ast.Compare(left=test.left, ops=[opposite()], comparators=test.comparators)  # type: ignore[attr-defined]
    return ast.UnaryOp(op=ast.Not(), operand=test)


def assert_without_message(node: ast.Assert, calls: list[ast.expr] | None) -> ast.Assert:
    """``assert c`` for ``assert c, msg``; the calls of ``msg`` go to ``calls``."""
    if calls is not None:
        calls.extend(x.func for x in ast.walk(node.msg) if x.__class__ is ast.Call)  # type: ignore[arg-type, attr-defined]
    return ast.Assert(test=node.test, msg=None)


def local_annotation(node: ast.AnnAssign) -> ast.stmt | None:
    """A function's ``x: T = v`` as ``x = v``; ``x: T`` alone as None (nothing runs)."""
    if node.value is None:
        return None
    return ast.Assign(targets=[node.target], value=node.value)


class Names:
    """The names a function body's token stream holds, for :func:`rename_locals`."""

    __slots__ = ("bound", "declared", "positions", "reads_names")

    def __init__(self) -> None:
        self.positions: list[int] = []  # index in the token list of every Name's id
        self.bound: set[str] = set()  # names stored or deleted
        self.declared: set[str] = set()  # global / nonlocal
        self.reads_names = False  # the body names locals(), vars(), eval or exec

    def saw(self, node: ast.Name, position: int) -> None:
        self.positions.append(position)
        if node.ctx.__class__ is not ast.Load:
            self.bound.add(node.id)
        elif node.id in _NAME_READERS:
            self.reads_names = True


def rename_locals(tokens: list[str], names: Names, params: tuple[str, ...]) -> None:
    """Replace, in ``tokens``, every local name by its rank of first appearance."""
    if names.reads_names:
        return
    local = (names.bound | set(params)) - names.declared
    if not local:
        return
    rank: dict[str, str] = {}  # the parameters first, in their order: they are bound first
    for name in params:
        if name in local and name not in rank:
            rank[name] = LOCAL_TOKEN.format(len(rank))
    for pos in names.positions:
        name = tokens[pos]
        if name in local:
            token = rank.get(name)
            if token is None:
                token = rank[name] = LOCAL_TOKEN.format(len(rank))
            tokens[pos] = token


def is_stub_body(body: list[ast.stmt]) -> bool:
    """A body that only declares: ``...``, ``pass``, or a single ``raise`` (what a typing
    stub's members hold: ``raise TypeError("type stub not overridden")``)."""
    if len(body) != 1:
        return not body
    stmt = body[0]
    if stmt.__class__ is ast.Pass or stmt.__class__ is ast.Raise:
        return True
    return (
        stmt.__class__ is ast.Expr
        and stmt.value.__class__ is ast.Constant  # type: ignore[attr-defined]
        and stmt.value.value is Ellipsis  # type: ignore[attr-defined]
    )
