"""Verdict rules on real evidence shapes: each rule is reachable and decides as documented."""

from __future__ import annotations

from dataclasses import replace

from instep.impact.join.verdicts import coupling_text, decide, judge_unit, rules
from instep.impact.model import (
    Action,
    ChangeKind,
    CouplingKind,
    Reference,
    Risk,
    Stage,
    SymbolChange,
    Tristate,
    UpstreamChange,
    VersionGate,
)
from instep.pyindex.model import Symbol, SymbolKind

PATH = "torch/_inductor/lowering.py"


def _sym(sig: str, name: str = "expand") -> Symbol:
    return Symbol(PATH, name, SymbolKind.FUNCTION, 10, 20, signature=sig, body_hash="h")


def _change(kind: ChangeKind, old_sig="x, sizes", new_sig="x, sizes, *, implicit=False", also=()):
    return SymbolChange(
        PATH,
        "expand",
        kind,
        SymbolKind.FUNCTION,
        Stage.INDUCTOR,
        old=_sym(old_sig),
        new=None if kind is ChangeKind.REMOVED else _sym(new_sig),
        detail=f"({old_sig}) -> ({new_sig})",
        also=also,
    )


def _ref(kind: CouplingKind, **kw) -> Reference:
    base = dict(
        target="torch._inductor.lowering.expand",
        path="torch_npu/_inductor/lowering_fx.py",
        line=948,
        snippet="def expand(x, sizes):",
    )
    base.update(kw)
    return Reference(kind=kind, **base)


def test_rules_load_and_end_with_default():
    ids = [r.id for r in rules()]
    assert ids[-1] == "default.visible_only"
    assert len(ids) == len(set(ids))


def test_fork_with_old_signature_is_test_not_shim():
    # a fork is a copy the downstream calls itself: upstream's new parameter never reaches it
    c = decide(
        _change(ChangeKind.SIGNATURE, also=(ChangeKind.BODY,)),
        _ref(CouplingKind.FORK, signature="x, sizes", body_hash="b", matched_version="old"),
    )
    assert (c.action, c.risk, c.code_change, c.rule) == (
        Action.TEST,
        Risk.MEDIUM,
        Tristate.NO,  # it keeps the old behaviour: a test tells whether to port
        "fork.stale",
    )


def test_override_with_old_signature_is_shim_only_with_a_breaking_path():
    path = "the new upstream calls it at torch/_inductor/graph.py:12 passing `implicit`"
    c = decide(
        _change(ChangeKind.SIGNATURE, also=(ChangeKind.BODY,)),
        _ref(CouplingKind.SUBCLASS_OVERRIDE, signature="x, sizes", body_hash="b"),
        extra_facts=frozenset({"breaking_path"}),
        evidence=path,
    )
    assert (c.action, c.risk, c.code_change, c.rule) == (
        Action.SHIM,
        Risk.HIGH,
        Tristate.YES,
        "signature.replacement_breaks",
    )
    text = coupling_text(c, "en", None)
    assert "implicit" in text and path in text and c.evidence == path
    # no call passes the new shape: Test, saying so
    none = "no new-upstream call passes `implicit` to it"
    c = decide(
        _change(ChangeKind.SIGNATURE),
        _ref(CouplingKind.MONKEYPATCH, signature="x, sizes", body_hash="b"),
        extra_facts=frozenset({"no_breaking_call"}),
        evidence=none,
    )
    assert (c.action, c.rule) == (Action.TEST, "signature.no_breaking_call")
    assert none in coupling_text(c, "en", None)
    # nothing searched (or the search gave up): Test, never Shim
    c = decide(
        _change(ChangeKind.SIGNATURE),
        _ref(CouplingKind.SUBCLASS_OVERRIDE, signature="x, sizes", body_hash="b"),
    )
    assert (c.action, c.rule) == (Action.TEST, "signature.path_unproven")
    assert "no breaking-path search was made" in coupling_text(c, "en", None)
    # unless the downstream also overrides every upstream caller of the method
    c = decide(
        _change(ChangeKind.SIGNATURE),
        _ref(CouplingKind.SUBCLASS_OVERRIDE, signature="x, sizes", body_hash="b"),
        extra_facts=frozenset({"callers_overridden"}),
    )
    assert (c.action, c.rule) == (Action.TEST, "signature.callers_overridden")


def test_same_op_registration_with_old_signature_is_shim():
    c = decide(
        _change(ChangeKind.SIGNATURE),
        _ref(CouplingKind.REGISTRATION, target="op:aten.expand", signature="x, sizes"),
    )
    assert (c.action, c.rule) == (Action.SHIM, "signature.registration_breaks")
    assert "graph nodes pass their args and kwargs" in coupling_text(c, "en", None)


