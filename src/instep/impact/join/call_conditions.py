"""Conditions under which a call in the new upstream runs that an out-of-tree backend never
meets, or meets only when someone asks for it.

An out-of-tree backend (a PrivateUse1 device such as Ascend's ``npu``) is never one of the
devices PyTorch builds in: a test of ``x.type == "cuda"``, ``x.is_cuda`` or
``torch.version.hip`` is false on it. An environment variable or a debug flag is false
unless a user sets it. :func:`never_met` names such a condition (its source text, with why)
or answers None; :func:`conditional_names` finds the local names that a function sets to
something other than None only under such a condition (``target_cc = None`` ... ``if
device.type == "cuda": target_cc = ...``), so that ``if target_cc is not None:`` inherits
the condition.

Static only, one function at a time: nothing is imported, and a condition built in another
function is not followed. This module finds no call sites and picks no verdict
(:mod:`instep.impact.join.breaking_path` does).
"""

from __future__ import annotations

import ast

# devices PyTorch builds in: an out-of-tree backend's tensors never report these types
IN_TREE_DEVICES = frozenset({"cuda", "hip", "xpu", "mps"})
DEVICE_FLAGS = frozenset({"is_cuda", "is_xpu", "is_mps"})
BUILD_FLAGS = frozenset({"torch.version.hip"})  # None unless torch was built for ROCm
_ENV_CALLS = frozenset({"os.environ.get", "os.getenv", "environ.get", "getenv"})
_ENVIRON = frozenset({"os.environ", "environ"})


def _device_literals(node: ast.expr) -> list[str] | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        out = [e.value for e in node.elts if isinstance(e, ast.Constant)]
        return out if len(out) == len(node.elts) and all(isinstance(v, str) for v in out) else None
    return None


def _is_device_type(node: ast.expr) -> bool:
    """``x.type``, ``x.device.type``, ``device_type``: a device type read from an object."""
    if isinstance(node, ast.Attribute):
        return node.attr in ("type", "device_type")
    return isinstance(node, ast.Name) and node.id in ("device_type", "device")


def never_met(test: ast.expr, conditional: dict[str, str] | None = None) -> str | None:
    """Why ``test`` is false on an out-of-tree backend by default (quoting it), or None.

    A conjunction is never met when one of its parts is not; a disjunction when all are
    not. ``conditional`` maps local names to the condition they were set under.
    """
    conditional = conditional or {}
    if isinstance(test, ast.BoolOp):
        parts = [never_met(v, conditional) for v in test.values]
        if isinstance(test.op, ast.And):
            return next((p for p in parts if p), None)
        return "; ".join(parts) if all(parts) else None  # type: ignore[arg-type]
    text = ast.unparse(test)
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        left, op, right = test.left, test.ops[0], test.comparators[0]
        if isinstance(op, (ast.Eq, ast.In)) and _is_device_type(left):
            names = _device_literals(right)
            if names and all(n in IN_TREE_DEVICES for n in names):
                return f"`{text}` (a device type the backend never has)"
        if isinstance(op, ast.IsNot) and isinstance(right, ast.Constant) and right.value is None:
            return never_met(left, conditional)
        if isinstance(op, ast.In) and ast.unparse(right) in _ENVIRON:
            return f"`{text}` (an environment variable)"
        return None
    if isinstance(test, ast.Attribute) and test.attr in DEVICE_FLAGS:
        return f"`{text}` (a device the backend never is)"
    if text in BUILD_FLAGS:
        return f"`{text}` (set only on a ROCm build)"
    if isinstance(test, ast.Call) and ast.unparse(test.func) in _ENV_CALLS:
        return f"`{text}` (an environment variable)"
    if isinstance(test, ast.Subscript) and ast.unparse(test.value) in _ENVIRON:
        return f"`{text}` (an environment variable)"
    if isinstance(test, (ast.Name, ast.Attribute)):
        last = test.id if isinstance(test, ast.Name) else test.attr
        if last in conditional:
            return conditional[last]
        if "debug" in last.lower():
            return f"`{text}` (a debug flag)"
    return None


def on_backend(test: ast.expr) -> bool | None:
    """The value of a device test on an out-of-tree backend: False for ``x.type ==
    "cuda"``, ``x.is_cuda``, ``torch.version.hip``; True for ``x.type != "cuda"``, ``not
    x.is_cuda``; through ``not``, ``and`` and ``or``. None when ``test`` depends on
    anything else (an environment variable, a config flag, an argument)."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        value = on_backend(test.operand)
        return None if value is None else not value
    if isinstance(test, ast.BoolOp):
        values = [on_backend(v) for v in test.values]
        decisive = isinstance(test.op, ast.Or)  # True decides an `or`, False an `and`
        if decisive in values:
            return decisive
        return (not decisive) if all(v is not None for v in values) else None
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        op = test.ops[0]
        if isinstance(op, (ast.Eq, ast.In, ast.NotEq, ast.NotIn)) and _is_device_type(test.left):
            names = _device_literals(test.comparators[0])
            if names and all(n in IN_TREE_DEVICES for n in names):
                return isinstance(op, (ast.NotEq, ast.NotIn))
        return None
    if isinstance(test, ast.Attribute) and test.attr in DEVICE_FLAGS:
        return False
    return False if ast.unparse(test) in BUILD_FLAGS else None


def _is_none(node: ast.expr | None) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


class GuardedVisitor(ast.NodeVisitor):
    """Visits an ``if`` body with the condition it never meets on the backend pushed on
    ``guards`` (``guards[-1]`` is the innermost); ``else`` branches run unguarded."""

    def __init__(self) -> None:
        self.guards: list[str] = []

    def unmet(self, test: ast.expr) -> str | None:
        return never_met(test)

    def visit_If(self, node: ast.If) -> None:
        why = self.unmet(node.test)
        self.visit(node.test)
        if why:
            self.guards.append(why)
        for stmt in node.body:
            self.visit(stmt)
        if why:
            self.guards.pop()
        for stmt in node.orelse:
            self.visit(stmt)


class _Assignments(GuardedVisitor):
    """Per local name: the conditions of its non-None assignments (None: unconditional)."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: dict[str, list[str | None]] = {}

    def visit_FunctionDef(self, node: ast.AST) -> None:
        return  # a nested def has its own locals

    visit_AsyncFunctionDef = visit_Lambda = visit_ClassDef = visit_FunctionDef

    def _bind(self, target: ast.expr, value: ast.expr | None) -> None:
        if isinstance(target, ast.Name):
            if not _is_none(value):
                self.seen.setdefault(target.id, []).append(self.guards[-1] if self.guards else None)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for t in target.elts:
                self._bind(t, ast.Name("?"))  # unpacked: a value of unknown origin

    def visit_Assign(self, node: ast.Assign) -> None:
        for t in node.targets:
            self._bind(t, node.value)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self._bind(node.target, node.value)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._bind(node.target, node.value)

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self._bind(node.target, node.value)

    def visit_For(self, node: ast.For) -> None:
        self._bind(node.target, ast.Name("?"))
        self.generic_visit(node)


def conditional_names(func: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, str]:
    """Local names of ``func`` that hold something other than None only after a
    never-met condition, mapped to that condition."""
    found = _Assignments()
    for stmt in func.body:
        found.visit(stmt)
    out: dict[str, str] = {}
    for name, guards in found.seen.items():
        if guards and all(guards):
            out[name] = f"{guards[0]}, through `{name}`"
    return out
