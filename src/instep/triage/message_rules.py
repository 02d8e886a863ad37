"""Message rules: a profile's regexes that name a failure's category from its text.

The text a rule sees is ``Type: message`` of every exception of the chain (outermost
first), followed by the captured stderr tail for crashes and timeouts (the faulthandler
dump names the frame that was running). A rule with ``exception`` set must also match one
of the chain's exception class names (short or qualified). The first matching rule of
the profile wins: the device profile's rules come before the ones of ``base`` (see
``profiles._merge``). Rules carry a ``layer``, or none for manifestations (crash,
timeout), which take the layer of the running stage. Nothing here reads frames.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from instep.profiles import MessageRule, Profile
from instep.triage.signature import short_type


@dataclass(frozen=True)
class RuleMatch:
    rule: MessageRule
    matched: str  # the text the pattern matched, for the evidence

    def as_evidence(self) -> dict[str, Any]:
        return {
            "category": self.rule.category,
            "layer": str(self.rule.layer) if self.rule.layer else None,
            "matched": self.matched[:200],
            "reference": self.rule.reference,
            **({"hint": self.rule.hint} if self.rule.hint else {}),
        }


def failure_text(
    chain: list[dict[str, Any]],
    exception_type: str | None = None,
    message: str | None = None,
    extra: str | None = None,
) -> str:
    """The text rules are matched against (see the module doc)."""
    parts = [f"{c.get('type')}: {c.get('message')}" for c in chain if c.get("type")]
    if not parts and (exception_type or message):
        parts.append(f"{exception_type}: {message}" if exception_type else str(message))
    if extra:
        parts.append(extra)
    return "\n".join(parts)


def exception_names(chain: list[dict[str, Any]], exception_type: str | None = None) -> set[str]:
    names = {str(c.get("type")) for c in chain if c.get("type")}
    if exception_type:
        names.add(exception_type)
    return names | {short_type(n) for n in names}


def match_rule(rules: list[MessageRule], text: str, names: set[str]) -> RuleMatch | None:
    """The first rule whose pattern (and exception name, if given) matches."""
    for rule in rules:
        if rule.exception is not None and rule.exception not in names:
            continue
        hit = rule.compiled().search(text)
        if hit is not None:
            return RuleMatch(rule, hit.group(0))
    return None


def match_profile(profile: Profile, text: str, names: set[str]) -> RuleMatch | None:
    return match_rule(list(profile.rules), text, names)


_NAME_IN_TEXT = r"(?m)(?:^|\s)([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Failed|Warning))\b"


def names_in_text(text: str) -> set[str]:
    """Exception class names written in ``text`` (for messages without a chain)."""
    names = set(re.findall(_NAME_IN_TEXT, text))
    return names | {short_type(n) for n in names}
