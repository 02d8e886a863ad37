"""A downstream registration of a changed upstream op: replacing it or only naming it.

Real git repositories: upstream changes the bodies of two lowerings and adds a
decomposition; the downstream registers its own lowering for one op (it stands in for
upstream's), makes the other a fallback and lists it in its own table (other roles),
and makes the op that gains a decomposition a fallback.
"""

from __future__ import annotations

import pytest

from .gitrepo import impact_of_one_commit

LOWERING_V1 = """\
import torch
aten = torch.ops.aten
lowerings = {}
decompositions = {}


def register_lowering(op, type_promotion_kind=None):
    def wrap(fn):
        lowerings[op] = fn
        return fn
    return wrap


def register_decomposition(op):
    def wrap(fn):
        decompositions[op] = fn
        return fn
    return wrap


def make_fallback(op, warn=True):
    return op


@register_lowering(aten.gather)
def gather(x, dim, index):
    return x.gather(dim, index)


@register_lowering(aten.scatter)
def scatter(x, dim, index, src):
    return x.scatter(dim, index, src)
"""

LOWERING_V2 = (
    LOWERING_V1.replace(
        "return x.gather(dim, index)", "return x.gather(dim, index.long())"
    ).replace("return x.scatter(dim, index, src)", "return x.scatter(dim, index.long(), src)")
    + """

@register_decomposition(aten.roll)
def roll(x, shifts, dims=()):
    return x
"""
)

DOWN = """\
import torch
from torch._inductor.lowering import make_fallback, register_lowering
aten = torch.ops.aten

NPU_SLOW_OPS = [
    aten.scatter,
]


@register_lowering(aten.gather)
def npu_gather(x, dim, index):
    return x.gather(dim, index)


make_fallback(aten.scatter)
make_fallback(aten.roll)
"""


@pytest.fixture(scope="module")
def couplings(tmp_path_factory):
    doc = impact_of_one_commit(
        tmp_path_factory.mktemp("roles"),
        "torch/_inductor/lowering.py",
        LOWERING_V1,
        LOWERING_V2,
        "[inductor] index dtype in gather/scatter, roll decomposition (#9)",
        {"torch_npu/_inductor/ops.py": DOWN},
    )
    lines = DOWN.split("\n")
    got = {}
    for unit in doc["units"]:
        for c in unit["couplings"]:
            if c["kind"] != "registration":
                continue
            line = int(c["downstream"].rsplit(":", 1)[1])
            key = (c["upstream"].split("::")[1], lines[line - 1].strip())
            got[key] = (c["action"], c["risk"], c["code_change"], c["rule"])
    return got


def test_a_registration_that_stands_in_for_the_changed_one_is_unsure(couplings):
    action, _, code_change, rule = couplings[("gather", "@register_lowering(aten.gather)")]
    assert (action, code_change, rule) == ("Test", "unsure", "patch.replaces")


def test_a_fallback_masks_the_changed_lowering(couplings):
    assert couplings[("scatter", "make_fallback(aten.scatter)")] == (
        "Test",
        "low",
        "no",
        "registration.fallback_masks",
    )


def test_the_same_op_in_another_role_needs_a_test_not_a_code_change(couplings):
    # the downstream's own table of ops: it does not replace upstream's lowering
    assert couplings[("scatter", "aten.scatter,")] == (
        "Test",
        "low",
        "no",
        "registration.other_role",
    )


def test_a_fallback_for_an_op_that_gains_a_decomposition_stays_unsure(couplings):
    # upstream now decomposes aten.roll: the fallback and the new decomposition compete
    assert couplings[("roll", "make_fallback(aten.roll)")][2:] == (
        "unsure",
        "registration.same_op",
    )
