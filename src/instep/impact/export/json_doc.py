"""JSON with a documented, stable schema (docs/impact.md, ``schema: instep.impact/1``)."""

from __future__ import annotations

import json
from typing import Any

from instep import __version__
from instep.impact.model import ImpactReport

SCHEMA = "instep.impact/1"


def as_document(report: ImpactReport) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "tool": f"instep {__version__}",
        "generated_at": report.generated_at,
        "lang": report.lang,
        "upstream": report.upstream,
        "downstream": report.downstream,
        "summary": report.summary(),
        "refusals": report.refusals,
        "hotspots": report.hotspots(),
        "units": [u.as_dict() for u in report.units],
        "compat_debt": report.compat_debt,
        "warnings": report.warnings,
        "stats": report.stats,
    }


def render_json(report: ImpactReport) -> str:
    return json.dumps(as_document(report), ensure_ascii=False, indent=1) + "\n"
