"""Reads of a member in the new upstream: ``x.name(…)`` calls and ``getattr``/``hasattr``
reads with a literal name, each with where it sits (class, def) and the condition it runs
under (the innermost ``if`` inside its def, a short-circuit operand, or the rest of a
block after an early exit: :func:`early_exit`).

:class:`Read` is one such place; :func:`reads_in_tree` finds them in a parsed file,
visiting only what can hold one (the defs and statements whose lines name the member).
The hook-name pass (``join/hook_names.py``) and its reach (``join/hook_reach.py``) read
them. Nothing here decides whether a read reaches the backend.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from instep.impact.join.call_conditions import on_backend
from instep.impact.join.upstream_calls import holds_needle, needle_lines

SELF_RECEIVERS = frozenset({"self", "cls", "type(self)", "self.__class__"})
_ARGS = re.compile(r"\((?:[^()]|\([^()]*\))*\)")
MAX_SITES = 200
# a string read as text: (receiver, name); only files with a new one are parsed
TEXT_READ = re.compile(r"""\b(?:get|has)attr\(\s*([\w.()]+?)\s*,\s*["'](\w+)["']""")
# the names read as attributes (``x.name``, ``x.\\n name``, a comment between in brackets):
# a call ``x.name(…)`` is in a file only if ``name`` is one of them (ASCII names)
ATTRIBUTE = re.compile(rb"\.(?:\s|\\|#[^\r\n]*)*([A-Za-z_]\w*)")


def receiver_key(text: str) -> str:
    return _ARGS.sub("(*)", text)


@dataclass(frozen=True)
class Read:
    """One place in the new upstream that reads the member from an object."""

    at: str  # path:line
    text: str  # the call or read as written, cut
    receiver: str
    how: str  # 'call' | 'getattr' | 'getattr_default' | 'hasattr'
    condition: str | None  # innermost enclosing `if` inside its def (None: unconditional)
    caller: str | None
    cls: str | None  # class qualname enclosing the read


class _Reads(ast.NodeVisitor):
    """getattr/hasattr reads with a literal name, and calls of ``.name(...)``, each with
    its enclosing class, def and innermost ``if`` test inside that def."""

    def __init__(
        self,
        path: str,
        call_names: frozenset[str] | None = frozenset(),
        lines: list[str] | None = None,
        calls_only: bool = False,
        text: bytes | None = None,
    ) -> None:
        self.path = path
        self.call_names = call_names
        # with the file's lines, a def or class whose text has none of these is skipped
        self.lines = lines
        # calls only: getattr/hasattr reads are not wanted, nor the defs only they name
        self.calls_only = calls_only
        self.needles = (*(() if calls_only else ("attr(",)), *(call_names or ()))
        # calls only, with the file's bytes: the lines holding a needle, sorted; a statement
        # (a def or class with its decorators) that spans none holds no call wanted and is
        # not visited (the parser's lines: ``lines`` may have more, see needle_lines)
        self.hits: list[int] | None = None
        if calls_only and lines is not None and call_names is not None and text is not None:
            self.hits = needle_lines(text, self.needles)
        self.classes: list[str] = []
        self.defs: list[str] = []
        self.conds: list[list[str]] = [[]]
        self.out: list[tuple[str, Read]] = []  # (member name, read)

    def _skip(self, node) -> bool:
        if self.lines is None or self.call_names is None:
            return False
        if self.hits is not None:
            return not holds_needle(self.hits, node)
        start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
        text = "\n".join(self.lines[start - 1 : node.end_lineno])
        return not any(n in text for n in self.needles)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        if self._skip(node):
            return
        self.classes.append(node.name)
        self.generic_visit(node)
        self.classes.pop()

    def visit_FunctionDef(self, node) -> None:
        if self._skip(node):
            return
        self.defs.append(node.name)
        self.conds.append([])
        self.generic_visit(node)
        self.conds.pop()
        self.defs.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_If(self, node: ast.If) -> None:
        self.visit(node.test)
        for branch, label in (
            (node.body, ("if {}", node.test)),
            (node.orelse, ("not ({})", node.test)),
        ):
            self.conds[-1].append(label)
            self._block(branch)
            self.conds[-1].pop()

    def generic_visit(self, node: ast.AST) -> None:
        for _, value in ast.iter_fields(node):
            if isinstance(value, list) and value and isinstance(value[0], ast.stmt):
                self._block(value)
            elif isinstance(value, list):
                for item in value:
                    if isinstance(item, ast.AST):
                        self.visit(item)
            elif isinstance(value, ast.AST):
                self.visit(value)

    def _block(self, stmts: list[ast.stmt]) -> None:
        """Visit statements in order; after ``if not c: return`` (or raise, continue,
        break) the rest of the block runs only under ``c``, as if inside ``if c:``."""
        pushed = 0
        for stmt in stmts:
            if self.hits is None or holds_needle(self.hits, stmt):
                self.visit(stmt)
            guard = early_exit(stmt) if isinstance(stmt, ast.If) else None
            if guard is not None:
                self.conds[-1].append(guard)
                pushed += 1
        del self.conds[-1][len(self.conds[-1]) - pushed :]

    def visit_BoolOp(self, node: ast.BoolOp) -> None:
        """``a and f()`` calls ``f`` only if ``a``; ``a or f()`` only if not ``a``."""
        self.visit(node.values[0])
        form = "if {}" if isinstance(node.op, ast.And) else "not ({})"
        for i, value in enumerate(node.values[1:], 1):
            before = node.values[:i]
            test = before[0] if i == 1 else ast.BoolOp(op=node.op, values=before)
            self.conds[-1].append((form, test))
            self.visit(value)
            self.conds[-1].pop()

    def visit_IfExp(self, node: ast.IfExp) -> None:
        self.visit(node.test)
        self.conds[-1].append(("if {}", node.test))
        self.visit(node.body)
        self.visit(node.orelse)
        self.conds[-1].pop()

    def visit_Call(self, node: ast.Call) -> None:
        f = node.func
        if (
            not self.calls_only
            and isinstance(f, ast.Name)
            and f.id in ("getattr", "hasattr")
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
        ):
            how = f.id if f.id == "hasattr" or len(node.args) == 2 else "getattr_default"
            self._add(node.args[1].value, node, ast.unparse(node.args[0]), how)
        elif isinstance(f, ast.Attribute) and (
            self.call_names is None or f.attr in self.call_names
        ):
            self._add(f.attr, node, ast.unparse(f.value), "call")
        self.generic_visit(node)

    def _add(self, name: str, node: ast.Call, receiver: str, how: str) -> None:
        cond = _label(self.conds[-1][-1]) if self.conds[-1] else None
        self.out.append(
            (
                name,
                Read(
                    f"{self.path}:{node.lineno}",
                    cut(ast.unparse(node), 100),
                    receiver,
                    how,
                    cond,
                    ".".join(self.classes + self.defs[:1]) if self.defs else None,
                    ".".join(self.classes) or None,
                ),
            )
        )


_LEAVES = (ast.Return, ast.Raise, ast.Continue, ast.Break)


def _label(cond) -> str:
    """An enclosing condition as quoted: a label, or (format, test) unparsed only now."""
    if isinstance(cond, str):
        return cond
    form, test = cond
    return form.format(cut(ast.unparse(test), 80))


def _negated(test: ast.expr) -> ast.expr | None:
    """``c`` of ``not c``, else None."""
    return test.operand if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) else None


def early_exit(stmt: ast.stmt) -> str | None:
    """The condition the statements after ``stmt`` run under when ``stmt`` is an ``if``
    with one branch that leaves (``if not c: return`` -> ``c``; ``if not c or d:
    continue`` -> ``c`` too: torch 2.5's ``_check_triton_bf16_support`` reads the device's
    ``is_bf16_supported`` only ``if is_gpu(device.type)``), else None. A bail-out on a
    special case (``if blocked(a, b): return False``, ``if x is None: continue``) leaves the
    rest on the path taken whenever the case does not hold: no condition, unless the test
    is a device test that holds on an out-of-tree backend (:func:`on_backend`)."""
    if not isinstance(stmt, ast.If):
        return None
    body_leaves = bool(stmt.body) and isinstance(stmt.body[-1], _LEAVES)
    else_leaves = bool(stmt.orelse) and isinstance(stmt.orelse[-1], _LEAVES)
    if body_leaves == else_leaves:
        return None  # neither leaves, or both do (nothing after it runs)
    test = stmt.test
    if body_leaves:
        kept = _negated(test)
        if kept is None and isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or):
            # `if not c or d: continue`: the rest runs only where c holds (and d does not)
            kept = next((c for c in map(_negated, test.values) if c is not None), None)
        if kept is None and on_backend(test) is not True:
            return None  # a bail-out: the rest is the path where it does not hold
        text = f"if {ast.unparse(kept)}" if kept is not None else f"not ({ast.unparse(test)})"
    else:
        text = f"if {ast.unparse(test)}"
    leave = (stmt.body if body_leaves else stmt.orelse)[-1]
    return f"{cut(text, 80)} (line {stmt.lineno} {type(leave).__name__.lower()}s otherwise)"


def cut(text: str, n: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def reads_in(path: str, source: str, call_names: frozenset[str] = frozenset()):
    try:
        tree = ast.parse(source, path)
    except (SyntaxError, ValueError):
        return []
    v = _Reads(path, call_names, source.splitlines())
    v.visit(tree)
    return v.out


def shortest(needles: set[bytes]) -> list[bytes]:
    """``needles`` less those holding another (a text holds one of them iff it holds one
    of these)."""
    return sorted(n for n in needles if not any(m != n and m in n for m in needles))


def reads_in_tree(
    path: str,
    tree: ast.Module,
    names: frozenset[str] | None,
    lines=None,
    calls_only: bool = False,
    text: bytes | None = None,
):
    """The reads of ``names`` in ``tree``; ``lines`` and ``text`` (the file's bytes) let
    the visit skip what cannot hold one (:class:`_Reads`)."""
    v = _Reads(path, names, lines, calls_only, text)
    v.visit(tree)
    return v.out
