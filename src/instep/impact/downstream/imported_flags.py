"""Flags set in a version check in one downstream module and branched on in another:
``from dicp.dynamo_bridge.compile_fx import is_torch_210`` … ``if is_torch_210:`` (or
``import pkg.flags as m`` … ``if m.IS_21:``) gates the branch with the condition the
setting module gives the flag (``version_refusals.version_flags``).

Two steps, so that a file's cached index depends on that file alone: indexing a file
(:func:`candidates`, :func:`split`) records every ``if NAME:`` whose name is imported
from a downstream module as a span with an :class:`ImportedFlag` placeholder; the tree
index (:func:`resolve_imported_flags`) looks the name up in the module it comes from and,
where that module sets it in a version check, turns the span into a ``version_flag`` gate
and re-gates the file's references inside it. A name the other module does not set in a
version check gates nothing. Nothing here reads a version or decides a gate.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace

from instep.impact.downstream.pruning import statements_in_walk_order
from instep.impact.downstream.records import DownstreamFileIndex, GateSpan
from instep.impact.downstream.version_gates import GateLookup, flag_name


@dataclass(frozen=True)
class ImportedFlag:
    """Placeholder predicate: the downstream name ``dotted`` is ``value`` (True/False)."""

    dotted: str
    value: bool


def candidates(
    tree: ast.Module,
    exports: Mapping[str, object],
    upstream_roots: tuple[str, ...],
    own: Mapping[str, object],
    statements: Iterable[ast.AST] | None = None,
) -> dict[str, tuple[ImportedFlag, ImportedFlag]]:
    """``if`` tests naming a module-level import from a downstream module (not one of
    ``upstream_roots``, not a flag this module sets itself): name as written -> placeholders.
    ``statements``: ``tree``'s, in ``statements_in_walk_order``, where the caller has them."""
    bound = {
        k: v
        for k, v in exports.items()
        if type(v) is str and k not in own and v.split(".", 1)[0] not in upstream_roots
    }
    if not bound:
        return {}
    out: dict[str, tuple[ImportedFlag, ImportedFlag]] = {}
    # ast.walk's order (the first ``if`` naming a flag gives its entry), statements only:
    # an ``if`` is never inside an expression
    for node in statements if statements is not None else statements_in_walk_order(tree):
        if type(node) is not ast.If:
            continue
        test = node.test
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            test = test.operand
        tests = test.values if isinstance(test, ast.BoolOp) else [test]
        for t in tests:
            name = flag_name(t)
            if name is None or name in out:
                continue
            head, _, rest = name.partition(".")
            target = bound.get(head)
            if target is not None:
                dotted = f"{target}.{rest}" if rest else target
                out[name] = (ImportedFlag(dotted, True), ImportedFlag(dotted, False))
    return out


def split(spans: list[GateSpan]) -> tuple[list[GateSpan], list[GateSpan]]:
    """The module's own gate spans, and the spans on imported flags (placeholders)."""
    own = [s for s in spans if not isinstance(s.gate.predicate, ImportedFlag)]
    if len(own) == len(spans):
        return spans, []
    return own, [s for s in spans if isinstance(s.gate.predicate, ImportedFlag)]


def _flag_of(
    dotted: str, by_module: Mapping[str, DownstreamFileIndex], resolve: Callable[[str], str]
) -> tuple[object, object] | None:
    """The (when true, when false) predicates of the module flag ``dotted`` denotes."""
    for name in dict.fromkeys((dotted, resolve(dotted))):
        mod, _, attr = name.rpartition(".")
        f = by_module.get(mod)
        if f is not None and attr in f.flags:
            return f.flags[attr]
    return None


def resolve_imported_flags(
    files: dict[str, DownstreamFileIndex], resolve: Callable[[str], str]
) -> dict[str, DownstreamFileIndex]:
    """``files`` with each imported-flag span that names a version flag of another
    downstream module made a gate (the module's predicates) of the importing file: added
    to its ``gate_spans`` and ``gates``, and carried by its references and pending uses
    where it is the innermost gate of their line. Files are copied, never changed."""
    by_module = {f.module: f for f in files.values()}
    out = dict(files)
    for path, f in files.items():
        if not f.flag_uses:
            continue
        made: list[GateSpan] = []
        for s in f.flag_uses:
            p = s.gate.predicate
            preds = _flag_of(p.dotted, by_module, resolve)  # type: ignore[union-attr]
            if preds is not None:
                pred = preds[0] if p.value else preds[1]  # type: ignore[union-attr]
                made.append(replace(s, gate=replace(s.gate, predicate=pred)))
        if not made:
            continue
        spans = sorted([*f.gate_spans, *made], key=lambda s: (s.start, -s.end))
        new_gates = [s.gate for s in made]
        old_at, new_at = GateLookup(f.gate_spans).at, GateLookup(spans).at

        def regate(r, old_at=old_at, new_at=new_at, new_gates=new_gates):
            g = new_at(r.line)
            if g is None or g not in new_gates or (r.gate is not None and r.gate != old_at(r.line)):
                return r  # not under an imported flag, or gated by its own fallback import
            return replace(r, gate=g)

        out[path] = replace(
            f,
            gate_spans=spans,
            gates=[s.gate for s in spans],
            references=[regate(r) for r in f.references],
            pending=[regate(r) for r in f.pending],
        )
    return out
