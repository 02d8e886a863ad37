"""Whether an operator's route to a change runs on an out-of-tree backend
(join/route_conditions.py, with join/branch_walk.py), read from source text shaped as
torch 2.14.1's: the strict-sum branch of ``Reduction.create`` (needs a CUDA tensor) and
``is_big_gpu``'s int-index branch (the template path passes a device), each both ways, and
the branch shapes one at a time (device tests, short circuits, early exits, loops,
environment variables, unknown values)."""

from __future__ import annotations

import pytest

from instep.impact.join import test_suggestions
from instep.impact.join.route_conditions import RouteConditions
from instep.impact.model import ChangeKind, Stage, SymbolChange, SymbolKind
from instep.impact.upstream.file_index import index_text
from instep.impact.upstream.op_reach import OpReach
from instep.impact.upstream.opinfo_index import OpInfoIndex, entries_of

IR = """\
from torch._inductor.virtualized import ops


class Reduction:
    @classmethod
    def create(cls, inner_fn, numel, hint=None, *, strict_sum=False):
        strict_multirow = False
        if strict_sum and hint in ("DEFAULT", "INNER"):
            strict_multirow = numel <= 64
        if strict_multirow:

            def padded_inner_fn(index):
                return ops.masked(index < numel, inner_fn, 0)

            inner_fn = padded_inner_fn
        return cls(inner_fn)

    def __init__(self, fn):
        self.fn = fn
"""

LOWERING = """\
import os

import torch
from torch._inductor import config
from torch._inductor.ir import Reduction
from torch._inductor.utils import is_big_gpu, use_template
from torch._inductor.virtualized import ops

aten = torch.ops.aten


def register_lowering(op):
    return lambda fn: fn


def _strict_sum_eligible(x, dtype):
    if config.numerics != "strict" or dtype is not None:
        return False
    value = x.meta.get("val")
    if not value.is_cuda or torch.version.hip is not None:
        return False
    return value.ndim == 2


def make_reduction(kind, *, strict_sum=False):
    def inner(x, numel):
        return Reduction.create(x, numel, strict_sum=strict_sum)

    return inner


@register_lowering(aten.sum)
def sum_(x, numel, dtype=None):
    strict = _strict_sum_eligible(x, dtype)
    return make_reduction("sum", strict_sum=strict)(x, numel)


@register_lowering(aten.prod)
def prod(x, numel):
    return make_reduction("prod")(x, numel)


@register_lowering(aten.nansum)
def nansum(x, numel, strict=False):
    return make_reduction("nansum", strict_sum=strict)(x, numel)


@register_lowering(aten.constant_pad_nd)
def constant_pad_nd(x, pad):
    return ops.masked(x, lambda: x, 0.0)


@register_lowering(aten.bmm)
def tuned_bmm(mat1, mat2, layout):
    if use_template(layout):
        return mat1
    return mat2


@register_lowering(aten.mm)
def tuned_mm(mat1, mat2, layout):
    if layout.device.type == "cuda":
        return use_template(layout)
    return mat2


@register_lowering(aten.addmm)
def tuned_addmm(inp, mat1, mat2, layout):
    if os.environ.get("TORCHINDUCTOR_ADDMM_TEMPLATE"):
        return use_template(layout)
    return inp


@register_lowering(aten.baddbmm)
def tuned_baddbmm(inp, mat1, mat2, layout):
    return use_template(layout, index=0)


@register_lowering(aten.cat)
def cat(inputs, dim):
    if not inputs[0].is_cuda:
        return inputs[0]
    return use_template(inputs[0].layout)


@register_lowering(aten.amax)
def amax(x, layout):
    if layout.dtype == "float32":
        return x
    else:
        return x
    return use_template(layout)


@register_lowering(aten.amin)
def amin(x, layout):
    if x.is_cuda:
        return x
    else:
        return layout
    return use_template(layout)


@register_lowering(aten.mean)
def mean(x, keepdim):
    done = False
    for part in x:
        done = True
    if done:
        return is_big_gpu(0)
    return x
"""

UTILS = """\
import torch


def get_gpu_type():
    return "cuda"


def is_big_gpu(index_or_device=0):
    if isinstance(index_or_device, torch.device):
        device = index_or_device
    else:
        device = torch.device(get_gpu_type(), index_or_device)
    return device.index is not None


def use_template(layout, index=None):
    if index is not None:
        return is_big_gpu(index)
    return layout.dtype == "float32" and is_big_gpu(layout.device)
"""

FILES = {
    "torch/_inductor/ops_handler.py": "class OpsHandler:\n    def masked(self, m, b, o):\n"
    "        raise NotImplementedError\n",
    "torch/_inductor/ir.py": IR,
    "torch/_inductor/lowering.py": LOWERING,
    "torch/_inductor/utils.py": UTILS,
    "torch/_inductor/codegen/triton.py": "class TritonKernelOverrides:\n"
    "    def masked(self, mask, body, other):\n        return body()\n",
}
MASKED = ("torch/_inductor/codegen/triton.py", "TritonKernelOverrides.masked")
GPU_TYPE = ("torch/_inductor/utils.py", "get_gpu_type")


