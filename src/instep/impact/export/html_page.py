"""A self-contained HTML page (no network) filtering units by action, risk, stage, kind.

The data travels as JSON inside the page and is rendered with ``textContent`` only, so
text from the analysed code can never become markup.
"""

from __future__ import annotations

import json
from importlib import resources

import jinja2
import markupsafe

from instep.impact.export.json_doc import as_document
from instep.impact.export.labels import COLUMNS, HEADINGS, lang_of
from instep.impact.model import ImpactReport


def _script_json(data: object) -> str:
    # JSON inside <script>: neutralise '</script>', '<!--' and U+2028/9.
    text = json.dumps(data, ensure_ascii=False)
    return (
        text.replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def render_html(report: ImpactReport) -> str:
    lang = lang_of(report.lang)
    source = (resources.files("instep.impact.export") / "templates" / "impact.html.j2").read_text(
        "utf-8"
    )
    env = jinja2.Environment(autoescape=True)
    template = env.from_string(source)
    return template.render(
        lang=lang,
        h=HEADINGS[lang],
        columns=COLUMNS[lang],
        upstream=report.upstream,
        downstream=report.downstream,
        generated_at=report.generated_at,
        data=markupsafe.Markup(_script_json(as_document(report))),
    )
