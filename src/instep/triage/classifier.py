"""The classifier: layer, category, signature, confidence and evidence of one outcome.

Evidence is combined in the order of trust (seed 000 sections 2 and 5, DESIGN.md):

1. the **backend ladder** (``--bisect``): the first rung that reproduces the failure
   bounds the layer (``evidence.ladder``, filled by ``backend_ladder.py``);
2. the **exception chain**: the innermost known frame of the root exception, mapped
   through the profile's upstream + downstream ``layer_map`` (``exception_layers.py``);
   for crashes and time-outs, the runner's ``evidence.stack_layer`` (the frame that was
   running when the process died or hung);
3. **message rules** of the profile (``message_rules.py``): they always name the category
   when they match, and give the layer when nothing more trusted did. A rule may move the
   layer *earlier* than the frame it was raised in (a ``MissingOperatorWithDecomp``
   raised in lowering is a decomposition-table problem), never later: a later layer
   cannot cause an earlier one to fail;
4. the **eager reference**: a failure whose chain never entered a compile layer and that
   no rule explains is ``eager`` (the test or the device's eager op, seed 000 5.2).

Numerical mismatches are sub-classified by ``numerics.py``. Outcomes that already carry
a layer decided by the runner (collection errors: ``env``) keep it. This module decides;
it does not store (the runner and ``instep triage`` do).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from instep.layers import Layer
from instep.outcome import FAILING, MANIFESTATIONS, Status
from instep.profiles import Profile
from instep.triage.exception_layers import chain_layer, touches_compiler
from instep.triage.message_rules import (
    RuleMatch,
    exception_names,
    failure_text,
    match_profile,
)
from instep.triage.numerics import mismatch_from_message, subcategory
from instep.triage.signature import failure_signature

CONFIDENCE_LADDER = 0.95
CONFIDENCE_FRAMES = 0.8
CONFIDENCE_AGREE = 0.9  # frames and a rule name the same layer
CONFIDENCE_EAGER = 0.5
#: The category of a manifestation that no rule names (keys: ``MANIFESTATIONS``).
_MANIFESTATION_CATEGORY = {Status.CRASHED: "crash.signal", Status.TIMEOUT: "timeout.case"}


@dataclass
class Classification:
    layer: Layer | None
    category: str
    signature: str
    confidence: float
    evidence: dict[str, Any] = field(default_factory=dict)

    def apply(self, data: dict[str, Any]) -> None:
        """Write into an outcome dict (the runner's) or update values for the store."""
        data["layer"] = str(self.layer) if self.layer else None
        data["category"] = self.category
        data["signature"] = self.signature
        data["confidence"] = round(self.confidence, 3)
        evidence = dict(data.get("evidence") or {})
        evidence["triage"] = self.evidence
        data["evidence"] = evidence


class Classifier:
    """Classifies outcome dicts (the runner's, or ``outcome_dict`` rows) for one profile."""

    def __init__(self, profile: Profile, generated_roots: tuple[str, ...] = ()) -> None:
        self.profile = profile
        self.generated_roots = generated_roots

    def file_outcome(self, data: dict[str, Any], nodeid: str) -> None:
        """File the runner's outcome of ``nodeid`` in place, before it is stored.

        An expected failure (``xfailed``) is filed too, as the failure it is, so that an
        expected-failure list can tell when it starts failing for another reason."""
        status = data.get("status")
        if status not in FAILING and not (status == "xfailed" and data.get("exception_chain")):
            return
        found = self.classify(
            {**data, "case": nodeid, "status": "failed"}
            if status == "xfailed"
            else {**data, "case": nodeid}
        )
        if found is not None:
            found.apply(data)

    @staticmethod
    def signature(exception_type: str | None, message: str | None) -> str:
        """The stored signature of a failure (``signature.failure_signature``)."""
        return failure_signature(exception_type, message)

    def classify(self, data: dict[str, Any]) -> Classification | None:
        status = data.get("status")
        if status not in FAILING:
            return None
        chain = list(data.get("exception_chain") or [])
        message = data.get("message") or ""
        exc_type = data.get("exception_type")
        evidence: dict[str, Any] = {"order": []}
        stored = dict(data.get("evidence") or {})

        extra = data.get("stderr_tail") if status in MANIFESTATIONS else None
        text = failure_text(chain, exc_type, message, extra)
        rule = match_profile(self.profile, text, exception_names(chain, exc_type))
        if rule is not None:
            evidence["rule"] = rule.as_evidence()

        frames = chain_layer(chain, self.profile, self.generated_roots)
        frame_layer = frames.layer if frames else None
        if frames is not None:
            evidence["frames"] = frames.as_evidence()
        if frame_layer is None and stored.get("stack_layer"):
            frame_layer = Layer(stored["stack_layer"])
            evidence["frames"] = {
                "layer": str(frame_layer),
                "frame": stored.get("stack_frame"),
                "reason": "stack_at_crash_or_timeout",
            }

        ladder = stored.get("ladder") or {}
        ladder_layer = Layer(ladder["layer"]) if ladder.get("layer") else None
        if ladder.get("min_layer") and frame_layer is not None:
            # only the target backend reproduces: lowering or deeper, the frames choose
            floor = Layer(ladder["min_layer"])
            ladder_layer = frame_layer if frame_layer.depth >= floor.depth else floor
        elif ladder.get("min_layer"):
            ladder_layer = Layer(ladder["min_layer"])
        if ladder_layer is Layer.DYNAMO and frame_layer is Layer.RUNTIME:
            # the eager rung runs the same op kernels: a kernel that fails (or crashes)
            # at run time reproduces there too, which bounds the compiler, not the kernel
            ladder_layer = Layer.RUNTIME
            evidence["ladder_runtime"] = "reproduced by the eager backend in an op kernel"

        layer, confidence, decided_by = self._decide(
            data, chain, rule, frame_layer, ladder_layer, evidence
        )
        category = self._category(status, layer, rule, data, evidence)
        root_type, root_message = _root(data)
        signature = failure_signature(root_type, root_message)
        evidence["decided_by"] = decided_by
        return Classification(layer, category, signature, confidence, evidence)

    # -- decisions ----------------------------------------------------------------------

    def _decide(
        self,
        data: dict[str, Any],
        chain: list[dict[str, Any]],
        rule: RuleMatch | None,
        frame_layer: Layer | None,
        ladder_layer: Layer | None,
        evidence: dict[str, Any],
    ) -> tuple[Layer | None, float, str]:
        rule_layer = rule.rule.layer if rule else None
        if data.get("layer") and str(data.get("category") or "").startswith("env."):
            return Layer(data["layer"]), 0.95, "runner"
        if rule is not None and rule.rule.decisive and rule_layer is not None:
            return rule_layer, rule.rule.confidence, "rule_decisive"
        if ladder_layer is not None:
            return ladder_layer, CONFIDENCE_LADDER, "ladder"
        if frame_layer is not None:
            if (
                rule is not None
                and rule_layer is not None
                and rule_layer.depth < frame_layer.depth
                and rule.rule.confidence >= 0.7
                and rule_layer is not Layer.ENV
            ):
                evidence["moved_earlier"] = f"{frame_layer} -> {rule_layer} by rule"
                return rule_layer, rule.rule.confidence, "rule_earlier_than_frames"
            if rule_layer is frame_layer:
                return frame_layer, CONFIDENCE_AGREE, "frames+rule"
            return frame_layer, CONFIDENCE_FRAMES, "frames"
        if rule_layer is not None:
            return rule_layer, rule.rule.confidence, "rule"
        if data.get("status") == "failed" and chain and not touches_compiler(chain, self.profile):
            return Layer.EAGER, CONFIDENCE_EAGER, "eager_reference"
        if data.get("stage") in ("collect", "setup") or data.get("status") == "error":
            return Layer.ENV, 0.4, "stage"
        return None, 0.0, "none"

    def _category(
        self,
        status: str,
        layer: Layer | None,
        rule: RuleMatch | None,
        data: dict[str, Any],
        evidence: dict[str, Any],
    ) -> str:
        if str(data.get("category") or "").startswith("env."):
            return str(data["category"])
        if layer is Layer.NUMERICS:
            stats = mismatch_from_message(_root(data)[1] or str(data.get("message") or ""))
            if stats is not None:
                evidence["numerics"] = stats.as_evidence()
            return subcategory(stats, str(data.get("case") or data.get("nodeid") or ""))
        if rule is not None and (rule.rule.layer is None or rule.rule.layer is layer):
            return rule.rule.category
        if status in MANIFESTATIONS:
            return _MANIFESTATION_CATEGORY[Status(status)]
        if rule is not None and layer is None:
            return rule.rule.category
        return f"{layer}.unclassified" if layer else "unknown.unclassified"


def _manifestation_type(data: dict[str, Any]) -> str | None:
    if data.get("status") == "crashed":
        return f"Crash[{data.get('signal') or 'signal'}]"
    if data.get("status") == "timeout":
        return "Timeout"
    return None


def _root(data: dict[str, Any]) -> tuple[str | None, str]:
    """Type and message of the root exception: it says most about the cause, the outer
    ones (``BackendCompilerFailed``, ``InductorError``) re-wrap it."""
    if data.get("status") in MANIFESTATIONS:
        return _manifestation_type(data), f"during {data.get('stage') or 'call'}"
    for exc in reversed(data.get("exception_chain") or []):
        if exc.get("message") and exc.get("type"):
            return str(exc["type"]), str(exc["message"])
    return data.get("exception_type"), str(data.get("message") or "")