def test_already_adapted_signature_is_check():
    c = decide(
        _change(ChangeKind.SIGNATURE),
        _ref(CouplingKind.MONKEYPATCH, signature="x, sizes, *, implicit=False", body_hash="b"),
    )
    assert (c.action, c.rule) == (Action.CHECK, "signature.adapted")


def test_version_gate_for_new_torch_means_adapted():
    gate = VersionGate(
        "torch_npu/x.py", 940, "TORCH_VERSION >= (2, 14)", "version_compare", min_version=(2, 14)
    )
    c = decide(
        _change(ChangeKind.SIGNATURE),
        _ref(CouplingKind.MONKEYPATCH, signature="x, sizes", gate=gate),
        new_version=(2, 14, 1),
    )
    assert (c.action, c.already_adapted) == (Action.CHECK, True)
    # the same gate does not count when analysing an older target
    c = decide(
        _change(ChangeKind.SIGNATURE),
        _ref(CouplingKind.MONKEYPATCH, signature="x, sizes", gate=gate),
        new_version=(2, 13, 0),
        extra_facts=frozenset({"breaking_path"}),
    )
    assert c.action is Action.SHIM


def test_removed_symbol_imported_is_shim_unless_guarded():
    c = decide(_change(ChangeKind.REMOVED), _ref(CouplingKind.IMPORT_USE))
    assert (c.action, c.risk, c.rule) == (Action.SHIM, Risk.HIGH, "removed.breaks")
    gate = VersionGate("torch_npu/x.py", 3, "except ImportError", "try_import")
    c = decide(_change(ChangeKind.REMOVED), _ref(CouplingKind.IMPORT_USE, gate=gate))
    assert (c.action, c.rule) == (Action.TEST, "removed.guarded")


def test_body_change_behind_replacing_patch_is_masked():
    body = _change(ChangeKind.BODY, new_sig="x, sizes")
    c = decide(body, _ref(CouplingKind.MONKEYPATCH, signature="x, sizes", body_hash="z"))
    assert (c.action, c.code_change, c.rule) == (Action.TEST, Tristate.UNSURE, "patch.replaces")
    c = decide(
        body,
        _ref(CouplingKind.MONKEYPATCH, signature="*a, **k", body_hash="z", calls_original=True),
    )
    assert (c.action, c.rule) == (Action.TEST, "patch.wraps")


def test_plain_use_of_changed_body_is_test_low():
    c = decide(_change(ChangeKind.BODY, new_sig="x, sizes"), _ref(CouplingKind.IMPORT_USE))
    assert (c.action, c.risk, c.code_change) == (Action.TEST, Risk.LOW, Tristate.NO)


def test_unit_aggregation_and_rationale_languages():
    change = _change(ChangeKind.SIGNATURE)
    unit = UpstreamChange("u1", "expand gains implicit", "commit", files=[PATH], changes=[change])
    couplings = [
        decide(change, _ref(CouplingKind.IMPORT_USE, line=5)),
        decide(
            change, _ref(CouplingKind.REGISTRATION, target="op:aten.expand", signature="x, sizes")
        ),
    ]
    impact = judge_unit(unit, couplings)
    assert impact.action is Action.SHIM and impact.risk is Risk.HIGH
    assert impact.code_change is Tristate.YES and impact.test_needed
    assert impact.couplings[0].action is Action.SHIM  # most severe first
    assert impact.rationale.startswith("Shim: 2 coupling(s)")
    assert "lowering_fx.py:948" in impact.rationale
    zh = judge_unit(unit, couplings, lang="zh")
    assert "耦合" in zh.rationale and "需同步签名" in zh.rationale


def test_unit_without_coupling_says_so():
    change = _change(ChangeKind.BODY, new_sig="x, sizes")
    impact = judge_unit(UpstreamChange("u2", "t", "file", changes=[change]), [])
    assert impact.action is Action.CHECK and not impact.test_needed
    assert impact.rationale.startswith("No coupling found")
    assert judge_unit(
        UpstreamChange("u2", "t", "file", changes=[change]), [], lang="zh"
    ).rationale.startswith("未发现耦合")


def test_reverted_unit_is_downgraded_from_test():
    change = _change(ChangeKind.BODY, new_sig="x, sizes")
    unit = UpstreamChange("u3", "t", "commit", changes=[change], reverted_by="abc123")
    impact = judge_unit(unit, [decide(change, _ref(CouplingKind.IMPORT_USE))])
    assert impact.action is Action.CHECK
    assert "reverted by abc123" in impact.rationale


