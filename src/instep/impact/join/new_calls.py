"""The pass that finds new upstream calls a downstream replacement always rejected.

A downstream override or patch may have never fitted the upstream method it replaces:
torch-npu 2.14.0 puts ``NPUDeviceBenchmarkMixin`` first in the bases of upstream's
``ExternKernelGPUBenchmarkRequest`` (``autotune_process.py:38``), and its
``do_bench(self, fn, *input_tensors, output_tensor=None)`` (:45) replaces upstream's
``do_bench(self, fn, *input_tensors, out=None)``, which has not changed. torch 2.14.1
called it ``self.do_bench(fn, *input_tensors, out)`` (the tensor lands in
``input_tensors``); torch 2.15.0's new ``benchmark_run_fn`` calls it with ``out=out``: a
TypeError. No signature changed, so the signature rules never look; the change that
breaks is the *caller*'s.

:class:`NewCallPass`, for every override or patch of a method or function (with its
signature) that rejects a keyword the upstream definition accepts (``does not accept
keyword 'out'``), finds the new-upstream calls of the name that pass that keyword and
that upstream's signature binds, keeps those in a def the diff added, or changed so that
its old body passed the keyword in no call of the name, and follows each to the
replacement as the breaking-path search does (:func:`~instep.impact.join.breaking_path.
follow`: receivers, replaced callers, conditions the backend never meets, patches
installed off by default). A call that reaches it is a coupling of the caller's change:
``call.new_breaking_call`` (Shim), or ``call.new_conditional_call`` (Test) when it runs
only under such a condition. Replacements whose upstream method changed its signature
are left to the signature rules; a positional mismatch is not looked for (a call with
more positionals names no keyword to find it by). Static only: nothing is imported or run.
"""

from __future__ import annotations

import ast
import textwrap
from collections.abc import Mapping

from instep.impact.join import breaking_path
from instep.impact.join.fact_names import Fact
from instep.impact.join.pass_api import Findings, Found, JoinInputs, JoinPass
from instep.impact.join.upstream_calls import CallSite
from instep.impact.model import ChangeKind, CouplingKind, Reference, Stage, SymbolChange
from instep.pyindex.model import Symbol, SymbolKind
from instep.pyindex.signatures import call_problems, incompatibilities, parse_params

_KINDS = (CouplingKind.MONKEYPATCH, CouplingKind.SUBCLASS_OVERRIDE)
_DEFS = (SymbolKind.FUNCTION, SymbolKind.METHOD)
_KEYWORD = "does not accept keyword '"
_PARAMETER = "does not accept '"


class NewCallPass(JoinPass):
    """monkeypatch and subclass_override couplings of a caller's change: a new call
    passes a keyword the replacement never accepted."""

    name = "new calls"
    kinds = frozenset(_KINDS)

    def run(self, inputs: JoinInputs, earlier: Mapping[str, Findings]) -> Findings:
        found: list[Found] = []
        for ref in inputs.references:
            if ref.kind in _KINDS and ref.signature is not None:
                found.extend(self._of(inputs, ref))
        return Findings(found, stats={"new_breaking_calls": len(found)})

    def _of(self, inputs: JoinInputs, ref: Reference) -> list[Found]:
        replaced = _replaced(inputs, ref)
        if replaced is None:
            return []
        change, signature = replaced
        method = change.symbol_kind is SymbolKind.METHOD
        rejected = _rejected_keywords(ref.signature or "", signature, method)
        if not rejected:
            return []
        out: list[Found] = []
        member = change.qualname.rsplit(".", 1)[-1]
        if member.startswith("__"):
            return []  # constructions and protocol calls name no method: constructor rules
        for site in inputs.calls.sites(member, keywords=tuple(sorted(rejected))):
            passed = sorted(set(site.keywords) & rejected)
            if not passed or not _binds(site, signature, method):
                continue
            caller = _new_in_diff(inputs, site, member, passed)
            if caller is None:
                continue
            verdict = breaking_path.follow(inputs, change, ref, ref.kind, site, passed)
            fact = _FACTS.get(verdict.kind)
            if fact is None:
                continue
            unit, caller_change, how = caller
            what = ", ".join(f"`{k}=`" for k in passed)
            evidence = (
                f"{verdict.text}; {ref.path}:{ref.line} ({ref.signature}) never accepted "
                f"{what}, which upstream's `{change.qualname}` takes; the call is new: "
                f"`{caller_change.qualname}` {how}"
            )
            out.append(
                Found(
                    unit,
                    caller_change,
                    ref,
                    ref.kind,
                    chain=[caller_change.ref, f"calls {change.dotted}", f"{ref.kind} at {ref.at}"],
                    detail=f"{ref.detail}; a new call passes {what}",
                    extra=frozenset({fact}),
                    evidence=evidence,
                )
            )
        return out


