"""Recognise version gates in downstream code and decide which gated code is compat debt.

A downstream that supports several torch versions from one tree keeps its adaptations
behind *gates*: comparisons with a version constant (``if CURRENT_VERSION >= (2, 14):``,
``torch.__version__ >= "2.14"``, ``Version(torch.__version__) >= Version("2.14")``,
``is_torch_version_ge("2.14")``, module constants holding such comparisons), early
returns (``if CURRENT_VERSION >= (2, 15): return`` gates the rest of the block the other
way), ``hasattr`` probes, ``try: import ... except ImportError:`` and comment markers
(``# COMPAT(>= 2.14): upstream pytorch#NNNN ... CAN REMOVE when MIN_SUPPORTED >= (2, 15)``,
attached to the statement that follows). Each gate becomes a :class:`VersionGate` with
the line span it guards; the ``else`` branch of a version gate is gated the other way.

Static only: nothing is evaluated; a condition that is not recognisably about the torch
version is not a gate. This module does not decide whether a coupling is already
adapted (the verdict rules do, from the gate attached to a reference).
"""

from __future__ import annotations

import ast
import bisect
import re
from collections.abc import Callable, Iterable

from instep.impact.downstream import source_probes
from instep.impact.downstream.records import GateSpan
from instep.impact.downstream.version_conditions import (
    Conditions,
    HelperSpec,
    Range,
    Version,
    bump,
    fmt_version,
    literal_version,
    negate,
    parse_version,
    version_helpers,
)
from instep.impact.model import VersionGate
from instep.pyindex.registrations import dotted_name

_COMPAT = re.compile(r"#\s*COMPAT\s*\(\s*(>=|<=|>|<|==)?\s*([^)]*)\)\s*:?(.*)")
_PR = re.compile(r"pytorch\s*#\s*(\d+)|pytorch/pull/(\d+)", re.IGNORECASE)
_CAN_REMOVE = re.compile(
    r"CAN\s+REMOVE.*?MIN_SUPPORTED\w*\s*>=\s*\(?\s*(\d+)\s*[,.]\s*(\d+)", re.IGNORECASE
)
_MAY_GATE = re.compile(
    r"(?i)version|hasattr|ImportError|COMPAT|torch_(?:ge|gt|lt|le|equal)|getsource|\)\.parameters"
)
# the same words in lower case, searched in the lowered source: several times faster than
# an ignore-case search, and the same answer for ASCII text
_MAY_GATE_LOWER = re.compile(
    r"version|hasattr|importerror|compat|torch_(?:ge|gt|lt|le|equal)|getsource|\)\.parameters"
)


def may_gate(source: str) -> bool:
    """Whether ``source`` may hold a gate of its own (a cheap text test)."""
    if _MAY_GATE_LOWER.search(source.lower()):
        return True
    return not source.isascii() and _MAY_GATE.search(source) is not None


_PLAIN_VERSION = re.compile(r"\d+(?:\.\d+)+")
_MIN_SUPPORTED = re.compile(r"^MIN_SUPPORTED\w*$")


def _gate(path: str, line: int, condition: str, kind: str, rng: Range | None, **kw) -> VersionGate:
    lo, hi = rng if rng else (None, None)
    return VersionGate(path, line, condition, kind, lo, hi, **kw)


def _block_end(stmts: list[ast.stmt]) -> int:
    return max(getattr(stmts[-1], "end_lineno", stmts[-1].lineno) or stmts[-1].lineno, 0)


def _is_exit(stmts: list[ast.stmt]) -> bool:
    return len(stmts) == 1 and isinstance(stmts[0], (ast.Return, ast.Raise, ast.Continue))


def _hasattr_probe(test: ast.AST) -> tuple[bool, str] | None:
    """``hasattr(x, "y")`` or ``not hasattr(...)`` -> (negated, text)."""
    neg = False
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        neg, test = True, test.operand
    if (
        isinstance(test, ast.Call)
        and isinstance(test.func, ast.Name)
        and test.func.id == "hasattr"
        and len(test.args) == 2
    ):
        return neg, ""
    return None


def catches_import_error(handler: ast.ExceptHandler) -> bool:
    """``except ImportError`` / ``ModuleNotFoundError`` (alone or in a tuple): the fallback
    of an import that may be missing from the installed torch."""
    t = handler.type
    for n in t.elts if isinstance(t, ast.Tuple) else [t] if t is not None else []:
        name = n.id if isinstance(n, ast.Name) else getattr(n, "attr", None)
        if name in ("ImportError", "ModuleNotFoundError"):
            return True
    return False


