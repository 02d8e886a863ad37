"""IMPORT_USE (and CONFIG reads): import lines of upstream names and every use of an
upstream name, through aliases and handles. Uses of downstream names that may re-export
upstream are kept pending for the whole-tree index (``tree_index``).
"""

from __future__ import annotations

import ast

from instep.impact.downstream.handles import apply_handles, handle_classes
from instep.impact.downstream.records import Local
from instep.impact.downstream.scope import Scope, line_snippet
from instep.impact.model import CouplingKind, Reference
from instep.pyindex.registrations import dotted_name


class ImportUses(Scope):
    def v_Import(self, node: ast.Import) -> None:
        for a in node.names:
            if a.asname:
                self.bind(a.asname, a.name)
            else:
                head = a.name.split(".", 1)[0]
                self.bind(head, head)
            if self.is_up(a.name):
                alias = f" as {a.asname}" if a.asname else ""
                self.import_ref(a.name, node.lineno, f"import {a.name}{alias}")

    def v_ImportFrom(self, node: ast.ImportFrom) -> None:
        mod = self.abs_module(node)
        for a in node.names:
            if a.name == "*":
                continue
            target = f"{mod}.{a.name}" if mod else a.name
            self.bind(a.asname or a.name, target)
            if self.is_own(target):
                self.dn_imports.append((target, node.lineno, self.owner()))
            if self.is_up(mod):
                alias = f" as {a.asname}" if a.asname else ""
                self.import_ref(target, node.lineno, f"from {mod} import {a.name}{alias}")

    def import_ref(self, target: str, line: int, text: str) -> None:
        """Every import line of an upstream name is kept as a reference."""
        self.refs.append(
            Reference(
                CouplingKind.IMPORT_USE,
                target,
                self.path,
                line,
                line_snippet(self.lines, line),
                detail=text,
                owner=self.owner(),
            )
        )

    def v_Name(self, node: ast.Name) -> None:
        if not isinstance(node.ctx, ast.Load):
            return
        b = self.lookup(node.id)
        if b is None or type(b) is Local:
            return
        if self.is_up(b):
            guarded = self.import_fallbacks.get((node.id, b))
            b, via_handle = apply_handles(b)
            if guarded is not None:
                self.uses_behind_fallback[(b, node.lineno)] = guarded
            self.use(b, node.lineno)
            self.note_use(b, node, instance=via_handle and b in handle_classes())
        elif self.is_own(b):
            self.pending_use(b, node.lineno)

    def v_Attribute(self, node: ast.Attribute) -> None:
        dotted, via_handle = self.resolve(node)
        if dotted is None:
            if dotted_name(node) is None:
                self.generic(node)
            return
        if type(dotted) is Local:
            return
        if self.is_up(dotted):
            self.use(dotted, node.lineno)
            self.note_use(dotted, node, instance=via_handle and dotted in handle_classes())
        elif self.is_own(dotted):
            self.pending_use(dotted, node.lineno)