# what the breaking-path search found for the call -> the fact of this pass's coupling
_FACTS: dict[str, Fact] = {}
_FACTS[Fact.BREAKING_PATH] = Fact.NEW_BREAKING_CALL
_FACTS[Fact.BREAKING_CALL_CONDITIONAL] = Fact.NEW_CALL_CONDITIONAL
_FACTS[Fact.BREAKING_CALL_NEW_PATH] = Fact.NEW_CALL_NEW_PATH


def _replaced(inputs: JoinInputs, ref: Reference) -> tuple[SymbolChange, str] | None:
    """The upstream definition ``ref`` replaces, as an unchanged :class:`SymbolChange`
    named where the replacement sits (a patched ``U.m`` is named ``U.m`` even when ``U``
    inherits ``m``; an override is named by the class that defines ``m``), and its
    signature in the new upstream; None when it is not a def, or its signature changed."""
    r = inputs.resolver
    owner, _, member = ref.target.rpartition(".")
    cls = r.class_of(r.resolve(owner)) if owner else None  # the class the place names
    if cls is not None:
        defined = r.find_member(*cls, member)
        if defined is None:
            return None
        where = (
            cls if ref.kind is CouplingKind.MONKEYPATCH else r.class_of(defined.rpartition(".")[0])
        )
    else:
        defined, where = r.resolve(ref.target), None
    module, qualname = r.split(defined)
    idx = r.index(module) if module else None
    sym = idx.symbols.get(qualname) if idx is not None else None  # type: ignore[attr-defined]
    if (
        sym is None
        or sym.signature is None
        or sym.kind not in (SymbolKind.FUNCTION, SymbolKind.METHOD)
    ):
        return None
    if any(ChangeKind.SIGNATURE in c.aspects for _, c in inputs.changes.by_dotted.get(defined, ())):
        return None  # the signature rules judge it
    if where is not None:
        path = r.module_paths.get(where[0], sym.path)
        qualname = f"{where[1]}.{member}"
    else:
        path = sym.path
    named = Symbol(path, qualname, sym.kind, sym.line, sym.end_line, signature=sym.signature)
    change = SymbolChange(path, qualname, ChangeKind.BODY, sym.kind, Stage.OTHER, named, named)
    return change, sym.signature


def _rejected_keywords(replacement: str, upstream: str, method: bool) -> frozenset[str]:
    """The parameters upstream's signature takes by keyword that the replacement
    rejects by keyword."""
    out = set()
    for p in incompatibilities(replacement, upstream, method=method):
        for lead in (_KEYWORD, _PARAMETER):
            if p.startswith(lead):
                out.add(p[len(lead) :].split("'", 1)[0])
    up = parse_params(upstream)
    return frozenset(k for k in out if up is not None and k in up.names)


def _binds(site: CallSite, signature: str, method: bool) -> bool:
    """Does the call bind to upstream's signature (with unpacked arguments: does it
    take every keyword the call names)?"""
    got = call_problems(site.shape, signature, method=method)
    if got is not None:
        return got == []
    params = parse_params(signature)
    return params is not None and (params.varkw or set(site.keywords) <= params.names)


def _new_in_diff(
    inputs: JoinInputs, site: CallSite, member: str, passed: list[str]
) -> tuple[int, SymbolChange, str] | None:
    """The change of the def holding ``site`` when that def is added, or changed and its
    old body passed none of ``passed`` to a call of ``member``; with how it is new."""
    if site.caller is None:
        return None
    for unit, change in inputs.changes.by_dotted.get(f"{site.module}.{site.caller}", ()):
        if change.kind is ChangeKind.ADDED:
            return unit, change, "is added"
        if change.old is None or not change.aspects & {ChangeKind.BODY, ChangeKind.SIGNATURE}:
            continue
        old, _ = inputs.lines_of(inputs.units[unit], change)
        if old is not None and not _passed_before(old, change.old, member, passed):
            return unit, change, "changed: its old body passed none of them"
    return None


def _passed_before(lines: list[str], old: Symbol, member: str, passed: list[str]) -> bool:
    """Did the old def pass one of ``passed`` to a call of ``member``? (True when its
    text does not parse: nothing is claimed new.)"""
    text = textwrap.dedent("\n".join(lines[old.line - 1 : old.end_line]))
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return True
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)
        if name == member and {k.arg for k in node.keywords} & set(passed):
            return True
    return False
