"""Defs and classes of a downstream file: every def (nested ones too) becomes a
:class:`~instep.impact.downstream.records.DownstreamFunction` (signature, body hash, fork
fingerprint, registrations by decorator), every class a
:class:`~instep.impact.downstream.records.DownstreamClass` with its resolved bases (the
SUBCLASS_OVERRIDE references are made from them, ``subclasses``).
"""

from __future__ import annotations

import ast

from instep.impact.downstream import forks
from instep.impact.downstream.patch_helpers import PatchHelpers
from instep.impact.downstream.records import DownstreamClass, DownstreamFunction, Local, LocalKind
from instep.impact.downstream.registration_sites import RegistrationSites
from instep.impact.downstream.scope import Frame, line_snippet
from instep.impact.downstream.typed_params import annotation_chain, attribute_steps
from instep.impact.model import CouplingKind
from instep.pyindex.model import Registration
from instep.pyindex.registrations import registrations_of_decorators
from instep.pyindex.unparse import unparse


class Definitions(RegistrationSites, PatchHelpers):
    # defs and classes
    def _annotations(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, str]:
        """Visit a def's parameter and return annotations; parameter -> the upstream
        class it is annotated with. They are the def's place (its lines, the members it
        names), though Python evaluates them in the enclosing scope (where their names
        are resolved): the module or class around it would answer with every member its
        file names."""
        typed: dict[str, str] = {}
        self.owner_stack.append(node.name)
        for a in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs):
            if a.annotation is not None:
                self.type_position(a.annotation)
                chain = annotation_chain(a.annotation)
                cls = self.resolve(chain)[0] if chain is not None else None
                if self.is_up(cls):
                    typed[a.arg] = cls  # type: ignore[assignment]
        if node.returns is not None:
            self.type_position(node.returns)
        self.owner_stack.pop()
        return typed

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        for dec in node.decorator_list:
            if isinstance(dec, ast.Call):
                self.decorator_calls.add(id(dec))
        self.visit_list(node.decorator_list)
        self.visit_list(node.args.defaults)
        self.visit_list(d for d in node.args.kw_defaults if d is not None)
        typed = self._annotations(node)
        outer_q = ".".join(self.owner_stack)
        qual = f"{outer_q}.{node.name}" if outer_q else node.name
        local = Local(LocalKind.DEF, qual)
        self.bind(node.name, local)
        decs = [self.unaliased(d) if isinstance(d, ast.Call) else d for d in node.decorator_list]
        regs = tuple(registrations_of_decorators(decs, self.path, qual))
        for r in regs:
            self.local_patches.append((self.registration(r), local))
        args = node.args
        params = tuple(
            a.arg
            for a in (*args.posonlyargs, *args.args, args.vararg, *args.kwonlyargs, args.kwarg)
            if a is not None
        )
        frame = Frame(qual, params)
        full = self._touches(self.setattr_lines, node.lineno, node.end_lineno or node.lineno)
        self.full += full
        self.frames.append(frame)
        self.spans.append((node.lineno, node.end_lineno or node.lineno))
        self.owner_stack.append(node.name)
        # a parameter named like an upstream root (`def f(torch, torch_npu)`) is that module
        self.scopes.append(({p: (p if p in self.roots else None) for p in params}, False))
        if typed:
            self._attribute_steps(node.body, typed)
        self.visit_list(node.body)
        self.scopes.pop()
        self.owner_stack.pop()
        self.frames.pop()
        self.spans.pop()
        self.full -= full
        if frame.helper is not None:
            self.helpers[qual] = frame.helper
        if frame.returns is not None:
            self.returns[qual] = frame.returns
            self.add_name(node.name)
        self.functions.append(self._function_record(node, qual, regs, frame))
        for dec in node.decorator_list:  # @patch_helper(upstream.X, "name") def f(...)
            if isinstance(dec, ast.Call):
                site = self.call_site(dec, decorated=qual)
                if site is not None:
                    self.calls.append(site)

    def _attribute_steps(self, body: list[ast.stmt], typed: dict[str, str]) -> None:
        """``p.attr.member`` of a parameter ``p: Cls``: a use of ``Cls.attr.member``
        through ``attr`` (``Reference.through``), with its call shapes; the join follows
        ``attr``'s declared type upstream or drops the reference (typed_params)."""
        for param, attr, member, n, call in attribute_steps(body, frozenset(typed)):
            target = f"{typed[param]}.{attr}.{member}"
            key = (target, self.owner(), CouplingKind.IMPORT_USE)
            if key not in self.seen_uses:
                self.seen_uses[key] = n.lineno
                self.ref(CouplingKind.IMPORT_USE, target, n.lineno, detail="use", through=attr)
            self.note_use(target, n, call)

    v_FunctionDef = _function

    v_AsyncFunctionDef = _function

    def _function_record(
        self, node: ast.AST, qual: str, regs: tuple[Registration, ...], frame: Frame
    ) -> DownstreamFunction:
        start = node.lineno
        end = node.end_lineno or start
        body = node.body  # type: ignore[attr-defined]
        body_start = body[0].lineno
        if (
            isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            body_start = (body[0].end_lineno or body_start) + 1
        return DownstreamFunction(
            self.path,
            qual,
            start,
            end,
            unparse(node.args),  # type: ignore[attr-defined]
            forks.body_hash_of_lines(self.norm[body_start - 1 : end]),
            forks.fingerprint_of_lines(
                self.grams[start - 1 : end], forks.substantial_lines(self.norm[start - 1 : end])
            ),
            regs,
            line_snippet(self.lines, start),
            frozenset(frame.upstream_calls),
            frozenset(frame.super_calls),
            tuple(sorted(frame.super_call_shapes)),
        )

    def v_ClassDef(self, node: ast.ClassDef) -> None:
        self.visit_list(node.decorator_list)
        bases: list[str] = []
        outer_q = ".".join(self.owner_stack)
        qual = f"{outer_q}.{node.name}" if outer_q else node.name
        for b in node.bases:
            dotted, _ = self.resolve(b)
            if dotted is None:
                self.visit(b)
                continue
            if type(dotted) is Local:
                if dotted.kind is not LocalKind.CLASS:
                    continue
                dotted = f"{self.module}.{dotted.qualname}"
            bases.append(dotted)
        for kw in node.keywords:
            self.visit(kw.value)
        self.bind(node.name, Local(LocalKind.CLASS, qual))
        self.owner_stack.append(node.name)
        self.scopes.append(({}, True))
        n_before = len(self.functions)
        self.visit_list(node.body)
        self.scopes.pop()
        self.owner_stack.pop()
        methods = tuple(
            f.qualname for f in self.functions[n_before:] if f.qualname.rsplit(".", 1)[0] == qual
        )
        self.classes.append(
            DownstreamClass(
                self.path,
                qual,
                node.lineno,
                line_snippet(self.lines, node.lineno),
                tuple(bases),
                methods,
                end_line=node.end_lineno or node.lineno,
            )
        )
