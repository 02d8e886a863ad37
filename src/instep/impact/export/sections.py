"""The sections a person reads, in the order they read them: act now (the version checks
that refuse the new upstream, then every Shim), test
these (Test places by priority), compat debt, already-adapted gates, the summary by stage.

Builds plain records from an :class:`ImpactReport` for the Markdown and HTML renderers:
it selects, orders and counts; it never decides a verdict (the join did) and renders
nothing. JSON and CSV do not use it: they keep every unit.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from instep.impact.export.labels import kind_label
from instep.impact.export.priority import TestPlace, rank_test_places
from instep.impact.join.test_suggestions import RunCommand, run_commands
from instep.impact.model import Action, ChangeKind, Impact, ImpactReport, SuggestedTest
from instep.pyindex.model import SymbolKind
from instep.pyindex.signature_delta import delta_text

NATIVE_KINDS = (SymbolKind.NATIVE_FUNCTION, SymbolKind.NATIVE_DATA)

TOP_TEST_PLACES = 25  # Test places listed under "Test these"
TESTS_PER_COMMAND = 4  # tests of one kind a place's command runs (the others: "+N more")


@dataclass(frozen=True)
class ShimLine:
    """One Shim coupling as one line of evidence: downstream place, upstream place, why."""

    unit: str
    pr: int | None
    downstream: str  # 'path:line'
    snippet: str
    kind: str  # coupling kind (with a registered kernel's role: 'registered_kernel, kernel')
    upstream: str  # 'path::qualname'
    upstream_at: str  # 'path:line' in the new upstream (the old one when removed)
    change: str  # change kind
    # a signature change: what changed ('+ *, strict_sum: bool = False', pyindex's
    # signature_delta), and the two full signatures (folded away in the HTML)
    delta: str | None
    why: str  # the coupling's detail (what does not bind, what is missing)
    rule: str
    path: str = ""  # the breaking path in the new upstream (the evidence), when it names one
    old_signature: str = ""
    new_signature: str = ""
    tests: tuple[SuggestedTest, ...] = ()  # suggested for the upstream symbol
    deprecation: str = ""  # a rename that keeps the old name (the symbol diff's note)


@dataclass(frozen=True)
class AdaptedGate:
    """A downstream gate that already adapts to the new upstream, with what it covers."""

    at: str
    condition: str
    kind: str
    upstream: tuple[str, ...]
    rules: tuple[str, ...]


@dataclass(frozen=True)
class StageRow:
    stage: str
    shim: int
    test: int
    check_units: int
    check_files: int  # distinct upstream files of the Check units


@dataclass(frozen=True)
class TestsNote:
    """Why Test units carry no suggested tests, when they do not."""

    test_units: int  # units that need a test
    without: int  # of which have no suggested test
    upstream_tests: int | None  # upstream test files read (None: not recorded)
    downstream_tests: int | None


@dataclass(frozen=True)
class Sections:
    refusals: list[dict]  # version checks refusing the new upstream, module level first
    act_now: list[ShimLine]
    test_these: list[TestPlace]
    test_places: int  # Test places in all
    counts: dict[str, dict[str, int]]  # per action: units, couplings, places (the summary's)
    debt: list[dict]  # one per place: a gate and its negation share a line
    adapted: list[AdaptedGate]
    by_stage: list[StageRow]
    tests_note: TestsNote | None
    # place -> why a listed Test place has no test of its own to run (``no_test_reasons``)
    no_test: dict[str, tuple[str, ...]] = field(default_factory=dict)


def _upstream_at(change) -> str:
    if change is None:
        return ""
    if change.symbol_kind in NATIVE_KINDS:  # a dynamic symbol: where a header declares it
        for sym in (change.new, change.old):
            if sym is not None and sym.line:
                return f"{sym.path}:{sym.line}"
        return change.path
    if change.new is not None and change.kind is not ChangeKind.REMOVED:
        return f"{change.path}:{change.new.line}"
    if change.old is not None:
        return f"{change.old.path}:{change.old.line}"
    return change.path


def act_now(report: ImpactReport) -> list[ShimLine]:
    """Every Shim coupling, in unit order."""
    lines = []
    for unit in report.units:
        for c in unit.couplings:
            if c.action is not Action.SHIM:
                continue
            change = next((x for x in unit.change.changes if x.ref == c.upstream), None)
            delta, old_sig, new_sig = None, "", ""
            if (
                change is not None
                and ChangeKind.SIGNATURE in change.aspects
                and change.old is not None
                and change.new is not None
            ):
                old_sig = f"({change.old.signature or ''})"
                new_sig = f"({change.new.signature or ''})"
                # a C++ symbol's parameter types: the two lists as they are (the delta
                # reads Python parameters)
                delta = (
                    f"{old_sig} -> {new_sig}"
                    if change.symbol_kind in NATIVE_KINDS
                    else delta_text(
                        change.old.signature or "",
                        change.new.signature or "",
                        change.old.returns,
                        change.new.returns,
                    )
                )
            lines.append(
                ShimLine(
                    unit=unit.change.id,
                    pr=unit.change.pr,
                    downstream=c.downstream,
                    snippet=c.snippet.strip(),
                    kind=kind_label(c.kind, c.role, report.lang),
                    upstream=c.upstream,
                    upstream_at=_upstream_at(change),
                    change=str(change.kind) if change is not None else "",
                    delta=delta,
                    why="; ".join(dict.fromkeys([*c.problems] or [c.detail])),
                    rule=c.rule,
                    path=_breaking_path(c),
                    old_signature=old_sig,
                    new_signature=new_sig,
                    tests=_symbol_tests(unit, c.upstream),
                    deprecation=change.deprecation if change is not None else "",
                )
            )
    return lines


def _symbol_tests(unit: Impact, symbol: str) -> tuple[SuggestedTest, ...]:
    return tuple(t for t in unit.tests if symbol in t.symbols)


def _breaking_path(c) -> str:
    """The coupling's evidence when it quotes the new upstream (the call or read that
    reaches the downstream place), cut to one line; not the evidence that only repeats the
    downstream place (``at path:line: …``), which the line already shows."""
    ev = " ".join((c.evidence or "").split())
    if not ev or ev.startswith(f"at {c.downstream}"):
        return ""
    return ev if len(ev) <= 240 else ev[:239].rsplit(" ", 1)[0] + " …"


def adapted_gates(report: ImpactReport) -> list[AdaptedGate]:
    """Couplings already adapted downstream, one entry per gate (or place without one)."""
    gates: dict[str, dict] = {}
    for unit in report.units:
        for c in unit.couplings:
            if not c.already_adapted:
                continue
            at = c.gate.at if c.gate else c.downstream
            g = gates.setdefault(
                at,
                {
                    "condition": c.gate.condition if c.gate else c.snippet.strip(),
                    "kind": c.gate.kind if c.gate else str(c.kind),
                    "upstream": {},
                    "rules": {},
                },
            )
            g["upstream"][c.upstream] = None
            g["rules"][c.rule] = None
    return [
        AdaptedGate(at, g["condition"], g["kind"], tuple(g["upstream"]), tuple(g["rules"]))
        for at, g in sorted(gates.items())
    ]


def by_stage(report: ImpactReport) -> list[StageRow]:
    rows: dict[str, dict] = {}
    for unit in report.units:
        row = rows.setdefault(str(unit.stage), {"Shim": 0, "Test": 0, "Check": 0, "files": set()})
        row[str(unit.action)] += 1
        if unit.action is Action.CHECK:
            files = {c.path for c in unit.change.changes} or set(unit.change.files)
            row["files"].update(files or {unit.change.id})
    return [
        StageRow(stage, r["Shim"], r["Test"], r["Check"], len(r["files"]))
        for stage, r in sorted(rows.items(), key=lambda kv: (-kv[1]["Shim"], -kv[1]["Test"], kv[0]))
    ]


def tests_note(report: ImpactReport) -> TestsNote | None:
    needing = [u for u in report.units if u.test_needed]
    without = sum(1 for u in needing if not u.suggested_tests)
    if not without:
        return None
    return TestsNote(
        len(needing),
        without,
        report.stats.get("upstream_tests"),
        report.stats.get("downstream_tests"),
    )


def no_test_reasons(place: TestPlace, upstream_tests: int | None) -> tuple[str, ...]:
    """Why ``place`` lists no test of its own to run (none for its strongest coupling's
    symbol, none tied to no symbol): the suggester's reason for that symbol
    (``test_suggestions.NoTest``'s value), then ``wheel`` when the upstream carried no
    test files (``upstream_tests`` 0: a wheel). Empty when it lists one."""
    if place.tests:
        return ()
    top = place.top
    why = top.unit.untested.get(top.coupling.upstream)
    reasons = (why,) if why else ()
    return (*reasons, "wheel") if upstream_tests == 0 else reasons


def build(report: ImpactReport, top: int = TOP_TEST_PLACES) -> Sections:
    places = rank_test_places(report.units)
    upstream_tests = report.stats.get("upstream_tests")
    return Sections(
        refusals=list(report.refusals),
        act_now=act_now(report),
        test_these=places[:top],
        test_places=len(places),
        counts=report.counts(),
        debt=list({str(d.get("at")): d for d in reversed(report.compat_debt)}.values())[::-1],
        adapted=adapted_gates(report),
        by_stage=by_stage(report),
        tests_note=tests_note(report),
        no_test={p.place: why for p in places[:top] if (why := no_test_reasons(p, upstream_tests))},
    )


def debt_reason(debt: dict) -> str:
    """The compat-debt reason without its leading 'path:line: `condition`' (shown apart)."""
    reason = str(debt.get("reason", ""))
    head = f"{debt.get('at')}: `{debt.get('condition')}` "
    return reason[len(head) :] if reason.startswith(head) else reason


def commands_for(
    tests: tuple[SuggestedTest, ...] | list[SuggestedTest], limit: int = TESTS_PER_COMMAND
) -> tuple[list[RunCommand], int]:
    """The commands that run a place's (or a Shim's) tests, at most ``limit`` tests of
    each kind, and how many tests they leave out."""
    commands = run_commands(tests, limit)
    shown = sum(len(c.tests) for c in commands)
    return commands, len({t.test for t in tests}) - shown
