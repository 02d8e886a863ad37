"""The report as the engines' contract: an :class:`~instep.impact_contract.ImpactDocument`
built from the analysis' :class:`ImpactReport`, written as JSON (docs/impact.md, "JSON
schema"). The records, their order and the file's layout are the contract's
(``instep/impact_contract.py``); this module only fills them in.
"""

from __future__ import annotations

from typing import Any

from instep import __version__
from instep import impact_contract as contract
from instep.impact.export.labels import SECTIONS, lang_of
from instep.impact.model import ImpactReport
from instep.impact.no_gc import no_cyclic_gc


def as_document(report: ImpactReport) -> contract.ImpactDocument:
    return contract.ImpactDocument(
        schema=contract.SCHEMA,
        tool=f"instep {__version__}",
        generated_at=report.generated_at,
        lang=report.lang,
        scope=report.scope,
        definitions=definitions(lang_of(report.lang)),
        upstream=contract.Upstream(**report.upstream),
        downstream=contract.Downstream(**report.downstream),
        summary=_summary(report.summary()),
        refusals=tuple(contract.Refusal(**r) for r in report.refusals),
        hotspots=tuple(_hotspot(h) for h in report.hotspots()),
        units=tuple(u.record() for u in report.units),
        compat_debt=tuple(contract.CompatDebt(**d) for d in report.compat_debt),
        warnings=tuple(report.warnings),
        stats=report.stats,
    )


def definitions(lang: str) -> contract.Definitions:
    """What Shim, Test and Check mean and how units, couplings and places are counted:
    the lines the Markdown and HTML reports open with."""
    t = SECTIONS[lang]
    actions = {a: t[f"means_{a.value}"] for a in reversed(contract.Action)}
    return contract.Definitions(actions=actions, counting=t["counting"])


def render_json(report: ImpactReport) -> str:
    """The report's JSON, written with the cyclic collector paused: building the document
    allocates about 100,000 objects (23,700 records, their dicts and tuples) and no cycle
    among them for torch 2.13.0 -> 2.14.1 on torch-npu 2.13.0 (12.9 MB), and the
    collector's passes over them were 13 % of the write (0.656 -> 0.569 CPU-s, medians of 8
    alternated in one process on the shared 2-CPU machine under load)."""
    with no_cyclic_gc():
        return as_document(report).to_json()


def _summary(s: dict[str, Any]) -> contract.Summary:
    """The engine's counts (keyed by the vocabularies' values) as the contract's record."""
    action, risk, stage = contract.Action, contract.Risk, contract.Stage
    return contract.Summary(
        **{
            **s,
            "counts": {action(k): contract.Counts(**c) for k, c in s["counts"].items()},
            "by_action": {action(k): n for k, n in s["by_action"].items()},
            "by_risk": {risk(k): n for k, n in s["by_risk"].items()},
            "by_stage_action": {
                stage(k): {action(a): n for a, n in row.items()}
                for k, row in s["by_stage_action"].items()
            },
            "by_coupling_kind": {
                contract.CouplingKind(k): n for k, n in s["by_coupling_kind"].items()
            },
        }
    )


def _hotspot(h: dict[str, Any]) -> contract.Hotspot:
    return contract.Hotspot(
        **{
            **h,
            "action": contract.Action(h["action"]),
            "risk": contract.Risk(h["risk"]),
            "kinds": tuple(contract.CouplingKind(k) for k in h["kinds"]),
            "unit_ids": tuple(h["unit_ids"]),
        }
    )
