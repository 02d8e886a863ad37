"""Markdown for people: what to do first, then the counts; the seed 001 table (Action,
Summary, Analysis, Risk, Code change, Test, Stage) only with ``--all``."""

from __future__ import annotations

from instep.impact.export import sections
from instep.impact.export.labels import (
    COLUMNS,
    HEADINGS,
    RISK,
    SECTIONS,
    YES_NO,
    kind_label,
    lang_of,
    no_test_text,
    tests_note_text,
)
from instep.impact.export.scope_text import no_shim_text, scope_lines
from instep.impact.model import Impact, ImpactReport


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\r", "").replace("\n", "<br>")


def _analysis(unit: Impact, lang: str, max_evidence: int) -> str:
    parts = [unit.rationale]
    if unit.couplings:
        ev = [
            f"`{c.downstream}` {kind_label(c.kind, c.role, lang)} → `{c.upstream}`"
            f" [{c.action}, {c.rule}]"
            for c in unit.couplings[:max_evidence]
        ]
        if len(unit.couplings) > max_evidence:
            ev.append(f"… +{len(unit.couplings) - max_evidence}")
        parts.append(f"{HEADINGS[lang]['evidence']}: " + "; ".join(ev))
    if unit.suggested_tests:
        parts.append(f"{HEADINGS[lang]['tests']}: " + ", ".join(unit.suggested_tests[:8]))
    return "\n".join(parts)


def render_markdown(report: ImpactReport, all_units: bool = False, max_evidence: int = 6) -> str:
    """Act now, test these, compat debt, already adapted, the summary by stage; the
    per-unit table only with ``all_units`` (``--all``)."""
    lang = lang_of(report.lang)
    h, t = HEADINGS[lang], SECTIONS[lang]
    up = report.upstream
    sec = sections.build(report)
    lines = [f"# {h['title']}", ""]
    scope = scope_lines(report.scope, lang)  # what was read, before anything else
    if scope:
        lines += [f"> {_cell(line)}" for line in scope] + [""]
    lines += _counts(sec.counts, t)
    lines.append(
        f"- upstream: {up.get('mode')} {up.get('old', '')} → {up.get('new', '')}"
        + (f" ({up['range']})" if up.get("range") else "")
    )
    lines.append(f"- downstream: {report.downstream.get('source', '')}")
    if report.generated_at:
        lines.append(f"- generated: {report.generated_at}")
    lines += _act_now(sec, t, up, no_shim_text(report.scope, lang, t["act_now_none"]))
    lines += _test_these(sec, t, lang)
    lines += _debt_and_adapted(report, sec, t)
    lines += _summary(report, sec, lang)
    if all_units:
        lines += ["", f"## {t['all_units']}", ""]
        lines += _unit_table(report, lang, max_evidence)
    else:
        lines += ["", t["more_units"]]
    if report.warnings:
        lines += ["", f"## {h['warnings']}", ""]
        lines += [f"- {_cell(w)}" for w in report.warnings]
    return "\n".join(lines) + "\n"


def _counts(counts: dict[str, dict[str, int]], t: dict) -> list[str]:
    """What Shim, Test and Check mean, one line each, with the units, couplings and
    places of each (the JSON summary's ``counts``), then how they are counted."""
    cols = t["count_cols"]
    lines = ["| " + " | ".join(cols) + " |", "|---|---|---:|---:|---:|"]
    total = {k: 0 for k in ("units", "couplings", "places")}
    for action in ("Shim", "Test", "Check"):
        c = counts[action]
        lines.append(
            f"| {action} | {t['means_' + action]} | {c['units']} | {c['couplings']}"
            f" | {c['places']} |"
        )
        for k in total:
            total[k] += c[k]
    lines.append(f"| {t['all']} | | {total['units']} | {total['couplings']} | {total['places']} |")
    return [*lines, "", t["counting"], ""]


def _commands(tests, t: dict) -> str:
    """The commands running ``tests``, as inline code, with where to run them."""
    commands, more = sections.commands_for(tests)
    parts = [
        _code(c.command) + (f" ({t['where_' + c.where]})" if f"where_{c.where}" in t else "")
        for c in commands
    ]
    if more > 0:
        parts.append(t["more_tests"].format(n=more))
    return "; ".join(parts)


def _code(text: str) -> str:
    """Inline code that survives backticks in the text."""
    text = text.replace("\r", "").replace("\n", " ")
    fence = "``" if "`" in text else "`"
    pad = " " if fence == "``" else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _refusals(sec: sections.Sections, t: dict, up: dict) -> list[str]:
    """The version checks refusing the new upstream: the first thing to change."""
    if not sec.refusals:
        return []
    modules = sum(1 for r in sec.refusals if r["scope"] == "module")
    lines = [
        t["refusals_count"].format(
            n=len(sec.refusals),
            new=up.get("new_version"),
            old=up.get("old_version"),
            modules=modules,
        ),
        "",
    ]
    for r in sec.refusals:
        scope = (
            t["refusal_module"]
            if r["scope"] == "module"
            else t["refusal_function"].format(scope=r["scope"])
        )
        lines.append(
            f"- **{r['at']}** {_code(r['raises'])} ({scope}); {t['refuses_when']}"
            f" {_code(r['condition'])}"
        )
    return [*lines, ""]


