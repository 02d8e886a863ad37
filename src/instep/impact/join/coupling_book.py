"""The couplings of one run, one per (kind, change, file, line), each with its verdict.

:class:`CouplingBook` takes the couplings the passes found (:class:`~instep.impact.join.
pass_api.Found`), in the order the runner gives them, and keeps the first of equal keys
(one per file for indirect evidence: ``per_file``, and every ``inherited_path``). Before
it decides a coupling (:func:`~instep.impact.join.verdicts.decide`) it adds the facts of
the place's gate that need the whole tree: an ``except ImportError`` branch the new
upstream never runs or always runs (:class:`~instep.impact.join.facts.DeadFallback`), a
fallback that fails too, a probe decided on both upstreams; and, for an override or patch
that no longer fits, the breaking-path search (:mod:`~instep.impact.join.breaking_path`).
A coupling that comes out Shim at a place that runs only under a switch off by default
(:mod:`~instep.impact.join.switched_modules`) is decided again with ``off_by_default``:
Test (``switch.off_by_default``). It finds no coupling itself.
"""

from __future__ import annotations

from collections import defaultdict

from instep.impact.join import breaking_path
from instep.impact.join.fact_names import Fact
from instep.impact.join.pass_api import Found, JoinInputs
from instep.impact.join.switched_modules import SwitchedPlaces
from instep.impact.join.verdicts import decide
from instep.impact.model import Action, Coupling, CouplingKind


class CouplingBook:
    """The couplings found so far, by unit index and key."""

    def __init__(self, inputs: JoinInputs) -> None:
        self.inputs = inputs
        self.out: dict[int, dict[tuple, Coupling]] = defaultdict(dict)
        self._switched: SwitchedPlaces | None = None

    def add(self, found: Found) -> bool:
        """Decide and keep ``found`` unless a coupling with its key is kept already;
        whether it was new."""
        ref, change = found.ref, found.change
        k = found.kind or ref.kind
        extra, evidence = self._gate_facts(found)
        per_file = found.per_file or k is CouplingKind.INHERITED_PATH
        line = None if per_file else ref.line  # indirect evidence: one per file is enough
        key = (k, change.ref, ref.path, line)
        kept = self.out[found.unit]
        if key in kept:
            return False
        if breaking_path.needs_search(change, ref, k):
            inputs = self.inputs
            path = breaking_path.search(
                inputs.calls,
                change,
                ref,
                k,
                inputs.resolver,
                inputs.overrides.overridden_in,
                inputs.patched_on_path,
                inputs.swaps,
                inputs.escapes,
                inputs.devices,
                inputs.installs,
                inputs.changes,
            )
            extra, evidence = extra | {path.kind}, path.text
        coupling = self._decide(found, k, extra, evidence)
        why = self._switched_off(coupling, ref.path, ref.line, ref.owner)
        if why:  # the same decision, with the switch as a fact
            evidence = (
                f"{coupling.evidence}; but the place runs only when a switch that is off by "
                f"default is on ({why})"
            )
            coupling = self._decide(found, k, extra | {Fact.OFF_BY_DEFAULT}, evidence)
        kept[key] = coupling
        if found.problems:
            coupling.problems = list(found.problems)
        return True

    def _decide(self, found: Found, kind: CouplingKind, extra, evidence: str) -> Coupling:
        return decide(
            found.change,
            found.ref,
            kind=kind,
            new_version=self.inputs.new_version,
            chain=found.chain,
            detail=found.detail,
            extra_facts=extra,
            evidence=evidence,
        )

    def _switched_off(self, coupling: Coupling, path: str, line: int, owner) -> str:
        """For a Shim, why its place runs only under a switch off by default, or ''."""
        if coupling.action is not Action.SHIM:
            return ""
        if self._switched is None:
            self._switched = SwitchedPlaces(self.inputs.installs)
        return self._switched.off_by_default(path, line, owner)

    def _gate_facts(self, found: Found) -> tuple[frozenset[str], str]:
        """The pass's facts and evidence, with those of the place's gate added."""
        gate, extra, evidence = found.ref.gate, found.extra, found.evidence
        if gate is None:
            return extra, evidence
        dead_fallback = self.inputs.dead_fallback
        if gate.requires:
            if dead_fallback(gate):
                extra = extra | {Fact.OLD_ONLY}
            elif dead_fallback.runs(gate):
                extra = extra | {Fact.FALLBACK_RUNS}
        if gate.fallback:
            missing = dead_fallback.fails(gate)
            if missing is not None:
                extra = extra | {Fact.FALLBACK_FAILS}
                evidence = evidence or (
                    f"the `except ImportError` fallback of the import at {gate.path}:"
                    f"{gate.line} asks for `{missing}`, which the new upstream does not "
                    "define either: the fallback raises too"
                )
        if gate.probe is not None:
            extra = extra | self.inputs.probes.facts(gate)
        return extra, evidence

    def couplings(self) -> dict[int, list[Coupling]]:
        """The kept couplings per unit index, in the order they were added."""
        return {i: list(d.values()) for i, d in self.out.items()}
