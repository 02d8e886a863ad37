"""A downstream registration of a changed upstream op: replacing it or only naming it.

Real git repositories: upstream changes the bodies of three lowerings, adds
decompositions (one the downstream falls back on, one it lowers, one it falls back on
with ``override_decomp``), removes a decomposition of an op the downstream lowers, and
adds a whole new op table. The downstream registers its own lowering for one op (it
stands in for upstream's), makes another a fallback and lists it in its own table (other
roles), and generates a pointwise lowering for a third.
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


def make_fallback(op, warn=True, override_decomp=False):
    return op


def register_pointwise(op):
    lowerings[op] = op
    return op


@register_decomposition(aten.flip)
def flip(x, dims):
    return x


@register_lowering(aten.add)
def add(x, y):
    return x + y


@register_lowering(aten.gather)
def gather(x, dim, index):
    return x.gather(dim, index)


@register_lowering(aten.scatter)
def scatter(x, dim, index, src):
    return x.scatter(dim, index, src)
"""

LOWERING_V2 = (
    LOWERING_V1.replace("return x.gather(dim, index)", "return x.gather(dim, index.long())")
    .replace("return x.scatter(dim, index, src)", "return x.scatter(dim, index.long(), src)")
    .replace("return x + y", "return y + x")
    .replace(
        """@register_decomposition(aten.flip)
def flip(x, dims):
    return x
""",
        "",
    )
    + """

@register_decomposition(aten.roll)
def roll(x, shifts, dims=()):
    return x


@register_decomposition(aten.cumsum)
def cumsum(x, dim):
    return x


@register_decomposition(aten.tril)
def tril(x, diagonal=0):
    return x


EPILOGUE_REDUCTIONS = {
    aten.amax: "max",
    aten.sum: "sum",
}
"""
)

DOWN = """\
import torch
from torch._inductor.lowering import make_fallback, register_lowering, register_pointwise
aten = torch.ops.aten

NPU_SLOW_OPS = [
    aten.scatter,
]


@register_lowering(aten.gather)
def npu_gather(x, dim, index):
    return x.gather(dim, index)


make_fallback(aten.scatter)
make_fallback(aten.roll)
make_fallback(aten.roll.default)
make_fallback(aten.tril, override_decomp=True)
register_pointwise(aten.add)


@register_lowering(aten.cumsum)
def npu_cumsum(x, dim):
    return x


@register_lowering(aten.flip)
def npu_flip(x, dims):
    return x


@register_lowering(aten.amax)
def npu_amax(x, dim):
    return x
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


def test_a_fallback_for_an_overload_that_gains_a_decomposition_is_a_shim(couplings):
    # upstream now decomposes aten.roll: upstream make_fallback(aten.roll.default) asserts
    # that the overload is not in the decomposition table, and it now is
    assert couplings[("roll", "make_fallback(aten.roll.default)")] == (
        "Shim",
        "high",
        "unsure",
        "registration.decomposition_meets_fallback",
    )


def test_a_packet_fallback_for_an_op_that_gains_a_decomposition_is_a_test(couplings):
    # the table is keyed by overloads: `aten.roll in decompositions` is False, the assert
    # cannot fire, but the decomposition now runs before the fallback
    assert couplings[("roll", "make_fallback(aten.roll)")] == (
        "Test",
        "high",
        "unsure",
        "registration.decomposition_meets_packet_fallback",
    )


def test_a_fallback_that_overrides_the_decomposition_is_not_a_shim(couplings):
    action, _, _, rule = couplings[("tril", "make_fallback(aten.tril, override_decomp=True)")]
    assert action != "Shim"
    assert rule != "registration.decomposition_meets_fallback"


def test_a_new_decomposition_may_bypass_the_downstream_lowering(couplings):
    assert couplings[("cumsum", "@register_lowering(aten.cumsum)")] == (
        "Test",
        "high",
        "unsure",
        "registration.decomposition_bypasses_lowering",
    )


def test_a_removed_decomposition_hands_the_op_to_the_downstream_lowering(couplings):
    assert couplings[("flip", "@register_lowering(aten.flip)")] == (
        "Test",
        "medium",
        "no",
        "registration.decomposition_removed",
    )


def test_a_new_upstream_op_table_is_only_checked(couplings):
    # a whole new table that lists aten.amax: no registry the downstream writes or reads
    assert couplings[("EPILOGUE_REDUCTIONS", "@register_lowering(aten.amax)")] == (
        "Check",
        "low",
        "no",
        "registration.whole_upstream_table",
    )


def test_a_generated_lowering_is_no_fallback(couplings):
    # register_pointwise stands in for upstream's changed lowering: order decides
    assert couplings[("add", "register_pointwise(aten.add)")] == (
        "Test",
        "medium",
        "unsure",
        "registration.same_op",
    )
