"""A self-contained HTML page for people (no network): act now, test these, compat debt,
already adapted and the summary by stage rendered in the page; then a sortable, filterable
table of the units whose filters and sort order live in the URL's hash.

The table's data travels as compact JSON inside the page (repeated names, details and
code lines interned, only the fields the page shows) and is rendered with ``textContent``
only, so text from the analysed code can never become markup. The table draws one page of
rows at a time (page and page size in the hash, like the filters), a unit's couplings
only when its row is opened. The page lists the units with couplings, every
unit with ``all_units`` (``--all``); the JSON export keeps every field of every unit.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

import jinja2
import markupsafe

from instep.impact.export import sections
from instep.impact.export.labels import (
    COLUMNS,
    HEADINGS,
    SECTIONS,
    YES_NO,
    kind_label,
    lang_of,
    no_test_text,
    tests_note_text,
)
from instep.impact.export.scope_text import no_shim_text, scope_lines
from instep.impact.model import Impact, ImpactReport

RATIONALE_CHARS = 400  # rationale kept per unit (the JSON export has it whole)
TEXT_CHARS = 200  # a coupling's detail and snippet
PER_PAGE = 100  # table rows drawn at once; the URL's hash may ask for another (``per=``)


def _script_json(data: object) -> str:
    # JSON inside <script>: neutralise '</script>', '<!--' and U+2028/9.
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return (
        text.replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def _cut(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


class _Strings:
    """Interns repeated names (paths, symbols, rules, kinds) into one table."""

    def __init__(self) -> None:
        self.index: dict[str, int] = {}

    def __call__(self, text: str) -> int:
        return self.index.setdefault(text, len(self.index))

    @property
    def table(self) -> list[str]:
        return list(self.index)


def _order(unit: Impact) -> tuple:
    return (-unit.action.rank, -unit.risk.rank, -len(unit.couplings), unit.change.id)


def table_data(report: ImpactReport, all_units: bool, lang: str) -> dict[str, Any]:
    """The units of the table, Shim first, as compact rows (the page's script reads them)."""
    s = _Strings()
    yn = YES_NO[lang]
    rows = []
    for u in sorted(report.units, key=_order):
        if not (u.couplings or all_units):
            continue
        ch = u.change
        rows.append(
            [
                ch.id,
                ch.title,
                ch.pr,
                str(u.action),
                str(u.risk),
                yn[str(u.code_change)],
                yn["yes" if u.test_needed else "no"],
                str(u.stage),
                _cut(u.rationale, RATIONALE_CHARS),
                [s(k) for k in u.coupling_kinds],
                list(u.suggested_tests),
                [
                    [
                        str(c.action),
                        s(kind_label(c.kind, c.role, lang)),
                        s(c.downstream.rsplit(":", 1)[0]),
                        int(c.downstream.rsplit(":", 1)[1] or 0),
                        s(c.upstream),
                        s(c.rule),
                        s(_cut(c.detail, TEXT_CHARS)),
                        s(_cut(c.snippet.strip(), TEXT_CHARS)),
                    ]
                    for c in sorted(u.couplings, key=lambda c: -c.action.rank)
                ],
                [[s(c.ref), str(c.kind)] for c in ch.changes],
            ]
        )
    return {"strings": s.table, "units": rows, "total": len(report.units), "per_page": PER_PAGE}


def render_html(report: ImpactReport, all_units: bool = False) -> str:
    lang = lang_of(report.lang)
    source = (resources.files("instep.impact.export") / "templates" / "impact.html.j2").read_text(
        "utf-8"
    )
    env = jinja2.Environment(autoescape=True)
    template = env.from_string(source)
    sec = sections.build(report)
    summary = report.summary()
    t = SECTIONS[lang]

    def commands(tests) -> markupsafe.Markup:
        """A place's commands as inline code, escaped (they quote analysed names)."""
        found, more = sections.commands_for(tests)
        parts = [
            markupsafe.Markup("<code>{}</code>{}").format(
                c.command, f" ({t['where_' + c.where]})" if f"where_{c.where}" in t else ""
            )
            for c in found
        ]
        if more > 0:
            parts.append(markupsafe.escape(t["more_tests"].format(n=more)))
        return markupsafe.Markup("; ").join(parts)

    totals = {k: sum(c[k] for c in sec.counts.values()) for k in ("units", "couplings", "places")}

    def no_test(place) -> str:
        """Why a Test place lists no test of its own to run (empty: it lists one)."""
        return no_test_text(sec.no_test.get(place.place, ()), lang)

    return template.render(
        commands=commands,
        no_test=no_test,
        totals=totals,
        lang=lang,
        h=HEADINGS[lang],
        t=SECTIONS[lang],
        columns=COLUMNS[lang],
        upstream=report.upstream,
        downstream=report.downstream,
        generated_at=report.generated_at,
        summary=summary,
        sec=sec,
        shim_units=len({x.unit for x in sec.act_now}),
        adapted_couplings=sum(len(g.upstream) for g in sec.adapted),
        debt_conditions=len(report.compat_debt),
        debt_reason=sections.debt_reason,
        tests_note=tests_note_text(sec.tests_note, lang) if sec.tests_note else "",
        scope=scope_lines(report.scope, lang),
        act_now_none=no_shim_text(report.scope, lang, SECTIONS[lang]["act_now_none"]),
        warnings=report.warnings,
        all_units=all_units,
        data=markupsafe.Markup(_script_json(table_data(report, all_units, lang))),
        kind_of=lambda c: kind_label(c.kind, c.role, lang),
    )
