"""The "Test these" order: a place that replaces the changed upstream code without
calling it (``override.replaces``, ``patch.replaces``) weighs 1.1x (export/priority.py
``RULE_WEIGHT``), which orders it before a place the other weights tie with."""

from __future__ import annotations

from instep.impact.export.priority import rank_test_places
from instep.impact.model import (
    Action,
    ChangeKind,
    Coupling,
    CouplingKind,
    Impact,
    Risk,
    Stage,
    SymbolChange,
    Tristate,
    UpstreamChange,
)
from instep.pyindex.model import SymbolKind


def _unit(uid: str, qualname: str, kind: ChangeKind, couplings: list[Coupling]) -> Impact:
    change = SymbolChange(
        path="torch/_inductor/codegen/triton.py",
        qualname=qualname,
        kind=kind,
        symbol_kind=SymbolKind.METHOD,
        stage=Stage.INDUCTOR,
    )
    return Impact(
        change=UpstreamChange(id=uid, title=uid, unit_kind="file", changes=[change]),
        action=Action.TEST,
        risk=Risk.MEDIUM,
        code_change=Tristate.UNSURE,
        test_needed=True,
        stage=Stage.INDUCTOR,
        couplings=couplings,
    )


def _coupling(kind: CouplingKind, rule: str, qualname: str, where: str, owner: str) -> Coupling:
    return Coupling(
        kind=kind,
        upstream=f"torch/_inductor/codegen/triton.py::{qualname}",
        downstream=where,
        snippet="",
        action=Action.TEST,
        risk=Risk.MEDIUM,
        code_change=Tristate.UNSURE,
        rule=rule,
        owner=owner,
    )


def test_a_replacing_override_comes_before_a_place_the_other_weights_tie_with():
    # one unit reaches an override that replaces a changed method (body 1.0 x override
    # 3.0 x Inductor 1.5 x unsure 1.8 = 8.1); two units reach a fork that lacks an added
    # helper (added 1.5 x fork 1.0 x 1.5 x 1.8 = 4.05, x (1 + log2 2) = 8.1): a tie, which
    # the number of units used to break for the fork
    override = _unit(
        "u1",
        "TritonKernel.load",
        ChangeKind.BODY,
        [
            _coupling(
                CouplingKind.SUBCLASS_OVERRIDE,
                "override.replaces",
                "TritonKernel.load",
                "npu/triton.py:10",
                "NPUTritonKernel.load",
            )
        ],
    )
    forks = [
        _unit(
            uid,
            f"helper_{uid}",
            ChangeKind.ADDED,
            [
                _coupling(
                    CouplingKind.FORK,
                    "fork.lacks_added",
                    f"helper_{uid}",
                    "npu/lowering.py:5",
                    "copy_of_lowering",
                )
            ],
        )
        for uid in ("u2", "u3")
    ]
    places = rank_test_places([override, *forks])
    assert [p.place for p in places] == [
        "npu/triton.py::NPUTritonKernel.load",
        "npu/lowering.py::copy_of_lowering",
    ]
    assert [p.priority for p in places] == [8.91, 8.1]


def test_a_patch_that_drops_the_original_comes_before_one_that_wraps_it():
    # the same evidence but the rule: patch.wraps calls the original, patch.replaces does not
    units = [
        _unit(
            uid,
            "TritonKernel.store",
            ChangeKind.BODY,
            [_coupling(CouplingKind.MONKEYPATCH, rule, "TritonKernel.store", where, owner)],
        )
        for uid, rule, where, owner in (
            ("u1", "patch.wraps", "npu/a.py:3", "patch_a"),
            ("u2", "patch.replaces", "npu/b.py:3", "patch_b"),
        )
    ]
    places = rank_test_places(units)
    assert [p.place for p in places] == ["npu/b.py::patch_b", "npu/a.py::patch_a"]
    assert places[0].priority > places[1].priority
