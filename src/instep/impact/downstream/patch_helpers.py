"""Patch helpers: a downstream function that does ``setattr`` on its parameters
(``patch(obj, "name", fn)``), and the calls that pass it an upstream object and a name.

:class:`PatchHelpers` records such calls (:class:`~instep.impact.downstream.records.CallSite`);
:func:`same_file_helper_patches` turns the calls of this file's helpers into MONKEYPATCH
references (the whole-tree index does the same across files). Which function *is* a
helper is found by ``monkeypatches`` (its ``setattr``). :func:`base_mixin_patches` turns
``U.__bases__ = (Mixin, ...)`` into a patch of ``U`` by each method of ``Mixin``.
"""

from __future__ import annotations

import ast
from dataclasses import replace

from instep.impact.downstream.records import (
    Arg,
    ArgKind,
    CallSite,
    DownstreamFunction,
    HelperSpec,
    Local,
    LocalKind,
)
from instep.impact.downstream.scope import Scope, line_snippet
from instep.impact.model import CouplingKind, Reference


class PatchHelpers(Scope):
    def arg_info(self, node: ast.AST) -> Arg | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return Arg(ArgKind.STRING, node.value)
        if isinstance(node, (ast.Name, ast.Attribute)):
            dotted, via = self.resolve(node)
            if dotted is None or via:
                return None
            if type(dotted) is Local:
                return Arg(ArgKind.LOCAL, dotted)
            return Arg(ArgKind.UPSTREAM if self.is_up(dotted) else ArgKind.DOWNSTREAM, dotted)
        return None

    def call_site(self, node: ast.Call, decorated: str | None = None) -> CallSite | None:
        fn, _ = self.resolve(node.func)
        if fn is None or self.is_up(fn) or (type(fn) is Local and fn.kind is LocalKind.CLASS):
            return None
        args = tuple(self.arg_info(a) for a in node.args)
        kws = tuple((kw.arg, self.arg_info(kw.value)) for kw in node.keywords if kw.arg)
        infos = [a for a in args if a] + [a for _, a in kws if a]
        kinds = {a.kind for a in infos}
        if ArgKind.UPSTREAM not in kinds or ArgKind.STRING not in kinds:
            return None
        return CallSite(
            fn,
            args,
            kws,
            node.lineno,
            line_snippet(self.lines, node.lineno),
            self.owner(),
            decorated,
        )


def helper_patch(
    site: CallSite, spec: HelperSpec, helper_name: str, path: str
) -> tuple[str, Arg | None] | None:
    """(upstream target, replacement arg) of a call to a patch helper, or None."""
    bound: dict[str, Arg | None] = {}
    for p, a in zip(spec.params, site.args, strict=False):
        bound[p] = a
    for k, a in site.keywords:
        bound[k] = a
    obj, name = bound.get(spec.obj), bound.get(spec.name)
    if not obj or obj.kind is not ArgKind.UPSTREAM or not name or name.kind is not ArgKind.STRING:
        return None
    target = f"{obj.value}.{name.value}"
    value = bound.get(spec.value) if spec.value else None
    if spec.value is None and site.decorated:
        value = Arg(ArgKind.LOCAL, Local(LocalKind.DEF, site.decorated))
    return target, value


def apply_function(ref: Reference, fn: DownstreamFunction, where: str) -> Reference:
    calls_orig = (
        ref.calls_original
        or ref.target in fn.upstream_calls
        or ref.target.rsplit(".", 1)[-1] in fn.super_calls
    )
    return replace(
        ref,
        signature=fn.signature,
        body_hash=fn.body_hash,
        calls_original=calls_orig,
        detail=f"{ref.detail} {where}".strip(),
        replacement=where if ref.kind is CouplingKind.MONKEYPATCH else ref.replacement,
    )


