"""OP_SCHEMA and HIGHER_ORDER_OP: every place a downstream file names an ATen operator
overload or a higher-order op, whatever it does with it.

An ATen op is named as ``aten.x.y``, ``torch.ops.aten.x.y``, ``aten.x`` (the packet: every
overload) or a string ``"aten::x.y"``; a higher-order op as ``torch.ops.higher_order.x``.
Each place becomes a :class:`~instep.impact.model.Reference` keyed ``schema:aten.x.y``
(``schema:aten.x`` for a packet, ``schema:aten.x.default`` for the default overload) or
``hop:x``, with

- ``detail``: the role the name plays there: the registrar whose argument it is
  (``make_fallback``, ``register_lowering``, ... from ``pyindex/data/registrars.toml``),
  ``table:NAME`` for a key or element of a module-level table literal, ``string`` for
  ``"aten::x.y"``, ``use`` for anything else;
- ``at_import``: the name is evaluated when the module is imported (module or class
  level, a decorator or default of such a def): a missing overload there stops the
  module from loading;
- ``gate``: a ``try`` whose handler catches ``AttributeError`` (or ``Exception``, or
  everything) around it, as a gate of kind ``try_except``; ``hasattr`` probes and version
  gates are attached later by :mod:`instep.impact.downstream.version_gates`.

The registration recogniser (``registration_sites``) still records registrations by
their op packet; these references add the overload and the import-time fact. Nothing is
resolved across files: an op held in a variable is not followed. Matching against
upstream changes: :mod:`instep.impact.join.op_couplings`.
"""

from __future__ import annotations

import ast
import bisect
import re

from instep.impact.model import CouplingKind, Reference, VersionGate
from instep.pyindex.registrations import callee_name, dotted_name, op_path, registrars

SCHEMA_PREFIX = "schema:"
HOP_PREFIX = "hop:"
_STRING_OP = re.compile(r"aten::(\w+)(?:\.(\w+))?")
# attributes of an OpOverloadPacket / OpOverload that are no overload name
_NOT_OVERLOADS = frozenset(
    {
        "overloads",
        "default_overload",
        "name",
        "op",
        "tags",
        "py_impl",
        "py_kernels",
        "is_view",
        "namespace",
        "decompose",
    }
)
_GUARDING = frozenset({"AttributeError", "Exception", "BaseException", "RuntimeError"})
# A line that may hold an op name: ``aten`` or ``higher_order`` written out, or a string
# spelt otherwise (an escape, a string ending in "a", "at" or "ate" that an adjacent
# literal continues: ``"at" "en::x"``), or a non-ASCII identifier (NFKC-normalised).
_MAY_NAME_OP = re.compile(r"aten|higher_order|\\|[ate][\"']|[^\x00-\x7f]")


def _catches_attribute_error(handler: ast.ExceptHandler) -> bool:
    t = handler.type
    if t is None:
        return True
    names = t.elts if isinstance(t, ast.Tuple) else [t]
    return any((dotted_name(n) or "").rsplit(".", 1)[-1] in _GUARDING for n in names)


def _op_name(node: ast.Attribute) -> tuple[str, str, str | None] | None:
    """(namespace, op, overload or None) of ``aten.x.y`` / ``torch.ops.higher_order.x``."""
    parts = op_path(node)
    if not parts:
        return None
    if parts[0] == "aten" and len(parts) in (2, 3):
        overload = parts[2] if len(parts) == 3 and parts[2] not in _NOT_OVERLOADS else None
        if parts[1].startswith("__") or (overload or "").startswith("_"):
            return None
        return "aten", parts[1], overload
    if parts[0] == "higher_order" and len(parts) == 2 and not parts[1].startswith("_"):
        return "higher_order", parts[1], None
    return None


