"""Which operators reach a changed upstream symbol (upstream/op_reach.py) and which OpInfo
entries call an operator (upstream/opinfo_index.py), read from source text."""

from __future__ import annotations

import os

import pytest

from instep.impact.upstream import op_reach
from instep.impact.upstream.file_index import index_text
from instep.impact.upstream.op_reach import OpReach
from instep.impact.upstream.opinfo_index import entries_of, read_index

FILES = {
    "torch/_inductor/ops_handler.py": """\
class OpsHandler:
    def masked(self, mask, body, other):
        raise NotImplementedError

    def reduction(self, dtype, src_dtype, reduction_type, value):
        raise NotImplementedError

    def _private(self):
        pass
""",
    "torch/_inductor/ir.py": """\
from torch._inductor.virtualized import ops


class Reduction:
    def __init__(self, fn):
        self.fn = fn

    @classmethod
    def create(cls, fn):
        return cls(fn)

    def store_reduction(self, name):
        return ops.reduction(None, None, "sum", self.fn)


class Unused:
    def store(self):
        return ops.masked(None, None, 0)
""",
    "torch/_inductor/lowering.py": """\
import torch
from torch._inductor import ir
from torch._inductor.ir import Reduction
from torch._inductor.virtualized import ops

aten = torch.ops.aten


def register_lowering(op):
    return lambda fn: fn


def make_reduction(kind):
    def inner(x):
        return Reduction.create(x)

    return inner


def _helper(x):
    return x


@register_lowering(aten.sum)
def sum_(x):
    return make_reduction("sum")(x)


@register_lowering([aten.amax, aten.amin])
def amax(x):
    return ir.Reduction.create(_helper(x))


@register_lowering(aten.constant_pad_nd)
def constant_pad_nd(x, pad):
    loader = x
    return ops.masked(loader, lambda: x, 0.0)

""",
    "torch/_inductor/codegen/triton.py": """\
class TritonKernel:
    def reduction(self, dtype, src_dtype, reduction_type, value):
        return self._combine(value)

    def _combine(self, value):
        return value

    def codegen_kernel(self):
        return ""


class TritonKernelOverrides:
    def masked(self, mask, body, other):
        return body()
""",
    "torch/_refs/__init__.py": """\
import torch

aten = torch.ops.aten


def register_decomposition(op):
    return lambda fn: fn


def _helper(x):
    return x


@register_decomposition(aten.mul)
def mul(a, b):
    return _helper(a)
""",
    "torch/_decomp/decompositions.py": """\
import torch
from torch._inductor.lowering import _helper

aten = torch.ops.aten


def register_decomposition(op):
    return lambda fn: fn


@register_decomposition(aten.addmm)
def addmm(a, b, c):
    return _helper(a)
""",
}


@pytest.fixture(scope="module")
def reach() -> OpReach:
    return OpReach(FILES, lambda p: index_text(p, FILES[p]))


def _ops(reach: OpReach, path: str, qualname: str) -> dict[str, tuple[str, ...]]:
    found = reach.reach(path, qualname)
    assert not found.broad
    return {r.op: r.chain for r in found.routes}


def test_a_registered_def_reaches_its_own_operators(reach):
    found = reach.reach("torch/_inductor/lowering.py", "amax")
    assert {(r.op, r.role, r.depth) for r in found.routes} == {
        ("aten.amax", "lowering", 0),
        ("aten.amin", "lowering", 0),
    }


def test_callers_are_followed_through_helpers_nested_defs_and_module_aliases(reach):
    ops = _ops(reach, "torch/_inductor/ir.py", "Reduction.create")
    # sum_ -> make_reduction (its nested inner calls Reduction.create); amax calls
    # ir.Reduction.create through the module alias; a nested def is reached through the
    # def it is nested in (called there, or returned as a closure)
    assert ops == {
        # the index gives a def the calls of the defs nested in it
        "aten.sum": (
            "torch/_inductor/lowering.py::sum_",
            "torch/_inductor/lowering.py::make_reduction",
            "torch/_inductor/ir.py::Reduction.create",
        ),
        "aten.amax": (
            "torch/_inductor/lowering.py::amax",
            "torch/_inductor/ir.py::Reduction.create",
        ),
        "aten.amin": (
            "torch/_inductor/lowering.py::amax",
            "torch/_inductor/ir.py::Reduction.create",
        ),
    }
    assert set(_ops(reach, "torch/_inductor/lowering.py", "make_reduction.inner")) == {"aten.sum"}
    # a function imported into another module is called there too; another module's
    # function of the same name is not it
    assert set(_ops(reach, "torch/_inductor/lowering.py", "_helper")) == {
        "aten.amax",
        "aten.amin",
        "aten.addmm",
    }