def local_function(
    binding: Local, functions: dict[str, DownstreamFunction]
) -> DownstreamFunction | None:
    """The def of this file a local binding denotes (``outer.f``, ``C.m``), if any."""
    return functions.get(binding.qualname)


def apply_local_patches(
    refs: list[Reference],
    local_patches: list[tuple[int, Local]],
    functions: dict[str, DownstreamFunction],
    path: str,
) -> None:
    """Give the references whose replacement is a def of this file that def's signature
    and body (a registration: only those; a class: its name in the detail)."""
    for idx, binding in local_patches:
        fn = local_function(binding, functions)
        if fn is not None and refs[idx].kind is CouplingKind.REGISTRATION:
            refs[idx] = replace(refs[idx], signature=fn.signature, body_hash=fn.body_hash)
        elif fn is not None:
            refs[idx] = apply_function(refs[idx], fn, f"{path}::{fn.qualname}")
        elif binding.kind is LocalKind.CLASS:
            refs[idx] = replace(refs[idx], detail=f"{refs[idx].detail} class {binding.qualname}")


def same_file_helper_patches(
    refs: list[Reference],
    calls: list[CallSite],
    helpers: dict[str, HelperSpec],
    functions: dict[str, DownstreamFunction],
    patch_values: list[tuple[int, str]],
    path: str,
) -> None:
    """Append a MONKEYPATCH reference per call of a patch helper of this file; a
    replacement defined in another module goes to ``patch_values`` (the tree resolves it)."""
    for site in calls:
        if type(site.callee) is not Local or site.callee.kind is not LocalKind.DEF:
            continue
        helper = site.callee.qualname
        spec = helpers.get(helper)
        if spec is None:
            continue
        got = helper_patch(site, spec, helper, path)
        if got is None:
            continue
        target, value = got
        ref = Reference(
            CouplingKind.MONKEYPATCH,
            target,
            path,
            site.line,
            site.snippet,
            detail=f"patch helper {helper}: value",
            owner=site.owner,
        )
        if value and value.kind is ArgKind.LOCAL:
            fn = local_function(value.value, functions)  # type: ignore[arg-type]
            if fn is not None:
                ref = replace(ref, detail=f"patch helper {helper}: replaced by")
                ref = apply_function(ref, fn, f"{path}::{fn.qualname}")
        elif value and value.kind is ArgKind.DOWNSTREAM:
            ref = replace(ref, detail=f"patch helper {helper}: replaced by")
            patch_values.append((len(refs), value.value))  # type: ignore[arg-type]
        refs.append(ref)


def base_mixin_patches(
    mixins: list[tuple[str, str, int, str | None]],
    functions: dict[str, DownstreamFunction],
    path: str,
    lines: list[str],
) -> list[Reference]:
    """The MONKEYPATCH references of ``U.__bases__ = (Mixin, ...)``: for each method
    ``Mixin.m``, one at the assignment (it installs the method on ``U`` and its
    subclasses) and one at the def (the code that replaces upstream's ``m`` there)."""
    out: list[Reference] = []
    for up, mixin, line, owner in mixins:
        short = up.rsplit(".", 1)[-1]
        for qual, fn in functions.items():
            if qual.rpartition(".")[0] != mixin:
                continue
            target = f"{up}.{qual.rsplit('.', 1)[-1]}"
            where = f"{path}::{qual}"
            at_bases = Reference(
                CouplingKind.MONKEYPATCH,
                target,
                path,
                line,
                line_snippet(lines, line),
                detail=f"bases: {mixin} put first in {short}'s bases: replaced by",
                owner=owner,
            )
            at_def = Reference(
                CouplingKind.MONKEYPATCH,
                target,
                path,
                fn.line,
                fn.snippet or line_snippet(lines, fn.line),
                detail=f"method of {mixin}, put first in {short}'s bases at :{line}: replaced by",
                owner=qual,
            )
            out += [apply_function(at_bases, fn, where), apply_function(at_def, fn, where)]
    return out
