"""The nouns of impact analysis, as typed dataclasses with enum kinds.

Everything in ``instep.impact`` produces or consumes these: sources yield file pairs,
the symbol index (``instep.pyindex``, whose nouns ``Symbol``, ``SymbolKind`` and
``Registration`` are shared with the doctor) yields symbol tables, the symbol diff yields
:class:`SymbolChange`, the coupling index yields :class:`Reference`, the verdict rules
join them into :class:`Coupling` and :class:`Impact`, exporters render them.
Nothing here parses, diffs or decides. The vocabularies (``Action``, ``Risk``, ``Stage``,
``CouplingKind``, ``ChangeKind``, ``Tristate``, ``KernelRole``, ``UnitKind``,
``NativeCheck``, ``SuggestionKind``) are the impact contract's (``instep.impact_contract``),
re-exported here with the report's :class:`Scope` (a contract record as it is) and
``SuggestedTest`` (a record the engine fills as the JSON holds it); the records that reach
the JSON build their contract record (``record()``), which ``export/json_doc.py`` writes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from instep import impact_contract as contract
from instep.impact_contract import (
    Action,
    ChangeKind,
    CouplingKind,
    KernelRole,
    Risk,
    Scope,
    Stage,
    SuggestedTest,
    Tristate,
)
from instep.impact_contract import NativeCheck as NativeCheck  # re-exported
from instep.impact_contract import SuggestionKind as SuggestionKind  # re-exported
from instep.impact_contract import UnitKind as UnitKind  # re-exported
from instep.impact_contract import UnreadObject as UnreadObject  # re-exported
from instep.pyindex.model import Qualified, Symbol, SymbolKind


@dataclass(frozen=True)
class SymbolChange(Qualified):
    """How one upstream symbol changed between two versions."""

    path: str
    qualname: str
    kind: ChangeKind
    symbol_kind: SymbolKind
    stage: Stage
    old: Symbol | None = None
    new: Symbol | None = None
    detail: str = ""  # human summary: 'signature: (x, sizes) -> (x, sizes, implicit=False)'
    renamed_from: str | None = None  # for RENAMED: the old qualname (or path::qualname)
    also: tuple[ChangeKind, ...] = ()  # further aspects of the same change (BODY with SIGNATURE)
    # a rename that keeps the old name (an alias ``Old = New``, or a def that warns and
    # calls the new one): "renamed to `New`, old name kept with a warning (until 2.16)"
    # on the old name's change, "renamed from `Old`, ..." on the new one's
    deprecation: str = ""

    @property
    def aspects(self) -> frozenset[ChangeKind]:
        return frozenset((self.kind, *self.also))

    @property
    def registration_keys(self) -> frozenset[str]:
        keys = set()
        for sym in (self.old, self.new):
            if sym is not None:
                keys.update(r.key for r in sym.registrations)
        return frozenset(keys)

    def record(self) -> contract.Change:
        return contract.Change(
            symbol=self.ref,
            change=self.kind,
            also=self.also,
            symbol_kind=self.symbol_kind,
            stage=self.stage,
            detail=self.detail,
            renamed_from=self.renamed_from,
            deprecation=self.deprecation,
            old_line=self.old.line if self.old else None,
            new_line=self.new.line if self.new else None,
            registrations=tuple(sorted(self.registration_keys)),
        )


@dataclass(frozen=True)
class SourceProbe:
    """A gate that asks upstream itself: ``"x" in inspect.getsource(torch.f)`` (``needles``
    tested on the source of ``target``), ``"x" in inspect.signature(torch.f).parameters``
    (tested on its parameter names) or ``hasattr(torch._C, "_x")`` (no needles: does
    ``target`` exist). The gated code runs when the probe holds (``runs_when``), joined
    with a version range by ``join`` ("and" / "or"; "" when there is none)."""

    target: str  # dotted upstream name probed
    needles: tuple[str, ...] = ()
    all_of: bool = False  # needles joined by ``and`` (else ``or``)
    runs_when: bool = True
    join: str = ""
    min_version: tuple[int, ...] | None = None  # the version part, when ``join`` is set
    max_version: tuple[int, ...] | None = None
    # what the needles are tested on: "source" (the def's text) or "parameters" (the
    # parameter names of ``inspect.signature(target).parameters``)
    reads: str = "source"


@dataclass(frozen=True)
class VersionGate:
    """Downstream code guarded for a torch version: the adaptation may already be made."""

    path: str
    line: int
    condition: str  # source text of the condition or marker
    kind: str  # 'version_compare' | 'version_flag' | 'hasattr' | 'try_import' | 'compat_comment'
    min_version: tuple[int, ...] | None = None  # gated code runs when torch >= this
    max_version: tuple[int, ...] | None = None  # gated code runs when torch < this
    upstream_pr: int | None = None
    note: str = ""
    # try_import: the absolute names the ``try`` body imports; when the new upstream has
    # them all, the ``except ImportError`` fallback is dead code on the new torch
    requires: tuple[str, ...] = ()
    # try_import, on the ``try`` side: the absolute names the ``except ImportError``
    # handlers import; when the new upstream lacks one, the fallback raises too
    fallback: tuple[str, ...] = ()
    # source_probe / c_probe: what the gate asks upstream (decided against its sources)
    probe: SourceProbe | None = None
    # version_flag: ``if FLAG:`` where the module set FLAG in a version check
    # (``is_torch_210 = True`` under ``if torch.__version__.startswith("2.1")``): the
    # flag's condition, a ``downstream.version_refusals.Predicate``, decided against the
    # new upstream's version by the join (a prefix is no range: "2.10" starts with "2.1")
    predicate: Any = None

    @property
    def at(self) -> str:
        return f"{self.path}:{self.line}"

    def record(self) -> contract.Gate:
        return contract.Gate(
            at=self.at,
            condition=self.condition,
            kind=self.kind,
            min_version=".".join(map(str, self.min_version)) if self.min_version else None,
            max_version=".".join(map(str, self.max_version)) if self.max_version else None,
            upstream_pr=self.upstream_pr,
            note=self.note,
        )


@dataclass(frozen=True)
class Reference:
    """A downstream place that names an upstream symbol (before any change is known).

    ``target`` is the canonical dotted upstream name the place depends on
    (``torch._inductor.lowering.expand``, ``torch._inductor.codegen.simd.
    IterationRangesEntry.precomputed_args``), or ``op:aten.expand`` /
    ``config:torch._inductor.config.triton.unique_kernel_names`` style keys for
    registrations and configuration.
    """

    kind: CouplingKind
    target: str
    path: str
    line: int
    snippet: str
    detail: str = ""  # 'from X import Y as Z', 'setattr', 'overrides method', 'file 85%'
    owner: str | None = None  # downstream qualname enclosing the place
    signature: str | None = None  # downstream replacement's signature (fork/override/patch)
    body_hash: str | None = None  # downstream replacement's normalised body hash
    calls_original: bool = False  # a patch/override that calls the upstream original/super()
    # monkeypatch: the downstream def assigned ('path::qualname'), when it is one
    replacement: str | None = None
    similarity: float | None = None  # forks: 0..1 against the best-matching upstream version
    matched_version: str | None = None  # forks: 'old' | 'new' (which upstream it matches best)
    gate: VersionGate | None = None
    best_effort: bool = False  # c_shim and other heuristic finds
    # import_use: how the place calls the target (signatures.call_shape, one per distinct
    # call; () when it never calls it; None when it also uses it otherwise, e.g. passes it
    # on, so its callers are elsewhere). A use covers its enclosing def, an import line
    # the whole file. subclass_override of a method: its super().<method>(...) calls
    # (None when there is none).
    call_shapes: tuple[str, ...] | None = None
    # op_schema / higher_order_op: the name is evaluated when the module is imported
    # (module or class level, a decorator of such a def): a missing overload stops the load
    at_import: bool = False
    # import_use: the target ``Cls.attr.member`` is reached through an instance's ``attr``
    # (``gm.graph.call_function`` with ``gm: GraphModule``): the join follows ``attr``'s
    # declared type upstream to the class whose ``member`` it is (downstream/typed_params)
    through: str | None = None
    # import_use: the place names the target only where nothing runs it (an annotation, the
    # class argument of isinstance/issubclass, an except clause): only its existence
    # matters there (downstream/scope.py note_use)
    type_only: bool = False
    # registered_kernel: what the place does with the overload (kernel, autocast, c_shim...)
    role: KernelRole | None = None

    @property
    def at(self) -> str:
        return f"{self.path}:{self.line}"


@dataclass
class Coupling:
    """One downstream dependency on one changed upstream symbol, with its own verdict."""

    kind: CouplingKind
    upstream: str  # 'path::qualname' of the changed upstream symbol
    downstream: str  # 'path:line'
    snippet: str
    action: Action
    risk: Risk
    code_change: Tristate
    rule: str  # id of the verdict rule that decided (docs/impact.md lists them)
    chain: list[str] = field(default_factory=list)  # upstream change -> ... -> downstream
    detail: str = ""
    already_adapted: bool = False
    gate: VersionGate | None = None
    best_effort: bool = False
    problems: list[str] = field(default_factory=list)  # signature incompatibilities found
    owner: str | None = None  # downstream qualname enclosing the place (None: module level)
    evidence: str = ""  # the breaking path found, or why none was (join/breaking_path.py)
    role: KernelRole | None = None  # registered_kernel: kernel, autocast, c_shim, ...

    @property
    def place(self) -> str:
        """The downstream symbol holding the place: 'path::qualname' ('path::<module>')."""
        return f"{self.downstream.rsplit(':', 1)[0]}::{self.owner or '<module>'}"

    @property
    def counted_place(self) -> str | None:
        """The place the reports count this coupling at (:attr:`place`), or None for an
        import line: the code that uses the imported name is the place, and has its own
        coupling (docs/impact.md, "Counting")."""
        if self.owner is None and self.kind is CouplingKind.IMPORT_USE:
            return None
        return self.place

    def record(self) -> contract.Coupling:
        return contract.Coupling(
            kind=self.kind,
            upstream=self.upstream,
            downstream=self.downstream,
            owner=self.owner,
            snippet=self.snippet,
            action=self.action,
            risk=self.risk,
            code_change=self.code_change,
            rule=self.rule,
            chain=tuple(self.chain),
            detail=self.detail,
            already_adapted=self.already_adapted,
            gate=self.gate.record() if self.gate else None,
            best_effort=self.best_effort,
            problems=tuple(self.problems),
            evidence=self.evidence,
            role=self.role,
        )


@dataclass
class UpstreamChange:
    """One unit of upstream change: a commit, or a file (or class) of a release diff."""

    id: str
    title: str
    unit_kind: str  # 'commit' | 'file' | 'class' | 'patch' | 'library' (UnitKind)
    files: list[str] = field(default_factory=list)
    changes: list[SymbolChange] = field(default_factory=list)
    commit: str | None = None
    pr: int | None = None
    reverted_by: str | None = None  # commit/PR that reverts this unit
    reverts: str | None = None  # commit/PR this unit reverts
    upstream_tests: list[str] = field(default_factory=list)  # test files touched / named


@dataclass
class Impact:
    """One output row: an upstream change, its couplings and the verdict."""

    change: UpstreamChange
    action: Action
    risk: Risk
    code_change: Tristate
    test_needed: bool
    stage: Stage
    couplings: list[Coupling] = field(default_factory=list)
    suggested_tests: list[str] = field(default_factory=list)
    rationale: str = ""
    # the suggested tests with their rules and the symbols each exercises (suggested_tests
    # holds their distinct ``test`` strings, at most 20)
    tests: list[SuggestedTest] = field(default_factory=list)
    # the changed symbols its Test or Shim couplings reach that get no operator or stage
    # test, with why (test_suggestions.NoTest's value): for the reports for people, the
    # JSON does not carry it (a new field is a new schema version)
    untested: dict[str, str] = field(default_factory=dict)

    @property
    def coupling_kinds(self) -> list[str]:
        return sorted({str(c.kind) for c in self.couplings})

    def record(self) -> contract.Unit:
        ch = self.change
        return contract.Unit(
            id=ch.id,
            title=ch.title,
            unit_kind=contract.UnitKind(ch.unit_kind),
            commit=ch.commit,
            pr=ch.pr,
            reverted_by=ch.reverted_by,
            reverts=ch.reverts,
            files=tuple(ch.files),
            upstream=tuple(f"{c.ref} ({c.kind})" for c in ch.changes),
            changes=tuple(c.record() for c in ch.changes),
            action=self.action,
            risk=self.risk,
            code_change=self.code_change,
            test_needed="yes" if self.test_needed else "no",
            stage=self.stage,
            coupling_kinds=tuple(sorted({c.kind for c in self.couplings})),
            couplings=tuple(c.record() for c in self.couplings),
            suggested_tests=tuple(self.suggested_tests),
            tests=tuple(self.tests),
            rationale=self.rationale,
        )


HOTSPOTS = 25  # downstream hotspots listed in the outputs
HOTSPOT_UNIT_IDS = 8  # unit ids shown per hotspot


@dataclass
class ImpactReport:
    """The result of one analysis: every unit's verdict plus what was analysed and how."""

    upstream: dict[str, Any]  # mode ('release'|'git'|'patches'), labels, versions, range
    downstream: dict[str, Any]  # source label, file and reference counts
    units: list[Impact] = field(default_factory=list)
    compat_debt: list[dict[str, Any]] = field(default_factory=list)
    # version checks that refuse the new upstream (downstream/version_refusals.py)
    refusals: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)  # timings (s), counts, cache hits
    generated_at: str = ""
    lang: str = "en"
    # what was read and what was not (every analysis sets it; None: a report made by hand)
    scope: Scope | None = None

    def summary(self) -> dict[str, Any]:
        def count(values: list[str]) -> dict[str, int]:
            out: dict[str, int] = {}
            for v in values:
                out[v] = out.get(v, 0) + 1
            return dict(sorted(out.items()))

        by_stage: dict[str, dict[str, int]] = {}
        for u in self.units:
            row = by_stage.setdefault(str(u.stage), {"Check": 0, "Test": 0, "Shim": 0})
            row[str(u.action)] += 1
        counts = self.counts()
        return {
            "units": len(self.units),
            "coupled_units": sum(1 for u in self.units if u.couplings),
            "couplings": sum(len(u.couplings) for u in self.units),
            "places": sum(c["places"] for c in counts.values()),
            # per action: units and places under their strongest coupling's action,
            # couplings under their own (docs/impact.md, "Counting")
            "counts": counts,
            "by_action": count([str(u.action) for u in self.units]),
            "by_risk": count([str(u.risk) for u in self.units]),
            "by_stage_action": dict(sorted(by_stage.items())),
            "by_coupling_kind": count([str(c.kind) for u in self.units for c in u.couplings]),
            "already_adapted": sum(1 for u in self.units for c in u.couplings if c.already_adapted),
            "refusals": len(self.refusals),
            "module_refusals": sum(1 for r in self.refusals if r.get("scope") == "module"),
        }

    def counts(self) -> dict[str, dict[str, int]]:
        """Units, couplings and downstream places per action, each counted once: a unit
        and a place under the strongest action of their couplings (a unit without one is
        Check), a coupling under its own. An import line is no place."""
        out = {str(a): {"units": 0, "couplings": 0, "places": 0} for a in reversed(Action)}
        strongest: dict[str, Action] = {}
        for u in self.units:
            out[str(u.action)]["units"] += 1
            for c in u.couplings:
                out[str(c.action)]["couplings"] += 1
                place = c.counted_place
                if place is not None and (
                    place not in strongest or c.action.rank > strongest[place].rank
                ):
                    strongest[place] = c.action
        for action in strongest.values():
            out[str(action)]["places"] += 1
        return out

    def hotspots(self, limit: int = HOTSPOTS) -> list[dict[str, Any]]:
        """Downstream symbols ranked by how many upstream units reach them (Test or Shim).

        Where to start reading: a downstream function that several independent upstream
        changes reach is where adaptations concentrate (on torch_npu 2.13 -> 2.14 the top
        25 were adapted at 6.6x the base rate of coupled symbols; docs/impact.md). Ties go
        to the stronger action, then to more couplings.
        """
        places: dict[str, dict[str, Any]] = {}
        for u in self.units:
            for c in u.couplings:
                if c.action is Action.CHECK or c.owner is None:
                    continue  # module level: import lines and tables, listed per unit
                p = places.setdefault(
                    c.place,
                    {
                        "units": set(),
                        "upstream": set(),
                        "couplings": 0,
                        "first": c.downstream,
                        "action": c.action,
                        "risk": c.risk,
                        "kinds": set(),
                    },
                )
                p["units"].add(u.change.id)
                p["upstream"].add(c.upstream)
                p["couplings"] += 1
                p["kinds"].add(str(c.kind))
                if c.action.rank > p["action"].rank:
                    p["action"] = c.action
                if c.risk.rank > p["risk"].rank:
                    p["risk"] = c.risk
        ranked = sorted(
            places.items(),
            key=lambda kv: (
                -len(kv[1]["units"]),
                -kv[1]["action"].rank,
                -kv[1]["couplings"],
                kv[0],
            ),
        )
        return [
            {
                "symbol": place,
                "at": p["first"],
                "units": len(p["units"]),
                "upstream_symbols": len(p["upstream"]),
                "couplings": p["couplings"],
                "action": str(p["action"]),
                "risk": str(p["risk"]),
                "kinds": sorted(p["kinds"]),
                "unit_ids": sorted(p["units"])[:HOTSPOT_UNIT_IDS],
            }
            for place, p in ranked[:limit]
        ]
