"""The glossary: every zh text instep writes has its entry, and each uses one word per concept."""

from __future__ import annotations

import re
import string
from pathlib import Path

import pytest

from instep import glossary
from instep.bundle.issue_markdown import ARTIFACT_LABELS, LABELS
from instep.impact.export import csv_table, labels, scope_text
from instep.impact.join import verdicts
from instep.layers import Layer
from instep.outcome import Status
from instep.report import weekly
from instep.suites.case_record import LEG_STATES
from instep.suites.metrics import TABLE_ROWS
from instep.tomlfile import load_toml

G = glossary.glossary()
ENGLISH = {
    "run_report": weekly._RUN_TEXT_EN,
    "weekly": weekly._WEEKLY_TEXT_EN,
    "issue": LABELS["en"],
    "artifacts": ARTIFACT_LABELS["en"],
    "judgement": {**{j: j for j in weekly.JUDGEMENTS}, "open since": "open since {run}"},
    "impact_headings": labels.HEADINGS["en"],
    "impact_sections": labels.SECTIONS["en"],
    "impact_roles": labels.KERNEL_ROLES["en"],
    "impact_table": {
        "columns": labels.COLUMNS["en"],
        "extra_columns": csv_table.EXTRA["en"],
        **labels.YES_NO["en"],
    },
    "impact_scope": scope_text.SCOPE["en"],
    "metrics": {
        **{label: label for label, _, _ in TABLE_ROWS},
        "triad ": "triad ",
        "failures at ": "failures at ",
    },
}


def _fields(text: object) -> set[str]:
    values = text if isinstance(text, list) else [text]
    return {f for v in values for _, f, _, _ in string.Formatter().parse(str(v)) if f}


@pytest.mark.parametrize("area", sorted(ENGLISH))
def test_every_english_text_has_its_zh_text_with_the_same_fields(area):
    zh = G["texts"][area]
    assert set(zh) == set(ENGLISH[area])
    for key, english in ENGLISH[area].items():
        assert _fields(zh[key]) == _fields(english), key
        if isinstance(english, list):
            assert len(zh[key]) == len(english), key


def test_every_stored_value_has_its_zh_word():
    assert set(G["status"]) == {s.value for s in Status}
    assert set(G["leg"]) == set(LEG_STATES)
    assert set(G["layer"]) == {layer.value for layer in Layer}
    assert glossary.status("failed", "zh") == "失败" and glossary.status("failed", "en") == "failed"


def _all_zh_texts() -> list[str]:
    found = []
    for area in G["texts"].values():
        for value in area.values():
            found += value if isinstance(value, list) else [value]
    found += [e["zh"] for e in (*G["status"].values(), *G["leg"].values())]
    return found + list(G["layer"].values()) + _impact_rule_texts()


def _impact_rule_texts() -> list[str]:
    """The zh rationales of the impact verdicts: they live beside their rules
    (``verdict_rules.toml``, ``verdicts.py``) but use the glossary's words too."""
    rules = load_toml(Path(verdicts.__file__).with_name("verdict_rules.toml"))
    found: list[str] = []

    def walk(node: object) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "zh" and isinstance(value, str):
                    found.append(value)
                else:
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(rules)
    found += [verdicts._NONE["zh"], verdicts._HEAD["zh"], verdicts._MORE["zh"]]
    assert len(found) > 30  # every rule has its zh text; an empty walk would pass vacuously
    return found


def test_no_zh_text_uses_a_word_the_glossary_avoids():
    bad = {text: glossary.avoided(text) for text in _all_zh_texts() if glossary.avoided(text)}
    assert bad == {}
    # and the check bites: the words the issue found in the old texts
    assert glossary.avoided("层级") and glossary.avoided("配置: cpu")
    assert glossary.avoided("分诊") and glossary.avoided("Batch 映射")
    assert not glossary.avoided("配置档 cpu，档位 L1")
    assert not glossary.avoided("读写配置项 x，配置文件 y")  # config, not profile


def test_each_concept_has_one_zh_word():
    words = [entry["zh"] for entry in G["terms"].values()]
    assert len(words) == len(set(words))
    assert (glossary.term("layer", "zh"), glossary.term("tier", "zh")) == ("层", "档位")
    assert glossary.term("profile", "zh") == "配置档" and glossary.term("triage", "zh") == "归因"


def test_cut_ends_at_a_word_with_an_ellipsis():
    text = "RuntimeError: the widget frobnicated unexpectedly while compiling"
    cut = glossary.cut(text, 40)
    assert cut.endswith("…") and len(cut) <= 40
    assert text.startswith(cut[:-1]) and text[len(cut) - 1] == " "  # not mid-word
    assert glossary.cut("short", 40) == "short"
    assert re.fullmatch(r"x{9}…", glossary.cut("x" * 30, 10))  # no space: cut at the limit