def _act_now(sec: sections.Sections, t: dict, up: dict, none: str) -> list[str]:
    units = len({x.unit for x in sec.act_now})
    lines = ["", f"## {t['act_now']}", "", *_refusals(sec, t, up)]
    if not sec.act_now:
        return [*lines, none]
    places = sec.counts["Shim"]["places"]
    lines += [
        t["act_now_count"].format(couplings=len(sec.act_now), places=places, units=units),
        "",
    ]
    for x in sec.act_now:
        line = (
            f"- **{x.downstream}** "
            + (f"{_code(x.snippet)} " if x.snippet else "")
            + f"({x.kind}) → {_code(x.upstream)}"
            f" at {x.upstream_at} ({x.change}"
            + (f", #{x.pr}" if x.pr else "")
            + (f"; {x.deprecation}" if x.deprecation else "")
            + ")"
        )
        if x.delta:
            line += f"; {t['signature']} {_code(x.delta)}"
        if x.why:
            line += f": {x.why}"
        if x.path:
            line += f"; {t['breaking_path']}: {x.path}"
        line += f" [{x.rule}]"
        if x.tests:
            line += f"; {t['shim_tests']}: {_commands(x.tests, t)}"
        lines.append(line)
    return lines


def _test_these(sec: sections.Sections, t: dict, lang: str) -> list[str]:
    lines = ["", f"## {t['test_these']}", ""]
    if not sec.test_these:
        lines.append(t["test_these_none"])
    else:
        shown = len(sec.test_these)
        lines += [t["test_these_count"].format(shown=shown, total=sec.test_places), ""]
        lines += ["| " + " | ".join(t["test_cols"]) + " |", "|---:|---:|---|---|---:|---|"]
        for i, p in enumerate(sec.test_these, 1):
            top = p.top
            why = (
                f"{kind_label(top.coupling.kind, top.coupling.role, lang)}"
                f" → `{top.coupling.upstream}` ({top.change}, {top.stage}"
                + (f", +{top.hops} hops" if top.hops else "")
                + (f"; {top.deprecation}" if top.deprecation else "")
                + ")"
                + (f"; {t['sinks']}" if p.sinks else "")
            )
            tests = _commands(p.tests, t)
            none = t["none"]
            if p.place in sec.no_test:  # say why it has no test of its own
                none = f"{none}: {no_test_text(sec.no_test[p.place], lang)}"
            if p.other_tests:
                other = t["other_tests"].format(n=len({x.test for x in p.other_tests}))
                tests = f"{tests}; {other}" if tests else f"{none} ({other})"
            lines.append(
                f"| {i} | {p.priority:g} | `{_cell(p.place)}` {p.at} | {_cell(why)} | "
                f"{len(p.units)} | {_cell(tests or none)} |"
            )
        if any(p.tests or p.other_tests for p in sec.test_these):
            lines += ["", t["tests_run_all"]]
    if sec.tests_note is not None:
        lines += ["", "> " + _cell(tests_note_text(sec.tests_note, lang))]
    return lines


def _debt_and_adapted(report: ImpactReport, sec: sections.Sections, t: dict) -> list[str]:
    lines: list[str] = []
    if sec.debt:
        lines += [
            "",
            f"## {t['debt']}",
            "",
            t["debt_count"].format(n=len(sec.debt), conditions=len(report.compat_debt)),
            "",
        ]
        lines += [
            f"- {d['at']} {_code(str(d['condition']))}: {_cell(sections.debt_reason(d))}"
            for d in sec.debt
        ]
    if sec.adapted:
        couplings = sum(len(g.upstream) for g in sec.adapted)
        lines += ["", f"## {t['adapted']}", ""]
        lines += [t["adapted_count"].format(couplings=couplings, gates=len(sec.adapted)), ""]
        lines += [
            f"- {g.at} {_code(g.condition)} ({g.kind}): {t['covers']} "
            + ", ".join(_code(u) for u in g.upstream)
            + f" [{', '.join(g.rules)}]"
            for g in sec.adapted
        ]
    return lines


def _summary(report: ImpactReport, sec: sections.Sections, lang: str) -> list[str]:
    """Units by stage (Check counted by upstream file too), then risk and coupling kind."""
    h, t = HEADINGS[lang], SECTIONS[lang]
    summary = report.summary()
    lines = ["", f"## {t['by_stage']}", ""]
    lines += ["| " + " | ".join(t["stage_cols"]) + " |", "|---|---:|---:|---:|---:|"]
    lines += [
        f"| {r.stage} | {r.shim} | {r.test} | {r.check_units} | {r.check_files} |"
        for r in sec.by_stage
    ]
    lines += ["", f"### {h['by_risk']}", "", "| risk | units |", "|---|---:|"]
    lines += [f"| {RISK[lang][k]} | {v} |" for k, v in summary["by_risk"].items()]
    if summary["by_coupling_kind"]:
        lines += ["", f"### {h['by_kind']}", "", "| kind | couplings |", "|---|---:|"]
        lines += [f"| {k} | {v} |" for k, v in summary["by_coupling_kind"].items()]
    return lines


def _unit_table(report: ImpactReport, lang: str, max_evidence: int) -> list[str]:
    """One row per unit, in the seed's column order."""
    yn = YES_NO[lang]
    cols = COLUMNS[lang]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for unit in report.units:
        ch = unit.change
        summary_cell = ch.title + (f" (#{ch.pr})" if ch.pr and f"#{ch.pr}" not in ch.title else "")
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