def _walk_blocks(tree: ast.AST):
    """Every statement list of the tree (module, def and class bodies, branches)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                yield block
                stack.extend(block)
        for h in getattr(node, "handlers", ()) or ():
            yield h.body
            stack.extend(h.body)
        for case in getattr(node, "cases", ()) or ():
            yield case.body
            stack.extend(case.body)


def gate_spans(
    tree: ast.Module,
    path: str,
    source: str,
    flags: dict[str, tuple[object, object]] | None = None,
    statements: Iterable[ast.AST] | None = None,
    helper_calls: dict[int, tuple[object, object]] | None = None,
    helpers: tuple[dict[str, HelperSpec], set[str]] | None = None,
) -> list[GateSpan]:
    """All gates of a module with the line span each guards (outermost first). ``flags``:
    names the module (or one it imports from) set in a version check, with the conditions
    under which each is true and false (``version_refusals.version_flags``, predicates
    this module does not read): ``if FLAG:`` is gated by them. ``statements``: ``tree``'s
    in ``pruning.statements_in_walk_order``, where the caller has them. ``helper_calls``:
    ``if`` statements (by ``id``) calling a version helper imported from another
    downstream module, with the placeholder predicates of their body and other side
    (``imported_flags.helper_candidates``, resolved by the tree index); ``helpers``: the
    module's own (``version_conditions.version_helpers``), where the caller has them."""
    if not flags and not helper_calls and not may_gate(source):
        return []
    conds = Conditions()
    conds.flags = dict(flags or {})
    conds.helpers, conds.not_helpers = helpers if helpers is not None else version_helpers(tree)
    conds.helper_calls = helper_calls or {}
    for stmt in tree.body:  # module constants: IS_TORCH_214 = CURRENT_VERSION >= (2, 14)
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            rng = conds.range_of(stmt.value)
            if rng is not None:
                for t in targets:
                    if isinstance(t, ast.Name):
                        conds.constants[t.id] = rng
    if "getsource" in source or "_C" in source or ").parameters" in source:
        conds.probes = source_probes.ProbeReader(tree, conds, statements)
    spans: list[GateSpan] = []
    stmt_starts: dict[int, ast.stmt] = {}
    for block in _walk_blocks(tree):
        for i, stmt in enumerate(block):
            stmt_starts.setdefault(stmt.lineno, stmt)
            if isinstance(stmt, ast.If):
                _if_gates(stmt, block[i + 1 :], conds, path, spans)
            elif isinstance(stmt, ast.Try) or type(stmt).__name__ == "TryStar":
                _try_gates(stmt, path, spans)
    if "COMPAT" in source:
        _comment_gates(source, path, stmt_starts, spans)
    spans.sort(key=lambda s: (s.start, -s.end))
    return spans


def _if_gates(
    stmt: ast.If, rest: list[ast.stmt], conds: Conditions, path: str, spans: list[GateSpan]
) -> None:
    placeholders = conds.helper_calls.get(id(stmt))
    if placeholders is not None:
        _placeholder_if_gates(stmt, rest, placeholders, path, spans)
        return
    probe = conds.probes.gate_test(stmt.test) if conds.probes is not None else None
    if probe is not None:
        _probe_if_gates(stmt, probe, path, spans)
        return
    rng = conds.range_of(stmt.test)
    partial = (
        rng is not None
        and isinstance(stmt.test, ast.BoolOp)
        and any(conds.range_of(v) is None for v in stmt.test.values)
    )  # `flag and torch >= 2.9`: the version is necessary, not sufficient
    probe = _hasattr_probe(stmt.test) if rng is None else None
    text = ast.unparse(stmt.test)
    if len(text) > 200:
        text = text[:197] + "..."
    if rng is None and probe is None and isinstance(stmt.test, ast.BoolOp):
        # `if not newer("2.10") or newer("2.11"): return`: no one range holds the body,
        # one holds the other way (2.10 up to 2.11)
        neg = conds.range_of(ast.UnaryOp(op=ast.Not(), operand=stmt.test))
        if neg is not None and (neg[0] is not None or neg[1] is not None):
            _version_other_way(stmt, rest, neg, text, path, spans)
            return
    if rng is None and probe is None:
        _flag_if_gates(stmt, rest, conds.flags, path, spans)
        return
    if rng is not None:
        _version_if_gates(stmt, rest, rng, partial, text, path, spans)
    elif probe is not None:
        _hasattr_if_gates(stmt, probe[0], text, path, spans)