@pytest.fixture(scope="module")
def reach() -> OpReach:
    return OpReach(FILES, lambda p: index_text(p, FILES[p]))


@pytest.fixture(scope="module")
def conditions(reach) -> RouteConditions:
    return RouteConditions(lambda p: FILES[p].encode(), reach.index, FILES)


def _judged(reach, conditions, target) -> dict[str, str | None]:
    """Each operator whose route reaches ``target``, with why it never runs (or None)."""
    return {r.op: conditions.unmet(r) for r in reach.reach(*target).routes}


def test_the_strict_sum_branch_needs_a_cuda_tensor(reach, conditions):
    judged = _judged(reach, conditions, MASKED)
    # sum: _strict_sum_eligible returns False once `not value.is_cuda` holds, so
    # make_reduction's strict_sum is False, Reduction.create never sets strict_multirow,
    # and ops.masked is only in the def made under it
    assert judged["aten.sum"] == (
        "`Reduction.create` never calls `TritonKernelOverrides.masked` on this route:"
        " `strict_multirow` is False there (torch/_inductor/ir.py:10)"
    )
    # prod passes no strict_sum: make_reduction's default, False
    assert "`strict_multirow` is False there" in judged["aten.prod"]
    # the other way: nansum passes its own argument, which the graph decides (kept), and
    # constant_pad_nd calls ops.masked itself
    assert judged["aten.nansum"] is None
    assert judged["aten.constant_pad_nd"] is None


def test_an_int_index_branch_is_not_taken_for_a_device(reach, conditions):
    judged = _judged(reach, conditions, GPU_TYPE)
    # the template path passes layout.device: isinstance(..., torch.device) holds, and
    # get_gpu_type is called only in its else branch
    assert judged["aten.bmm"] == (
        "`is_big_gpu` never calls `get_gpu_type` on this route: `isinstance(index_or_device,"
        " torch.device)` is True there (torch/_inductor/utils.py:9)"
    )
    # the other way: baddbmm's route passes index=0 (an int) to is_big_gpu
    assert judged["aten.baddbmm"] is None


def test_device_tests_env_variables_and_early_exits_decide_a_branch(reach, conditions):
    judged = _judged(reach, conditions, GPU_TYPE)
    assert "`layout.device.type == 'cuda'` is False there" in judged["aten.mm"]
    assert "TORCHINDUCTOR_ADDMM_TEMPLATE" in judged["aten.addmm"]  # unset by default
    # `if not inputs[0].is_cuda: return ...`: what follows never runs on the backend
    assert judged["aten.cat"].endswith(
        ": `not inputs[0].is_cuda` is True there and leaves first (torch/_inductor/lowering.py:81)"
    )
    # a name a loop sets is unknown after it: the branch is kept
    assert judged["aten.mean"] is None
    # the test is False and the branch taken (the else) leaves; undecided and both leave
    assert judged["aten.amin"].endswith(
        ": `x.is_cuda` is False there and leaves first (torch/_inductor/lowering.py:97)"
    )
    assert judged["aten.amax"].endswith(
        ": every branch of `layout.dtype == 'float32'` leaves first"
        " (torch/_inductor/lowering.py:88)"
    )


def test_the_suggestions_take_the_nearest_route_that_runs(reach, conditions):
    """For ops.masked, sum's route is left out, constant_pad_nd's and nansum's kept
    (nearest first); without the conditions sum's came too."""
    opinfos = OpInfoIndex()
    for entry in entries_of(
        "torch/testing/_internal/common_methods_invocations.py",
        "op_db = [OpInfo('sum'), OpInfo('nansum'), OpInfo('constant_pad_nd')]\n",
    ):
        opinfos.add(entry)
    change = SymbolChange(
        path=MASKED[0],
        qualname=MASKED[1],
        kind=ChangeKind.BODY,
        symbol_kind=SymbolKind.METHOD,
        stage=Stage.INDUCTOR,
    )
    none = test_suggestions.DownstreamOps()
    with_conditions = test_suggestions.TestSuggester(
        opinfos, reach, ops=none, conditions=conditions
    )
    tests = [t.test for t in with_conditions.for_change(change)]
    assert tests == ["opinfo:constant_pad_nd", "opinfo:nansum"]
    why = _judged(reach, conditions, MASKED)["aten.sum"]
    assert with_conditions.left_out == {
        "aten.sum's lowering `sum_` (torch/_inductor/lowering.py) calls `make_reduction` ->"
        " `Reduction.create` -> `ops.masked` -> `TritonKernelOverrides.masked`": why,
        "aten.prod's lowering `prod` (torch/_inductor/lowering.py) calls `make_reduction` ->"
        " `Reduction.create` -> `ops.masked` -> `TritonKernelOverrides.masked`": why,
    }
    without = test_suggestions.TestSuggester(opinfos, reach, ops=none)
    assert "opinfo:sum" in [t.test for t in without.for_change(change)]