def test_docs_rule_table_matches_the_rules_in_order():
    """docs/impact.md lists every rule, in decision order, with the verdict it gives."""
    import re
    from pathlib import Path

    docs = Path(__file__).resolve().parents[2] / "docs" / "impact.md"
    rows = []
    for line in docs.read_text(encoding="utf-8").splitlines():
        m = re.match(r"\| `([a-z_]+\.[a-z_]+)` \| .+ \| (.+) \|$", line.strip())
        if m:
            words = re.findall(r"Check|Test|Shim|low|medium|high|unsure|yes|no", m.group(2))
            rows.append((m.group(1), tuple(words[:3])))
    expected = [(r.id, (str(r.action), str(r.risk), str(r.code_change))) for r in rules()]
    assert rows == expected


def test_calls_of_a_class_are_not_checked_against_its_bases():
    # a class's signature text is its bases; the calls go to its __init__
    bases = SymbolChange(
        PATH,
        "Buf",
        ChangeKind.SIGNATURE,
        SymbolKind.CLASS,
        Stage.INDUCTOR,
        old=Symbol(PATH, "Buf", SymbolKind.CLASS, 1, 5, signature="A", body_hash="h"),
        new=Symbol(PATH, "Buf", SymbolKind.CLASS, 1, 5, signature="A, B", body_hash="h"),
        detail="bases (A) -> (A, B)",
    )
    called = frozenset({"called_directly"})
    ref = _ref(CouplingKind.IMPORT_USE, target="torch._inductor.lowering.Buf", detail="use")
    c = decide(bases, replace(ref, call_shapes=("1;;;",)), extra_facts=called)
    assert c.rule == "signature.caller" and c.action is Action.TEST
    # only named (isinstance, annotations): no call can break
    c = decide(bases, replace(ref, call_shapes=()), extra_facts=called)
    assert (c.rule, c.code_change) == ("signature.calls_fit", Tristate.NO)
    # a function's calls are checked
    c = decide(
        _change(ChangeKind.SIGNATURE, old_sig="x, sizes", new_sig="x, sizes, *, implicit"),
        replace(_ref(CouplingKind.IMPORT_USE, detail="use"), call_shapes=("2;;;",)),
        extra_facts=called,
    )
    assert (c.action, c.rule) == (Action.SHIM, "signature.call_breaks")
    assert "does not pass 'implicit', which it requires" in c.detail


def test_an_annotation_only_change_is_check_whatever_the_place():
    change = _change(ChangeKind.ANNOTATION, old_sig="x, sizes", new_sig="x: Tensor, sizes: list")
    for ref in (
        _ref(CouplingKind.IMPORT_USE, detail="use"),  # its calls are unknown: no matter
        _ref(CouplingKind.SUBCLASS_OVERRIDE, signature="x", body_hash="b"),
        _ref(CouplingKind.FORK, signature="x, sizes", body_hash="b", matched_version="old"),
        _ref(CouplingKind.REGISTRATION, target="op:aten.expand", signature="x, sizes"),
    ):
        c = decide(change, ref)
        assert (c.action, c.code_change, c.rule) == (Action.CHECK, Tristate.NO, "annotation.only")
    # with a body change as well, the body decides
    both = _change(ChangeKind.BODY, also=(ChangeKind.ANNOTATION,))
    c = decide(both, _ref(CouplingKind.IMPORT_USE, detail="use"))
    assert c.rule == "use.behaviour"


def test_a_replacement_that_never_fit_is_not_broken_by_the_change():
    # the override never took upstream's `sizes`; upstream dropped `flag`, nothing new
    change = _change(ChangeKind.SIGNATURE, old_sig="x, sizes, flag=False", new_sig="x, sizes")
    ref = _ref(CouplingKind.SUBCLASS_OVERRIDE, signature="x", body_hash="b")
    c = decide(change, ref)
    assert (c.action, c.rule) == (Action.TEST, "signature.replacement_already_differs")
    assert "does not accept 'sizes'" in c.detail
    # a parameter the change adds is a new incompatibility: Shim when a call breaks it
    change = _change(ChangeKind.SIGNATURE, old_sig="x, sizes", new_sig="x, sizes, *, implicit=0")
    c = decide(change, ref, extra_facts=frozenset({"breaking_path"}), evidence="a call")
    assert (c.action, c.rule) == (Action.SHIM, "signature.replacement_breaks")
    assert c.problems == ["does not accept keyword 'implicit'"]