def _other_way_spans(
    stmt: ast.If,
    rest: list[ast.stmt],
    text: str,
    other: object,
    gate: Callable[[str, object, str], VersionGate],
    spans: list[GateSpan],
) -> None:
    """The spans where ``if <text>:`` decided the other way: its ``else`` branch, and the
    code after it when its body always leaves (an early exit)."""
    if stmt.orelse:
        spans.append(
            GateSpan(
                gate(f"not ({text})", other, "else"), stmt.orelse[0].lineno, _block_end(stmt.orelse)
            )
        )
    if _is_exit(stmt.body) and rest:
        spans.append(
            GateSpan(
                gate(f"not ({text})", other, "after early exit"), rest[0].lineno, _block_end(rest)
            )
        )


def _placeholder_if_gates(
    stmt: ast.If,
    rest: list[ast.stmt],
    placeholders: tuple[object, object],
    path: str,
    spans: list[GateSpan],
) -> None:
    """``if helper(X):`` on a helper imported from another downstream module: the body,
    the ``else`` branch and the code after an early exit, with placeholder predicates the
    tree index turns into version ranges (or drops). No other side (``if helper(X) and
    y:``): the body only, its gate ``partial`` (the helper necessary, not sufficient)."""
    text = ast.unparse(stmt.test)
    text = text if len(text) <= 200 else text[:197] + "..."
    body, other = placeholders

    def gate(cond: str, p: object, note: str = "") -> VersionGate:
        return _gate(path, stmt.lineno, cond, "version_compare", None, note=note, predicate=p)

    note = "partial" if other is None else ""
    spans.append(GateSpan(gate(text, body, note), stmt.body[0].lineno, _block_end(stmt.body)))
    if other is not None:
        _other_way_spans(stmt, rest, text, other, gate, spans)


def _version_if_gates(
    stmt: ast.If,
    rest: list[ast.stmt],
    rng: Range,
    partial: bool,
    text: str,
    path: str,
    spans: list[GateSpan],
) -> None:
    """``if torch >= X``: the body, the else branch, and the code after an early exit."""
    spans.append(
        GateSpan(
            _gate(
                path,
                stmt.lineno,
                text,
                "version_compare",
                rng,
                note="partial" if partial else "",
            ),
            stmt.body[0].lineno,
            _block_end(stmt.body),
        )
    )
    neg = None if partial else negate(rng)
    if neg is not None:
        _version_other_way(stmt, rest, neg, text, path, spans)


def _version_other_way(
    stmt: ast.If, rest: list[ast.stmt], neg: Range, text: str, path: str, spans: list[GateSpan]
) -> None:
    """The ``else`` branch and the code after an early exit of ``if <text>:``, gated by
    ``neg``, the range where the test is false."""
    if stmt.orelse:
        spans.append(
            GateSpan(
                _gate(path, stmt.lineno, f"not ({text})", "version_compare", neg, note="else"),
                stmt.orelse[0].lineno,
                _block_end(stmt.orelse),
            )
        )
    if _is_exit(stmt.body) and rest:  # early return guard
        spans.append(
            GateSpan(
                _gate(
                    path,
                    stmt.lineno,
                    f"not ({text})",
                    "version_compare",
                    neg,
                    note="after early exit",
                ),
                rest[0].lineno,
                _block_end(rest),
            )
        )


# ``FLAG`` or ``mod.FLAG`` (a chain of names) as written, else None
flag_name = dotted_name


def _flag_if_gates(
    stmt: ast.If,
    rest: list[ast.stmt],
    flags: dict[str, tuple[object, object]],
    path: str,
    spans: list[GateSpan],
) -> None:
    """``if FLAG:`` / ``if not FLAG:`` for a flag set in a version check: the body (and the
    ``else`` branch, and the code after an early exit, the other way) carry the flag's
    predicate. ``if FLAG and other:`` gates the body only (the flag is necessary there)."""
    test, neg = stmt.test, False
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        test, neg = test.operand, True
    partial = False
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) and not neg:
        named = [v for v in test.values if flag_name(v) in flags]
        if not named:
            return
        test, partial = named[0], True
    name = flag_name(test)
    if name is None or name not in flags:
        return
    when_true, when_false = flags[name]
    text = ast.unparse(stmt.test)
    text = text if len(text) <= 200 else text[:197] + "..."
    body, other = (when_false, when_true) if neg else (when_true, when_false)

    def gate(cond: str, p: object, note: str = "") -> VersionGate:
        return _gate(path, stmt.lineno, cond, "version_flag", None, note=note, predicate=p)

    spans.append(
        GateSpan(
            gate(text, body, "partial" if partial else ""),
            stmt.body[0].lineno,
            _block_end(stmt.body),
        )
    )
    if partial:
        return
    _other_way_spans(stmt, rest, text, other, gate, spans)


