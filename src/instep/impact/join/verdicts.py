"""Decide Check / Test / Shim for each coupling and for each unit, from documented rules.

A coupling's verdict comes from the first rule of ``verdict_rules.toml`` (beside this
module) whose conditions hold for the facts :mod:`instep.impact.join.facts` computes
from the evidence (the downstream reference and the upstream change); the unit's verdict
aggregates its couplings. Rationales are rendered from the rules' texts (English or
Chinese). This module does not find couplings (the passes of ``join/registry.py``) nor
compute facts.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

from instep.impact.join.fact_names import Fact
from instep.impact.join.facts import facts_for
from instep.impact.model import (
    Action,
    ChangeKind,
    Coupling,
    CouplingKind,
    Impact,
    Reference,
    Risk,
    Stage,
    SymbolChange,
    Tristate,
    UpstreamChange,
)
from instep.tomlfile import parse_toml


@dataclass(frozen=True)
class Rule:
    id: str
    kinds: frozenset[str]
    changes: frozenset[str]
    facts: frozenset[str]
    not_facts: frozenset[str]
    action: Action
    risk: Risk
    code_change: Tristate
    text: dict[str, str]

    def matches(self, kind: str, aspects: frozenset[str], facts: frozenset[str]) -> bool:
        return (
            (not self.kinds or kind in self.kinds)
            and (not self.changes or bool(self.changes & aspects))
            and self.facts <= facts
            and not (self.not_facts & facts)
        )


RULES_FILE = "instep/impact/join/verdict_rules.toml"
_RULE_KEYS = frozenset(
    {"id", "kinds", "changes", "facts", "not_facts", "action", "risk", "code_change", "en", "zh"}
)
_KNOWN = {
    "kinds": (frozenset(k.value for k in CouplingKind), "coupling kind", "CouplingKind"),
    "changes": (frozenset(k.value for k in ChangeKind), "change kind", "ChangeKind"),
    "facts": (frozenset(f.value for f in Fact), "fact", "Fact (join/fact_names.py)"),
    "not_facts": (frozenset(f.value for f in Fact), "fact", "Fact (join/fact_names.py)"),
}


class RulesError(ValueError):
    """``verdict_rules.toml`` names something the code does not know: instep's own data is
    wrong (a bug, caught by the tests before a release)."""


@lru_cache(maxsize=1)
def rules() -> tuple[Rule, ...]:
    text = (resources.files("instep.impact.join") / "verdict_rules.toml").read_text("utf-8")
    return load_rules(text, RULES_FILE)


def load_rules(text: str, source: str) -> tuple[Rule, ...]:
    """The rules of ``text`` (the format of ``verdict_rules.toml``), each checked: only
    known keys, coupling kinds, change kinds and facts; the last rule unconditional."""
    out = []
    for r in parse_toml(text, source).get("rule", []):
        where = f"{source}: rule {r.get('id', '(no id)')!r}"
        unknown_keys = sorted(set(r) - _RULE_KEYS)
        if unknown_keys:
            raise RulesError(f"{where}: unknown key {unknown_keys[0]!r}")
        for key, (known, what, home) in _KNOWN.items():
            for name in r.get(key, []):
                if name not in known:
                    raise RulesError(f"{where}: unknown {what} {name!r} (not in {home})")
        out.append(
            Rule(
                id=r["id"],
                kinds=frozenset(r.get("kinds", [])),
                changes=frozenset(r.get("changes", [])),
                facts=frozenset(Fact(f) for f in r.get("facts", [])),
                not_facts=frozenset(Fact(f) for f in r.get("not_facts", [])),
                action=Action(r["action"]),
                risk=Risk(r["risk"]),
                code_change=Tristate(r["code_change"]),
                text={"en": r["en"], "zh": r["zh"]},
            )
        )
    if not out or out[-1].kinds or out[-1].changes or out[-1].facts:
        raise RulesError(f"{source}: must end with an unconditional default rule")
    return tuple(out)


@lru_cache(maxsize=8192)
def _first_rule(kind: str, aspects: frozenset[str], facts: frozenset[str]) -> Rule:
    """The first rule matching (memoised: a release repeats few kind/aspect/fact sets)."""
    return next(r for r in rules() if r.matches(kind, aspects, facts))


def decide(
    change: SymbolChange,
    ref: Reference,
    *,
    kind: CouplingKind | None = None,
    new_version: tuple[int, ...] | None = None,
    extra_facts: frozenset[str] = frozenset(),
    chain: list[str] | None = None,
    detail: str = "",
    evidence: str = "",
) -> Coupling:
    """The verdict for one coupling of ``change`` through the downstream place ``ref``."""
    kind = kind or ref.kind
    facts, problems = facts_for(change, ref, kind, new_version, extra_facts)
    rule = _first_rule(str(kind), frozenset(str(a) for a in change.aspects), facts)
    text = detail or ref.detail
    if problems:
        text = "; ".join([text, *problems]) if text else "; ".join(problems)
    if rule.action is Action.SHIM and not evidence:
        evidence = _direct_evidence(change, ref, problems)
    return Coupling(
        kind=kind,
        upstream=change.ref,
        downstream=ref.at,
        snippet=ref.snippet,
        action=rule.action,
        risk=rule.risk,
        code_change=rule.code_change,
        rule=rule.id,
        chain=chain or [change.ref, ref.at],
        detail=text,
        already_adapted=rule.id.startswith("adapted."),
        gate=ref.gate,
        best_effort=ref.best_effort,
        problems=list(problems),
        owner=ref.owner,
        evidence=evidence,
        role=ref.role,
    )


def _direct_evidence(change: SymbolChange, ref: Reference, problems: list[str]) -> str:
    """A Shim found at the downstream place itself (an unguarded import or read of a
    removed name, a construction or call that no longer binds): the place and what fails
    there, so that every Shim coupling carries its evidence."""
    snippet = " ".join((ref.snippet or "").split())
    if len(snippet) > 80:
        snippet = snippet[:79] + "…"
    where = f"{ref.at} (`{snippet}`)" if snippet else ref.at
    if problems:
        return f"at {where}: " + "; ".join(problems)
    if str(change.kind) == "removed":
        return f"at {where}: the new upstream no longer has `{change.ref}`, and nothing guards it"
    return f"at {where}: {change.kind} change of `{change.ref}`, and nothing guards the place"


# --- unit level --------------------------------------------------------------------

_TRI_ORDER = {Tristate.NO: 0, Tristate.UNSURE: 1, Tristate.YES: 2}


def unit_stage(change: UpstreamChange, couplings: list[Coupling]) -> Stage:
    top = max_action(couplings)
    decisive = {c.upstream for c in couplings if c.action is top}
    pool = [c.stage for c in change.changes if c.ref in decisive] or [
        c.stage for c in change.changes
    ]
    return Counter(pool).most_common(1)[0][0] if pool else Stage.OTHER


def max_action(couplings: list[Coupling]) -> Action:
    return max((c.action for c in couplings), key=lambda a: a.rank, default=Action.CHECK)


def judge_unit(
    change: UpstreamChange,
    couplings: list[Coupling],
    *,
    lang: str = "en",
    suggested_tests: list[str] | None = None,
    upstream: str = "torch",
) -> Impact:
    """Aggregate couplings into one unit verdict with a rationale from the evidence;
    ``upstream`` names the upstream package in the rule texts ("on the new torch")."""
    ordered = sorted(
        couplings,
        key=lambda c: (-c.action.rank, -c.risk.rank, c.upstream, c.downstream),
    )
    action = max_action(ordered)
    if change.reverted_by and action is Action.TEST:
        action = Action.CHECK  # a reverted change reaches nobody until it relands
    risk = max((c.risk for c in ordered), key=lambda r: r.rank, default=Risk.LOW)
    code = max((c.code_change for c in ordered), key=_TRI_ORDER.__getitem__, default=Tristate.NO)
    test_needed = any(c.action is not Action.CHECK for c in ordered)
    impact = Impact(
        change=change,
        action=action,
        risk=risk,
        code_change=code,
        test_needed=test_needed,
        stage=unit_stage(change, ordered),
        couplings=ordered,
        suggested_tests=list(suggested_tests or []),
    )
    impact.rationale = rationale(impact, lang, upstream=upstream)
    return impact


def coupling_text(
    c: Coupling, lang: str, change: SymbolChange | None, upstream: str = "torch"
) -> str:
    rule = next(r for r in rules() if r.id == c.rule)
    problem = "; ".join(c.problems) or c.detail
    return rule.text[lang].format(
        down=c.downstream,
        up=c.upstream,
        detail=(change.detail if change and change.detail else str(change.kind) if change else ""),
        problem=problem,
        gate=c.gate.condition if c.gate else "",
        evidence=c.evidence or _NOT_SEARCHED[lang],
        upstream=upstream,
    )


_NOT_SEARCHED = {
    "en": "no breaking-path search was made",
    "zh": "未进行破坏路径搜索",
}


_NONE = {
    "en": (
        "No coupling found: none of the {n} changed symbols ({sample}) is imported, "
        "subclassed, patched, forked or registered for the same key by the downstream tree; "
        "the change reaches the backend only through upstream code. Check."
    ),
    "zh": (
        "未发现耦合：{n} 个变更符号（{sample}）在下游均无 import 引用、继承覆写、"
        "monkey-patch、fork 或同键注册，改动仅经上游代码透明生效。Check。"
    ),
}
_HEAD = {
    "en": "{action}: {k} coupling(s) into the downstream tree ({kinds}). ",
    "zh": "{action}：下游共 {k} 处耦合（{kinds}）。",
}
_MORE = {"en": " (+{n} more couplings)", "zh": "（另有 {n} 处耦合）"}
_REVERTED = {
    "en": " The change was reverted by {by}; it matters again if it relands.",
    "zh": " 该改动已被 {by} 回退，重新合入时需再评估。",
}


def rationale(impact: Impact, lang: str = "en", shown: int = 3, *, upstream: str = "torch") -> str:
    lang = lang if lang in ("en", "zh") else "en"
    ch = impact.change
    by_ref = {c.ref: c for c in ch.changes}
    if not impact.couplings:
        names = [c.qualname for c in ch.changes]
        sample = ", ".join(names[:5]) + (" …" if len(names) > 5 else "")
        text = _NONE[lang].format(n=len(names), sample=sample)
    else:
        text = _HEAD[lang].format(
            action=impact.action, k=len(impact.couplings), kinds=", ".join(impact.coupling_kinds)
        )
        sep = " " if lang == "en" else ""
        text += sep.join(
            coupling_text(c, lang, by_ref.get(c.upstream), upstream)
            for c in impact.couplings[:shown]
        )
        if len(impact.couplings) > shown:
            text += _MORE[lang].format(n=len(impact.couplings) - shown)
    if ch.reverted_by:
        text += _REVERTED[lang].format(by=ch.reverted_by)
    return text


ALL_ASPECTS = frozenset(k.value for k in ChangeKind)
