"""The same op across registries of different roles: an upstream entry of a registry with
a role (inplaceable_ops, a fallback, a lowering) meets a downstream registration of the
same op (or one of its overloads) in another role. End to end on a real git commit."""

from __future__ import annotations

import pytest

from .gitrepo import impact_of_one_commit

UPSTREAM = "torch/_inductor/fx_passes/reinplace.py"
V1 = """\
import torch

aten = torch.ops.aten
inplaceable_ops = {}


def make_fallback(op, layout_constraint=None):
    pass


inplaceable_ops[aten.changed.default] = 1
inplaceable_ops[aten.unrelated.default] = 1
"""
V2 = V1.replace("[aten.changed.default] = 1", "[aten.changed.default] = 2")
V2 += """\
inplaceable_ops[aten.added.default] = 2
inplaceable_ops[aten.other.default] = 2
make_fallback(aten.falls)
NEW_TABLE = [aten.listed]
"""
DOWNSTREAM = """\
import torch
from torch._inductor.lowering import register_lowering

aten = torch.ops.aten


@register_lowering(aten.added.Tensor)
def added(x):
    return x


@register_lowering(aten.added)
def added_all(x):
    return x


@register_lowering(aten.changed)
def changed(x):
    return x


@register_lowering(aten.falls)
def falls(x):
    return x


@register_lowering(aten.listed)
def listed(x):
    return x
"""


@pytest.fixture(scope="module")
def couplings(tmp_path_factory):
    doc = impact_of_one_commit(
        tmp_path_factory.mktemp("roles"),
        UPSTREAM,
        V1,
        V2,
        "[inductor] reinplace added and changed; fall back on falls (#21)",
        {"torch_npu/_inductor/lowering_npu.py": DOWNSTREAM},
    )
    return {
        (c["upstream"].split("::", 1)[1], c["downstream"].rsplit(":", 1)[1]): (
            c["rule"],
            c["action"],
            c["detail"],
        )
        for u in doc["units"]
        for c in u["couplings"]
    }


def test_registries_of_different_roles_meet_on_one_op(couplings):
    rules = {k: v[:2] for k, v in couplings.items()}
    assert rules == {
        # an added inplaceable_ops entry for an op whose packet the downstream lowers (the
        # lowering of aten.added.Tensor, line 7, is another overload: no coupling)
        ("inplaceable_ops[aten.added.default]", "12"): ("registration.cross_registry", "Test"),
        # a changed entry
        ("inplaceable_ops[aten.changed.default]", "17"): ("registration.cross_registry", "Test"),
        # same role (lowering): the existing same-op rule
        ("make_fallback(aten.falls)", "22"): ("registration.same_op", "Test"),
        # a new table that is no known registry stays Check
        ("NEW_TABLE", "27"): ("registration.whole_upstream_table", "Check"),
    }  # aten.other and aten.unrelated: the downstream does not register them
    # the rationale's detail names the downstream registry
    assert couplings[("inplaceable_ops[aten.added.default]", "12")][2].startswith(
        "register_lowering"
    )