class _Walker:
    """One pass over a module's statements, knowing what runs at import and what is guarded."""

    def __init__(self, path: str, source: str) -> None:
        self.path = path
        self.source = source
        self.lines: list[str] | None = None
        self.refs: list[Reference] = []
        self.owners: list[str] = []
        self.in_def = 0
        self.guard: VersionGate | None = None
        self.role = "use"
        # the sorted numbers of the lines that may name an op: a statement without one
        # is not walked
        self.maybe: list[int] = []
        line, pos = 1, 0
        m = _MAY_NAME_OP.search(source)
        while m is not None:
            line += source.count("\n", pos, m.start())
            self.maybe.append(line)
            pos = source.find("\n", m.start()) + 1  # one search per line
            if pos == 0:
                break
            line += 1
            m = _MAY_NAME_OP.search(source, pos)

    # statements ------------------------------------------------------------------
    def stmts(self, body: list[ast.stmt]) -> None:
        for s in body:
            self.stmt(s)

    def stmt(self, node: ast.stmt) -> None:
        maybe = self.maybe
        start = node.lineno
        for d in getattr(node, "decorator_list", ()):  # decorators come before the def
            start = min(start, d.lineno)
        i = bisect.bisect_left(maybe, start)
        if i == len(maybe) or maybe[i] > (node.end_lineno or node.lineno):
            return
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            self.definition(node)
        elif isinstance(node, ast.Try) or type(node).__name__ == "TryStar":
            self.try_stmt(node)
        elif (
            isinstance(node, (ast.Assign, ast.AnnAssign))
            and not self.in_def
            and not self.owners
            and isinstance(node.value, (ast.Dict, ast.List, ast.Tuple, ast.Set))
        ):
            target = node.targets[0] if isinstance(node, ast.Assign) else node.target
            name = dotted_name(target)
            outer, self.role = self.role, f"table:{name}" if name else "use"
            self.expr(node.value)
            self.role = outer
        else:
            for field in node._fields:
                value = getattr(node, field, None)
                if isinstance(value, list):
                    for item in value:
                        if isinstance(item, ast.stmt):
                            self.stmt(item)
                        elif isinstance(item, ast.AST):
                            self.expr(item)
                elif isinstance(value, ast.AST):
                    self.expr(value)

    def definition(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        """A def or class: its decorators, bases and defaults run at import, its body
        belongs to it."""
        for d in node.decorator_list:
            self.expr(d)
        if isinstance(node, ast.ClassDef):
            for b in (*node.bases, *node.keywords):
                self.expr(b)
        else:
            for d in (*node.args.defaults, *node.args.kw_defaults):
                if d is not None:
                    self.expr(d)
        self.owners.append(node.name)
        fn = not isinstance(node, ast.ClassDef)
        self.in_def += fn
        self.stmts(node.body)
        self.in_def -= fn
        self.owners.pop()

    def try_stmt(self, node) -> None:
        """A ``try`` (or ``try``/``except*``): its body is guarded when a handler catches
        AttributeError."""
        outer = self.guard
        if any(_catches_attribute_error(h) for h in node.handlers):
            handlers = ", ".join(
                ast.unparse(h.type) if h.type is not None else "everything" for h in node.handlers
            )
            self.guard = VersionGate(self.path, node.lineno, f"try/except {handlers}", "try_except")
        self.stmts(node.body)
        self.guard = outer
        for h in node.handlers:
            self.stmts(h.body)
        self.stmts(node.orelse)
        self.stmts(node.finalbody)

    # expressions -----------------------------------------------------------------
    def expr(self, node: ast.AST) -> None:
        if isinstance(node, ast.Attribute):
            name = _op_name(node)
            if name is not None:
                self.record(node, *name)
                return
        elif isinstance(node, ast.Constant):
            if isinstance(node.value, str) and node.value.startswith("aten::"):
                m = _STRING_OP.fullmatch(node.value)
                if m:
                    outer, self.role = self.role, "string"
                    self.record(node, "aten", m.group(1), m.group(2))
                    self.role = outer
            return
        elif isinstance(node, ast.Call):
            callee = callee_name(node)
            if callee in registrars() and node.args:
                outer, self.role = self.role, callee
                self.expr(node.args[0])
                self.role = outer
                for a in (*node.args[1:], *node.keywords):
                    self.expr(a)
                self.expr(node.func)
                return
        elif isinstance(node, ast.Lambda):
            self.in_def += 1
            self.expr(node.body)
            self.in_def -= 1
            return
        for field in node._fields:
            value = getattr(node, field, None)
            if isinstance(value, list):
                for item in value:
                    if isinstance(item, ast.AST):
                        self.expr(item)
            elif isinstance(value, ast.AST):
                self.expr(value)

    def record(self, node: ast.AST, ns: str, op: str, overload: str | None) -> None:
        if self.lines is None:
            self.lines = self.source.split("\n")
        line = node.lineno  # type: ignore[attr-defined]
        snippet = self.lines[line - 1].strip()[:200] if line <= len(self.lines) else ""
        if ns == "aten":
            kind = CouplingKind.OP_SCHEMA
            target = f"{SCHEMA_PREFIX}aten.{op}" + (f".{overload}" if overload else "")
            written = f"aten.{op}" + (f".{overload}" if overload else "")
        else:
            kind, target, written = CouplingKind.HIGHER_ORDER_OP, f"{HOP_PREFIX}{op}", op
        self.refs.append(
            Reference(
                kind,
                target,
                self.path,
                line,
                snippet,
                detail=f"{self.role} {written}",
                owner=".".join(self.owners) or None,
                gate=self.guard,
                at_import=not self.in_def,
            )
        )


def op_references(tree: ast.Module, path: str, source: str) -> list[Reference]:
    """The ATen-overload and higher-order-op places of one parsed downstream file."""
    if "aten" not in source and "higher_order" not in source:
        return []
    walker = _Walker(path, source)
    walker.stmts(tree.body)
    return walker.refs
