"""CSV: one row per unit in the seed's column order, plus evidence and the unit's couplings
per action (the summary's counting: a coupling under its own action); opens in
spreadsheets.

A report with a scope opens with it: one row per sentence, its one cell starting with
``# `` (a spreadsheet shows it above the table; ``pandas.read_csv(comment="#")`` and
similar readers skip it), then the header row."""

from __future__ import annotations

import csv
import io

from instep.glossary import glossary
from instep.impact.export.labels import COLUMNS, YES_NO, kind_label, lang_of
from instep.impact.export.scope_text import scope_lines
from instep.impact.model import Action, ImpactReport

EXTRA = {
    "en": [
        "Coupling kinds",
        "Evidence",
        "Upstream symbols",
        "Suggested tests",
        "PR",
        "Commit",
        "Shim couplings",
        "Test couplings",
        "Check couplings",
    ],
    "zh": list(glossary()["texts"]["impact_table"]["extra_columns"]),
}


def render_csv(report: ImpactReport) -> str:
    lang = lang_of(report.lang)
    yn = YES_NO[lang]
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\r\n")
    for line in scope_lines(report.scope, lang):
        writer.writerow([f"# {line}"])
    writer.writerow(COLUMNS[lang] + EXTRA[lang])
    for u in report.units:
        ch = u.change
        writer.writerow(
            [
                ch.id,
                str(u.action),
                ch.title,
                u.rationale,
                str(u.risk),
                yn[str(u.code_change)],
                yn["yes" if u.test_needed else "no"],
                str(u.stage),
                ", ".join(u.coupling_kinds),
                "\n".join(
                    f"{c.downstream} {kind_label(c.kind, c.role, lang)} -> {c.upstream}"
                    f" [{c.action}]"
                    for c in u.couplings
                ),
                "\n".join(f"{c.ref} ({c.kind})" for c in ch.changes),
                "\n".join(u.suggested_tests),
                ch.pr or "",
                ch.commit or "",
                *(sum(1 for c in u.couplings if c.action is a) for a in reversed(Action)),
            ]
        )
    return buf.getvalue()
