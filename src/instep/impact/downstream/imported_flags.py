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

The same two steps for a version helper defined in another downstream module: ``if
newer("2.10"):`` / ``elif not vu.newer("2.10"):`` on an imported name, a def's local
name bound once to such a call (``new = newer("2.10")`` … ``if new:``), or a conjunction
with other tests (``if newer("2.10") and x:``, the body only) is recorded with an
:class:`ImportedHelper` placeholder (:func:`helper_candidates`); the tree index reads the
helper's definition (``version_conditions.version_helpers`` of the defining module,
whatever the helper's name) and makes the span a ``version_compare`` gate, drops it where
the helper never reads the torch version (a CANN or driver version), and keeps the name
reading (``is_torch_version_ge``) only where the definition is not in the tree (a helper
of another installed package).
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace

from instep.impact.downstream.pruning import statements_in_walk_order
from instep.impact.downstream.records import DownstreamFileIndex, GateSpan
from instep.impact.downstream.version_conditions import (
    Conditions,
    Range,
    Version,
    call_versions,
    negate,
)
from instep.impact.downstream.version_gates import GateLookup, flag_name


@dataclass(frozen=True)
class ImportedFlag:
    """Placeholder predicate: the downstream name ``dotted`` is ``value`` (True/False)."""

    dotted: str
    value: bool


@dataclass(frozen=True)
class ImportedHelper:
    """Placeholder predicate: the downstream helper ``dotted`` called with these literal
    versions (by position, by keyword), negated when ``negated``; ``fallback``: the range
    the helper's name gives (None: none), used where its definition is not in the tree."""

    dotted: str
    args: tuple[Version | None, ...]
    kwargs: tuple[tuple[str, Version | None], ...]
    negated: bool
    fallback: Range | None

    def range_in(
        self, by_module: Mapping[str, DownstreamFileIndex], resolve: Callable[[str], str]
    ) -> Range | None:
        for name in dict.fromkeys((self.dotted, resolve(self.dotted))):
            mod, _, attr = name.rpartition(".")
            f = by_module.get(mod)
            if f is None:
                continue
            spec = f.version_helpers.get(attr)
            if spec is not None:
                rng = spec.range_for(self.args, self.kwargs)
                return negate(rng) if rng is not None and self.negated else rng
            if attr in f.not_version_helpers:
                return None  # compares another package's version, whatever its name
        return self.fallback


def downstream_bindings(
    exports: Mapping[str, object], upstream_roots: tuple[str, ...], own: Mapping[str, object]
) -> dict[str, str]:
    """Module-level names imported from a module that is not one of ``upstream_roots``
    (nor a flag the module sets itself): name -> the dotted name it binds."""
    return {
        k: v
        for k, v in exports.items()
        if type(v) is str and k not in own and v.split(".", 1)[0] not in upstream_roots
    }


def helper_candidates(
    bound: Mapping[str, str], statements: Iterable[ast.AST]
) -> dict[int, tuple[ImportedHelper, ImportedHelper | None]]:
    """``if``/``elif`` tests calling a version helper imported from a downstream module
    (``bound``, :func:`downstream_bindings`): ``id`` of the ``if`` -> placeholders for its
    body and for its ``else`` / the code after an early exit. The test is ``f(<version>)``
    or ``not m.f(<version>)``, a local name a def binds once to such a call (``new =
    f("2.10")`` … ``if not new:``), or a conjunction with one of them among other tests
    (``if f("2.10") and x:``): then the helper is necessary for the body, not sufficient,
    and the other side is None (not gated)."""
    out: dict[int, tuple[ImportedHelper, ImportedHelper | None]] = {}
    if not bound:
        return out
    statements = list(statements)
    aliases = _helper_aliases(bound, statements)
    for node in statements:
        if type(node) is not ast.If:
            continue
        local = aliases.get(id(node), {})
        test, neg = node.test, False
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            test, neg = test.operand, True
        partial = False
        if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) and not neg:
            found = next(
                (h for h in (_helper_test(v, bound, local) for v in test.values) if h), None
            )
            partial = True
        else:
            found = _helper_test(test, bound, local)
        if found is None:
            continue
        call, neg_call, dotted = found
        neg = neg != neg_call
        args, kwargs = call_versions(call)
        named = Conditions()._helper_call(call)  # the name reading, for no definition
        body = negate(named) if named is not None and neg else named
        other = negate(body) if body is not None else None
        out[id(node)] = (
            ImportedHelper(dotted, args, kwargs, neg, body),
            None if partial else ImportedHelper(dotted, args, kwargs, not neg, other),
        )
    return out


def _helper_test(
    test: ast.expr, bound: Mapping[str, str], local: Mapping[str, ast.expr]
) -> tuple[ast.Call, bool, str] | None:
    """(the call, whether negated, the helper's dotted name) of ``f(<version>)``, ``not
    m.f(<version>)`` or a local name bound to one; None for any other test."""
    neg = False
    for _ in range(3):
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            test, neg = test.operand, not neg
        elif isinstance(test, ast.Name) and test.id in local:
            test = local[test.id]
        else:
            break
    if not isinstance(test, ast.Call):
        return None
    name = flag_name(test.func)
    if name is None:
        return None
    head, _, rest = name.partition(".")
    target = bound.get(head)
    if target is None:
        return None
    args, kwargs = call_versions(test)
    if not any(args) and not any(v for _, v in kwargs):
        return None
    return test, neg, f"{target}.{rest}" if rest else target


