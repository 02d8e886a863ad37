"""The JSON report ``instep impact --format json`` writes, read back by the engines that
consume it: ``instep run --impact`` (which tests to run) and ``instep triage --impact``
(which upstream change broke a failure).

Only reading and ordering: the report's meaning is the impact engine's (docs/impact.md),
and neither consumer imports that engine.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from instep.errors import BadInput, MissingInput

ACTIONS = ("Shim", "Test", "Check")  # strongest first
_RISKS = ("high", "medium", "low")


def load_impact_json(path: str | Path, option: str = "--impact") -> dict[str, Any]:
    """The report at ``path``; a one-line error when it is missing or is not a report."""
    p = Path(path)
    if not p.is_file():
        raise MissingInput(f"{option} {path}: no such file (an instep impact JSON report)")
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        msg = f"{option} {path}: not JSON ({exc}); expected an instep impact report"
        raise BadInput(msg) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("units"), list):
        raise BadInput(
            f"{option} {path}: not an instep impact JSON report (no 'units' list);"
            " write one with instep impact ... --format json --out FILE"
        )
    return doc


def parse_actions(text: str, option: str = "--action") -> tuple[str, ...]:
    """``Shim,Test`` -> ("Shim", "Test"); a one-line error naming the known actions."""
    wanted = tuple(a.strip().capitalize() for a in text.split(",") if a.strip())
    unknown = [a for a in wanted if a not in ACTIONS]
    if unknown or not wanted:
        raise BadInput(f"{option} {text!r}: expected actions from {', '.join(ACTIONS)}")
    return wanted


def unit_priority(unit: dict[str, Any]) -> tuple[int, int, int, str]:
    """Sort key, most urgent first: action, risk, then more couplings, then id."""
    action = unit.get("action")
    risk = unit.get("risk")
    return (
        ACTIONS.index(action) if action in ACTIONS else len(ACTIONS),
        _RISKS.index(risk) if risk in _RISKS else len(_RISKS),
        -len(unit.get("couplings") or []),
        str(unit.get("id")),
    )