def _probe_if_gates(stmt: ast.If, probe, path: str, spans: list[GateSpan]) -> None:
    """``if "x" in inspect.getsource(f)`` / ``if hasattr(torch._C, "_x")``: body and else."""
    text = ast.unparse(stmt.test)
    text = text if len(text) <= 200 else text[:197] + "..."
    gate = source_probes.probe_gate(path, stmt.lineno, text, probe, "probe")
    spans.append(GateSpan(gate, stmt.body[0].lineno, _block_end(stmt.body)))
    neg = source_probes.negated(probe)
    if stmt.orelse and neg is not None:
        other = source_probes.probe_gate(path, stmt.lineno, f"not ({text})", neg, "else")
        spans.append(GateSpan(other, stmt.orelse[0].lineno, _block_end(stmt.orelse)))


def _hasattr_if_gates(stmt: ast.If, neg: bool, text: str, path: str, spans: list[GateSpan]) -> None:
    """``if hasattr(upstream, "x")``: the body and the else branch."""
    spans.append(
        GateSpan(
            _gate(path, stmt.lineno, text, "hasattr", None, note="absent" if neg else "present"),
            stmt.body[0].lineno,
            _block_end(stmt.body),
        )
    )
    if stmt.orelse:
        spans.append(
            GateSpan(
                _gate(
                    path,
                    stmt.lineno,
                    f"not ({text})",
                    "hasattr",
                    None,
                    note="present" if neg else "absent",
                ),
                stmt.orelse[0].lineno,
                _block_end(stmt.orelse),
            )
        )


def _try_gates(stmt: ast.stmt, path: str, spans: list[GateSpan]) -> None:
    handlers = [h for h in stmt.handlers if catches_import_error(h)]  # type: ignore[attr-defined]
    body = stmt.body  # type: ignore[attr-defined]
    if not handlers or not any(isinstance(s, (ast.Import, ast.ImportFrom)) for s in body):
        return
    imports = [s for s in body if isinstance(s, (ast.Import, ast.ImportFrom))]
    text = "try: " + ast.unparse(imports[0])
    if len(text) > 200:
        text = text[:197] + "..."
    failed = {"note": "import failed", "requires": tuple(_imported_targets(imports))}
    # what the handlers import at their top level (a nested try is guarded on its own)
    fallback = _imported_targets(
        [s for h in handlers for s in h.body if isinstance(s, (ast.Import, ast.ImportFrom))]
    )
    spans.append(
        GateSpan(
            _gate(
                path,
                stmt.lineno,
                text,
                "try_import",
                None,
                note="import available",
                fallback=tuple(fallback),
            ),
            body[0].lineno,
            _block_end(body),
        )
    )
    for h in handlers:
        fallback = _gate(path, h.lineno, text, "try_import", None, **failed)
        spans.append(GateSpan(fallback, h.body[0].lineno, _block_end(h.body)))


def _imported_targets(imports: list[ast.Import | ast.ImportFrom]) -> list[str]:
    """Absolute dotted names an import list asks for (relative imports are the
    downstream's own modules: left out)."""
    out: list[str] = []
    for imp in imports:
        if isinstance(imp, ast.Import):
            out.extend(a.name for a in imp.names)
        elif imp.level == 0 and imp.module:
            out.extend(f"{imp.module}.{a.name}" for a in imp.names if a.name != "*")
    return out


