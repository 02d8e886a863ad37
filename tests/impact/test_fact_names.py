"""Typed facts: ``Fact`` names every fact a rule may read and the modules that compute it;
``verdict_rules.toml``, the enum, the producers' code and docs/impact.md's table of facts
agree, and a rules file naming a fact, kind or change the code does not know is refused
when it loads."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import instep
from instep.impact.join.fact_names import READ_BY_NO_RULE, Fact
from instep.impact.join.verdicts import RulesError, load_rules, rules

IMPACT = Path(instep.__file__).parent / "impact"
DOCS = Path(__file__).resolve().parents[2] / "docs" / "impact.md"


def _docs_table() -> dict[str, set[str]]:
    """fact -> producers, from docs/impact.md's "### Facts" table."""
    text = DOCS.read_text(encoding="utf-8").split("### Facts\n", 1)[1].split("\n###", 1)[0]
    rows = re.findall(r"^\| `(\w+)` \| ([^|]+) \|", text, re.MULTILINE)
    return {fact: set(re.findall(r"`([^`]+)`", producers)) for fact, producers in rows}


def test_every_fact_a_rule_reads_is_a_fact_and_every_fact_but_the_named_is_read() -> None:
    read = {f for r in rules() for f in (*r.facts, *r.not_facts)}
    assert read <= set(Fact)
    assert set(Fact) - read == READ_BY_NO_RULE


def test_the_docs_table_lists_every_fact_with_its_producers() -> None:
    table = _docs_table()
    assert set(table) == {f.value for f in Fact}
    for fact in Fact:
        assert table[fact.value] == set(fact.producers), fact


def test_each_producer_computes_its_fact() -> None:
    """Each producer module names the member (the code that adds it), and no other
    module under impact/join adds it (``facts.add(Fact.X)``, ``{Fact.X}``, ``Fact.X,``)."""
    added = re.compile(r"(?:add\(|\{|frozenset\(\{|, |\()\s*Fact\.(\w+)")
    sources = {
        str(p.relative_to(IMPACT)): p.read_text(encoding="utf-8") for p in IMPACT.rglob("*.py")
    }
    for fact in Fact:
        for producer in fact.producers:
            assert f"Fact.{fact.name}" in sources[producer], (fact, producer)
    for path, text in sources.items():
        if path == "join/fact_names.py":
            continue
        for name in added.findall(text):
            assert path in Fact[name].producers, f"{path} adds Fact.{name}: name it a producer"


def test_a_rules_file_naming_an_unknown_fact_kind_or_change_does_not_load() -> None:
    def rule(**fields: str) -> str:
        body = "".join(f"{k} = {v}\n" for k, v in fields.items())
        return (
            f'[[rule]]\nid = "x.y"\n{body}action = "Test"\nrisk = "low"\ncode_change = "no"\n'
            'en = "e"\nzh = "z"\n\n[[rule]]\nid = "default"\naction = "Check"\nrisk = "low"\n'
            'code_change = "no"\nen = "e"\nzh = "z"\n'
        )

    assert [r.id for r in load_rules(rule(facts='["guarded"]'), "ok.toml")] == ["x.y", "default"]
    cases = {
        "unknown fact 'gaurded'": rule(facts='["gaurded"]'),
        "unknown fact 'old_onli'": rule(not_facts='["old_onli"]'),
        "unknown coupling kind 'hook_names'": rule(kinds='["hook_names"]'),
        "unknown change kind 'bodies'": rule(changes='["bodies"]'),
        "unknown key 'fact'": rule(fact='["guarded"]'),
    }
    for message, text in cases.items():
        with pytest.raises(RulesError, match=re.escape(f"bad.toml: rule 'x.y': {message}")):
            load_rules(text, "bad.toml")


def test_facts_mix_with_plain_strings() -> None:
    """A fact is its word: sets of facts built from members and from strings agree."""
    assert Fact("guarded") is Fact.GUARDED and str(Fact.GUARDED) == "guarded"
    assert {"guarded", "old_only"} == {Fact.GUARDED, Fact.OLD_ONLY}
    assert frozenset({"guarded"}) <= frozenset({Fact.GUARDED, Fact.PACKET})
