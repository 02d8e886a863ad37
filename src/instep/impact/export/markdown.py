"""Markdown: the seed 001 table (Action, Summary, Analysis, Risk, Code change, Test, Stage)."""

from __future__ import annotations

from instep.impact.export.labels import COLUMNS, HEADINGS, RISK, YES_NO, lang_of
from instep.impact.model import Impact, ImpactReport


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\r", "").replace("\n", "<br>")


def _analysis(unit: Impact, lang: str, max_evidence: int) -> str:
    parts = [unit.rationale]
    if unit.couplings:
        ev = [
            f"`{c.downstream}` {c.kind} → `{c.upstream}` [{c.action}, {c.rule}]"
            for c in unit.couplings[:max_evidence]
        ]
        if len(unit.couplings) > max_evidence:
            ev.append(f"… +{len(unit.couplings) - max_evidence}")
        parts.append(f"{HEADINGS[lang]['evidence']}: " + "; ".join(ev))
    if unit.suggested_tests:
        parts.append(f"{HEADINGS[lang]['tests']}: " + ", ".join(unit.suggested_tests[:8]))
    return "\n".join(parts)


def render_markdown(report: ImpactReport, max_evidence: int = 6) -> str:
    lang = lang_of(report.lang)
    h = HEADINGS[lang]
    up = report.upstream
    lines = [f"# {h['title']}", ""]
    lines.append(
        f"- upstream: {up.get('mode')} {up.get('old', '')} → {up.get('new', '')}"
        + (f" ({up['range']})" if up.get("range") else "")
    )
    lines.append(f"- downstream: {report.downstream.get('source', '')}")
    if report.generated_at:
        lines.append(f"- generated: {report.generated_at}")
    lines.append("")
    lines += _summary(report, lang)
    lines += ["", f"## {h['units']}", ""]
    lines += _unit_table(report, lang, max_evidence)
    if report.compat_debt:
        lines += ["", f"## {h['debt']}", ""]
        for debt in report.compat_debt:
            lines.append(f"- `{debt['at']}` `{_cell(debt['condition'])}`: {debt['reason']}")
    if report.warnings:
        lines += ["", f"## {h['warnings']}", ""]
        lines += [f"- {_cell(w)}" for w in report.warnings]
    return "\n".join(lines) + "\n"


def _summary(report: ImpactReport, lang: str) -> list[str]:
    """The summary tables: by stage and action, by risk, by coupling kind, hotspots."""
    h = HEADINGS[lang]
    summary = report.summary()
    lines = [f"## {h['summary']}", "", f"### {h['by_stage']}", ""]
    lines += ["| stage | Check | Test | Shim |", "|---|---:|---:|---:|"]
    for stage, row in summary["by_stage_action"].items():
        lines.append(f"| {stage} | {row['Check']} | {row['Test']} | {row['Shim']} |")
    lines += ["", f"### {h['by_risk']}", "", "| risk | units |", "|---|---:|"]
    lines += [f"| {k} | {v} |" for k, v in summary["by_risk"].items()]
    if summary["by_coupling_kind"]:
        lines += ["", f"### {h['by_kind']}", "", "| kind | couplings |", "|---|---:|"]
        lines += [f"| {k} | {v} |" for k, v in summary["by_coupling_kind"].items()]
    hotspots = report.hotspots()
    if hotspots:
        lines += ["", f"### {h['hotspots']}", ""]
        lines += [
            "| downstream | units | action | risk | kinds | at |",
            "|---|---:|---|---|---|---|",
        ]
        lines += [
            f"| {_cell(x['symbol'])} | {x['units']} | {x['action']} | {RISK[lang][x['risk']]} | "
            f"{', '.join(x['kinds'])} | {_cell(x['at'])} |"
            for x in hotspots
        ]
    return lines


def _unit_table(report: ImpactReport, lang: str, max_evidence: int) -> list[str]:
    """One row per unit, in the seed's column order."""
    yn = YES_NO[lang]
    cols = COLUMNS[lang]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for unit in report.units:
        ch = unit.change
        summary_cell = ch.title + (f" (#{ch.pr})" if ch.pr else "")
        lines.append(
            "| "
            + " | ".join(
                _cell(x)
                for x in [
                    ch.id,
                    str(unit.action),
                    summary_cell,
                    _analysis(unit, lang, max_evidence),
                    RISK[lang][str(unit.risk)],
                    yn[str(unit.code_change)],
                    yn["yes" if unit.test_needed else "no"],
                    f"compile_stage：{unit.stage}" if lang == "zh" else str(unit.stage),
                ]
            )
            + " |"
        )
    return lines