def _comment_gates(
    source: str, path: str, stmt_starts: dict[int, ast.stmt], spans: list[GateSpan]
) -> None:
    lines = source.splitlines()
    starts = sorted(stmt_starts)
    i = 0
    while i < len(lines):
        m = _COMPAT.search(lines[i])
        if not m or not lines[i].lstrip().startswith("#"):
            i += 1
            continue
        first = i
        block = [lines[i].strip()]
        i += 1
        while i < len(lines) and lines[i].lstrip().startswith("#"):
            if _COMPAT.search(lines[i]):
                break
            block.append(lines[i].strip())
            i += 1
        text = " ".join(b.lstrip("#").strip() for b in block)
        raw_ver = m.group(2).strip()
        op = m.group(1) or ">="
        ver = parse_version(raw_ver) if _PLAIN_VERSION.fullmatch(raw_ver) else None
        pr = _PR.search(text)
        rem = _CAN_REMOVE.search(text)
        lo = hi = None
        if rem:
            hi = (int(rem.group(1)), int(rem.group(2)))
        elif ver and op in {"<", "<="}:
            hi = ver if op == "<" else bump(ver)
        elif ver:
            lo = ver
        k = bisect.bisect_left(starts, i + 1)  # first statement at or after the next line
        if k >= len(starts):
            continue
        target = stmt_starts[starts[k]]
        gate = VersionGate(
            path,
            first + 1,
            block[0][:200],
            "compat_comment",
            lo,
            hi,
            int(pr.group(1) or pr.group(2)) if pr else None,
            note=f"COMPAT({op} {m.group(2).strip()})",
        )
        spans.append(GateSpan(gate, target.lineno, target.end_lineno or target.lineno))


def gates_in(tree: ast.Module, path: str, source: str) -> list[VersionGate]:
    """The version gates of one module, in source order."""
    return [s.gate for s in gate_spans(tree, path, source)]


class GateLookup:
    """Innermost gate guarding a line, over a module's spans."""

    def __init__(self, spans: list[GateSpan]) -> None:
        self.spans = spans

    def at(self, line: int) -> VersionGate | None:
        best: GateSpan | None = None
        for s in self.spans:
            if s.start > line:
                break
            if s.end >= line and (best is None or s.end - s.start <= best.end - best.start):
                best = s
        return best.gate if best else None


def min_supported_in(tree: ast.Module) -> Version | None:
    """``MIN_SUPPORTED_VERSION = (2, 13)`` at module level -> (2, 13)."""
    for stmt in tree.body:
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            if any(isinstance(t, ast.Name) and _MIN_SUPPORTED.match(t.id) for t in targets):
                v = literal_version(stmt.value)
                if v is not None:
                    return v
    return None


def compat_debt(
    gates: list[VersionGate],
    min_supported: tuple[int, ...],
    analysed_new: tuple[int, ...],
    floor_known: bool = True,
) -> list[tuple[VersionGate, str]]:
    """Gates whose condition no longer varies over the supported range -> removable.

    The supported range is ``[min_supported, analysed_new]``. A gate that only lets code
    run on torch older than ``min_supported`` guards dead code; a gate that lets code run
    on every supported version is a check that can go (with its ``else`` branch). Gates
    without a version (``hasattr``, ``try_import``) are never decided here. With an assumed
    floor (``floor_known`` False) the reason says what removing needs.
    """
    out: list[tuple[VersionGate, str]] = []
    lo_s, hi_s = tuple(min_supported), tuple(analysed_new)
    floor = fmt_version(lo_s)
    if floor_known:
        remove, drop = "remove the gated code", "drop the check and its other branch"
    else:
        cond = f"if the downstream supports no torch older than {floor} (--min-supported)"
        remove = f"remove the gated code {cond}"
        drop = f"drop the check and its other branch {cond}"
    for g in gates:
        lo, hi = g.min_version, g.max_version
        if lo is None and hi is None:
            continue
        where = f"{g.path}:{g.line}"
        if hi is not None and lo_s >= hi:
            if g.kind == "compat_comment":
                reason = (
                    f"{where}: CAN REMOVE (needed only before torch {fmt_version(hi)}); "
                    f"minimum supported is {floor}"
                )
            else:
                reason = (
                    f"{where}: `{g.condition}` is always false: it runs only on torch < "
                    f"{fmt_version(hi)} and the minimum supported is {floor}; {remove}"
                )
            out.append((g, reason))
        elif (
            lo is not None
            and hi is None
            and lo_s >= lo
            and g.kind != "compat_comment"
            and g.note != "partial"
        ):
            reason = (
                f"{where}: `{g.condition}` is always true since the minimum supported torch "
                f"{floor} >= {fmt_version(lo)}; {drop}"
            )
            out.append((g, reason))
        elif lo is not None and hi is not None and (hi_s < lo or lo_s >= hi):
            reason = (
                f"{where}: `{g.condition}` never holds for torch "
                f"{floor}..{fmt_version(hi_s)}; {remove}"
            )
            out.append((g, reason))
    return out