def test_a_kernel_method_is_reached_through_the_ops_handler_and_the_ir_node(reach):
    # TritonKernel.reduction implements OpsHandler.reduction: Reduction.store_reduction's
    # ops.reduction dispatches to it; the IR node's method runs for the nodes that
    # Reduction.create makes, which sum_ and amax call
    ops = _ops(reach, "torch/_inductor/codegen/triton.py", "TritonKernel._combine")
    assert ops["aten.amax"] == (
        "torch/_inductor/lowering.py::amax",
        "via::Reduction.create",
        "torch/_inductor/ir.py::Reduction.store_reduction",
        "via::ops.reduction",
        "torch/_inductor/codegen/triton.py::TritonKernel.reduction",
        "torch/_inductor/codegen/triton.py::TritonKernel._combine",
    )
    masked = _ops(reach, "torch/_inductor/codegen/triton.py", "TritonKernelOverrides.masked")
    assert masked == {
        "aten.constant_pad_nd": (
            "torch/_inductor/lowering.py::constant_pad_nd",
            "via::ops.masked",
            "torch/_inductor/codegen/triton.py::TritonKernelOverrides.masked",
        )
    }


def test_what_no_operator_reaches_has_no_route(reach):
    # codegen_kernel is no OpsHandler method and nothing in the scope calls it by name
    assert (
        reach.reach("torch/_inductor/codegen/triton.py", "TritonKernel.codegen_kernel").routes == ()
    )
    # a private OpsHandler method is no ops.<name> target; outside the scope, nothing
    assert "_private" not in reach.handler_methods()
    assert reach.reach("torch/_dynamo/eval_frame.py", "optimize").routes == ()


def test_a_symbol_on_every_kernels_path_is_broad(monkeypatch):
    lowerings = "\n".join(
        f"@register_lowering(aten.op{i})\ndef op{i}(x):\n    return make(x)\n" for i in range(12)
    )
    files = {
        "torch/_inductor/lowering.py": (
            "import torch\naten = torch.ops.aten\n\n\ndef register_lowering(op):\n"
            "    return lambda fn: fn\n\n\ndef make(x):\n    return x\n\n\n" + lowerings
        )
    }
    monkeypatch.setattr(op_reach, "BROAD", 10)
    found = OpReach(files, lambda p: index_text(p, files[p])).reach(
        "torch/_inductor/lowering.py", "make"
    )
    assert found.broad and len(found.routes) == 12


OP_DB = """\
op_db: list[OpInfo] = [
    UnaryUfuncInfo('abs', aliases=('absolute',), ref=np.abs),
    OpInfo('cdist', supports_out=False),
    OpInfo('nn.functional.relu', aten_name='relu'),
    OpInfo('nn.functional.gelu', aten_backward_name='gelu_backward'),
    OpInfo('softmax', aten_name='softmax', variant_test_name='with_dtype'),
    OpInfo('linalg.solve'),
    OpInfo('_segment_reduce', op=lambda *a: torch.ops.aten.segment_reduce(*a)),
    DecorateInfo(unittest.skip("x"), 'TestX'),
]
op_db += [ReductionOpInfo('sum')]
python_ref_db = [PythonRefInfo('_refs.abs', torch_opinfo_name='abs')]
other = [OpInfo('not_in_op_db')]
"""


def test_opinfo_entries_are_read_from_op_db_alone():
    entries = entries_of("torch/testing/_internal/common_methods_invocations.py", OP_DB)
    assert [e.full_name for e in entries] == [
        "abs",
        "cdist",
        "nn.functional.relu",
        "nn.functional.gelu",
        "softmax.with_dtype",
        "linalg.solve",
        "_segment_reduce",
        "sum",
    ]
    index = read_index(
        ["torch/testing/_internal/common_methods_invocations.py"],
        lambda p: OP_DB.encode(),
    )
    names = {
        op: ([e.full_name for e in index.for_op(op)[0]], index.for_op(op)[1])
        for op in (
            "abs",
            "abs_",
            "relu",
            "gelu",
            "gelu_backward",
            "_cdist_backward",
            "softmax",
            "linalg_solve",
            "segment_reduce",
            "sum",
            "not_in_op_db",
            "absolute",
        )
    }
    assert names == {
        "abs": (["abs"], False),
        "abs_": (["abs"], False),  # in-place runs as the functional op once compiled
        "relu": (["nn.functional.relu"], False),
        "gelu": (["nn.functional.gelu"], False),
        "gelu_backward": (["nn.functional.gelu"], True),  # aten_backward_name
        "_cdist_backward": (["cdist"], True),  # derivatives.yaml's naming
        "softmax": (["softmax.with_dtype"], False),
        "linalg_solve": (["linalg.solve"], False),
        "segment_reduce": (["_segment_reduce"], False),  # op=torch.ops.aten.x
        "sum": (["sum"], False),
        "not_in_op_db": ([], False),
        "absolute": ([], False),  # an alias is no ATen name of the entry
    }


def test_the_op_db_of_a_real_torch(real_wheels):
    """torch 2.14.1's op_db read from the wheel: the entries L5 runs by name."""
    from .conftest import WheelFiles

    wheel = WheelFiles(real_wheels["new"])
    index = read_index(sorted(wheel.names), wheel.read)
    assert len(index.entries) > 600
    assert [e.full_name for e in index.for_op("_cdist_backward")[0]] == ["cdist"]
    assert index.for_op("_cdist_backward")[1] is True
    assert {e.full_name for e in index.for_op("max")[0]} >= {"max.reduction_with_dim", "max.binary"}
    assert os.path.basename(index.for_op("fft_fft")[0][0].path) == "fft.py"
