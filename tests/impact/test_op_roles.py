"""Op-level couplings per overload and per registry role (issue #31, noise).

* A downstream entry of one overload (``aten.arange.default``) meets no upstream change
  whose entries of the op all name other overloads (a decomposition registered for
  ``aten.arange.start_step`` only); the packet ``aten.arange`` and the same overload do.
* A backend that registers a decomposition of an op is not coupled to upstream's
  lowering of it: the decomposition rewrites the op first (``registration.
  decomposed_first``, Check). Against upstream's meta function of the same op the
  decomposition stays Test (the meta runs before decompositions, on every backend).
"""

from __future__ import annotations

import pytest

from .gitrepo import impact_of_commit

REGISTRARS = """\
import torch
aten = torch.ops.aten
table = {}


def register(op):
    def wrap(fn):
        table[op] = fn
        return fn
    return wrap


register_lowering = register_decomposition = register_meta = register
"""

LOWERING = (
    REGISTRARS
    + """

@register_lowering(aten.expm1)
def expm1(x):
    return x
"""
)
DECOMPS = (
    REGISTRARS
    + """

@register_decomposition(aten.arange.start_step)
def arange_start_step(start, end, step):
    return start
"""
)
META = (
    REGISTRARS
    + """

@register_meta(aten.expm1)
def meta_expm1(x):
    return x
"""
)
V1 = {
    "torch/_inductor/lowering.py": LOWERING,
    "torch/_decomp/__init__.py": "",
    "torch/_decomp/decompositions.py": DECOMPS,
    "torch/_meta_registrations.py": META,
}
V2 = {
    path: text.replace("    return x\n", "    return x * 1\n").replace(
        "    return start\n", "    return start + 0\n"
    )
    for path, text in V1.items()
}

DOWN = """\
import torch
from torch._inductor.decomposition import register_decomposition

aten = torch.ops.aten


@register_decomposition([aten.expm1])
def expm1(x):
    return torch.exp(x) - 1


NPU_OPS = {
    aten.arange.default: "npu_arange",
    aten.arange.start_step: "npu_arange_step",
}
PACKETS = {aten.arange: "npu_arange_any"}


def compiled(m):
    return torch.compile(m)  # the backend runs Inductor
"""


@pytest.fixture(scope="module")
def rows(tmp_path_factory) -> dict[tuple[str, int], tuple[str, str]]:
    doc = impact_of_commit(
        tmp_path_factory.mktemp("roles"),
        V1,
        V2,
        "decomps and lowerings (#12)",
        {"torch_npu/ops.py": DOWN},
    )
    out = {}
    for u in doc["units"]:
        for c in u["couplings"]:
            if c["kind"] == "registration":
                line = int(c["downstream"].rsplit(":", 1)[1])
                out[(c["upstream"].split("::")[1], line)] = (c["rule"], c["action"])
    assert out, "nothing coupled: the fixture is wrong"
    return out


def test_a_decomposed_op_is_not_coupled_to_its_lowering(rows):
    assert rows[("expm1", 7)] == ("registration.decomposed_first", "Check")


def test_the_decomposition_still_meets_the_meta_function(rows):
    assert rows[("meta_expm1", 7)][1] == "Test"


def test_another_overload_is_not_coupled(rows):
    assert ("arange_start_step", 13) not in rows  # aten.arange.default


def test_the_same_overload_and_the_packet_are(rows):
    assert rows[("arange_start_step", 14)][1] == "Test"  # aten.arange.start_step
    assert rows[("arange_start_step", 16)][1] == "Test"  # aten.arange