_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)
_SCOPES = (*_DEFS, ast.ClassDef, ast.Lambda)


def _helper_aliases(
    bound: Mapping[str, str], statements: list[ast.AST]
) -> dict[int, dict[str, ast.expr]]:
    """``id`` of an ``if`` -> the local names of its def bound once, and only, to a helper
    call (``new = f("2.10")`` or ``not f(...)``): no parameter, no ``global``, no other
    binding anywhere in the def (a loop, a ``with``, a second assignment, an import)."""
    assigned = [
        n
        for n in statements
        if type(n) is ast.Assign
        and len(n.targets) == 1
        and type(n.targets[0]) is ast.Name
        and _helper_test(n.value, bound, {}) is not None
    ]
    if not assigned:
        return {}
    lines = {n.lineno for n in assigned}
    ids = {id(n) for n in assigned}
    out: dict[int, dict[str, ast.expr]] = {}
    for fn in statements:
        if not isinstance(fn, _DEFS) or not any(
            fn.lineno <= x <= (fn.end_lineno or fn.lineno) for x in lines
        ):
            continue
        stores: dict[str, int] = {}
        values: dict[str, ast.expr] = {}
        ifs: list[ast.If] = []
        args = fn.args
        for a in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg):
            if a is not None:
                stores[a.arg] = 2
        stack: list[ast.AST] = list(fn.body)
        while stack:
            n = stack.pop()
            t = type(n)
            if t is ast.Name and type(n.ctx) is not ast.Load:  # type: ignore[attr-defined]
                stores[n.id] = stores.get(n.id, 0) + 1  # type: ignore[attr-defined]
                continue
            if t in (ast.Global, ast.Nonlocal):
                for name in n.names:  # type: ignore[attr-defined]
                    stores[name] = 2
            elif t in (ast.Import, ast.ImportFrom):
                for alias in n.names:  # type: ignore[attr-defined]
                    stores[(alias.asname or alias.name).split(".")[0]] = 2
            elif t is ast.ExceptHandler and n.name:  # type: ignore[attr-defined]
                stores[n.name] = 2  # type: ignore[attr-defined]
            elif t is ast.If:
                ifs.append(n)  # type: ignore[arg-type]
            elif t is ast.Assign and id(n) in ids:
                values[n.targets[0].id] = n.value  # type: ignore[attr-defined]
            if isinstance(n, _SCOPES):
                if not isinstance(n, ast.Lambda):
                    stores[n.name] = 2  # type: ignore[attr-defined]
                continue  # its own names are its own
            stack.extend(ast.iter_child_nodes(n))
        local = {k: v for k, v in values.items() if stores.get(k) == 1}
        if local:
            for n in ifs:
                out[id(n)] = local
    return out


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
    bound = downstream_bindings(exports, upstream_roots, own)
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
    placeholders = (ImportedFlag, ImportedHelper)
    own = [s for s in spans if not isinstance(s.gate.predicate, placeholders)]
    if len(own) == len(spans):
        return spans, []
    return own, [s for s in spans if isinstance(s.gate.predicate, placeholders)]


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
            if isinstance(p, ImportedHelper):
                rng = p.range_in(by_module, resolve)
                if rng is not None:
                    gate = replace(s.gate, predicate=None, min_version=rng[0], max_version=rng[1])
                    made.append(replace(s, gate=gate))
                continue
            preds = _flag_of(p.dotted, by_module, resolve)  # type: ignore[union-attr]
            if preds is not None:
                pred = preds[0] if p.value else preds[1]  # type: ignore[union-attr]
                made.append(replace(s, gate=replace(s.gate, predicate=pred)))
        if not made:
            continue
        out[path] = add_gate_spans(f, made)
    return out


def add_gate_spans(
    f: DownstreamFileIndex, made: list[GateSpan], listed: bool = True
) -> DownstreamFileIndex:
    """A copy of ``f`` with the spans ``made`` added to its ``gate_spans`` (and to its
    ``gates``, the compat-debt list, when ``listed``), each carried by the references and
    pending uses whose innermost gate it now is: not one that another gate of their own
    already guards more closely (its own fallback import)."""
    spans = sorted([*f.gate_spans, *made], key=lambda s: (s.start, -s.end))
    new_gates = [s.gate for s in made]
    old_at, new_at = GateLookup(f.gate_spans).at, GateLookup(spans).at

    def regate(r):
        g = new_at(r.line)
        if g is None or g not in new_gates or (r.gate is not None and r.gate != old_at(r.line)):
            return r
        return replace(r, gate=g)

    return replace(
        f,
        gate_spans=spans,
        gates=[s.gate for s in spans] if listed else f.gates,
        references=[regate(r) for r in f.references],
        pending=[regate(r) for r in f.pending],
    )
