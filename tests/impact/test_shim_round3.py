"""Shim precision, round three: three ways a signature change looked like a breaking path
and was not, each against a real upstream git commit, with a case that stays Shim.

1. A call that passes an argument the override rejected under the old upstream too is
   not a call with the *new* shape (``breaking_path._breaks_shape``).
2. A parameter a lowering gained that is no argument of the op's ATen schema
   (``native_functions.yaml`` in the new upstream) cannot come from a graph node
   (``join/op_arguments.py``, rule ``signature.registration_not_op_argument``).
3. A subclass the downstream builds and uses only itself is out of reach of an upstream
   call in an inherited method that the downstream never calls
   (``downstream/class_escapes.py``).
"""

from __future__ import annotations

import pytest

from .e2e_fixture import REGISTER_LOWERING
from .gitrepo import impact_of_commit

KERNEL_V1 = """\
class Kernel:
    def indexing(self, index, block=False, checker=None):
        return index

    def check_bounds(self, index):
        return self.indexing(index, block=False, checker=None)

    def store(self, index):
        return self.indexing(index)


def register_kernel(device, cls):
    return cls
"""

KERNEL_V2 = KERNEL_V1.replace(
    "def indexing(self, index, block=False, checker=None):",
    "def indexing(self, index, block=False, checker=None, mask=False):",
).replace("return self.indexing(index)\n", "return self.indexing(index, mask=True)\n")

GRID_V1 = """\
class GridExpr:
    def generate(self, meta):
        return meta

    def generate_lazy(self, meta):
        return self.generate(meta)

    @staticmethod
    def from_meta_lazy(meta, grid_type):
        grid = globals()[grid_type]()
        grid.generate_lazy(meta)
        return grid


class Grid1D(GridExpr):
    pass


class TritonKernel:
    def _get_grid_type(self):
        return Grid1D

    def codegen(self):
        return {"grid_type": self._get_grid_type().__name__}


def register_grid(cls):
    return cls


class Cse:
    def generate(self, buf, line):
        return line


def emit(holder, meta):
    return holder.grid.generate(meta)
"""

GRID_V2 = (
    GRID_V1.replace("def generate(self, meta):", "def generate(self, meta, is_lazy=False):")
    .replace("return self.generate(meta)", "return self.generate(meta, is_lazy=True)")
    .replace("holder.grid.generate(meta)", "holder.grid.generate(meta, True)")
)

LOWERING_V1 = (
    "import torch\naten = torch.ops.aten\nlowerings = {}\n\n\n"
    + REGISTER_LOWERING
    + """

@register_lowering(aten.expand)
def expand(x, sizes):
    return x


@register_lowering(aten.as_strided)
def as_strided(x, size, stride, storage_offset=None):
    return x
"""
)

LOWERING_V2 = LOWERING_V1.replace(
    "def expand(x, sizes):", "def expand(x, sizes, *, implicit=False):"
).replace(
    "def as_strided(x, size, stride, storage_offset=None):",
    "def as_strided(x, size, stride, storage_offset=None, *, relative_to_input=True):",
)

SCHEMAS = (
    "- func: expand(Tensor(a) self, SymInt[] size, *, bool implicit=False) -> Tensor(a)\n"
    "  variants: method\n"
    "\n"
    "- func: as_strided(Tensor(a) self, SymInt[] size, SymInt[] stride,"
    " SymInt? storage_offset=None) -> Tensor(a)\n"
    "  variants: function, method\n"
)

UPSTREAM_V1 = {
    "torch/_inductor/kernel.py": KERNEL_V1,
    "torch/_inductor/grid.py": GRID_V1,
    "torch/_inductor/lowering.py": LOWERING_V1,
    "aten/src/ATen/native/native_functions.yaml": SCHEMAS,
}
UPSTREAM_V2 = {
    "torch/_inductor/kernel.py": KERNEL_V2,
    "torch/_inductor/grid.py": GRID_V2,
    "torch/_inductor/lowering.py": LOWERING_V2,
}

DOWN_KERNEL = """\
from torch._inductor.kernel import Kernel, register_kernel


class NPUKernel(Kernel):
    def indexing(self, index, block=False):
        return index

    def store(self, index):
        return index


class NPUKernel2(Kernel):
    def indexing(self, index, block=False):
        return index


register_kernel("npu", NPUKernel)
register_kernel("npu2", NPUKernel2)
"""

DOWN_GRID = """\
import dataclasses

from torch._inductor.grid import GridExpr, TritonKernel, register_grid


class GridNpu(GridExpr):
    def generate(self, meta):
        return meta


class FixedGridNpu(GridNpu):
    def generate(self, meta):
        return meta


@dataclasses.dataclass
class PrecomputedGridNpu(GridNpu):
    def generate(self, meta):
        return meta


class DottedGrid(GridExpr):
    def generate(self, meta):
        return meta


class HandedGrid(GridExpr):
    def generate(self, meta):
        return meta


class GridExprNpu(GridExpr):
    @staticmethod
    def from_meta_and_set_numel(meta):
        grid_cls = globals()[meta["grid_type"]]
        if not issubclass(grid_cls, GridNpu):
            raise AssertionError(meta)
        grid = grid_cls()
        grid.generate(meta)
        return grid


class NPUTritonKernel(TritonKernel):
    def _get_grid_type(self):
        return GridNpu


FIXED = {"grid_type": FixedGridNpu.__name__}
PRECOMPUTED = {"grid_type": "PrecomputedGridNpu"}
ENTRY_POINT = "torch_npu._inductor.grid.DottedGrid"
register_grid(HandedGrid)
"""

DOWN_LOWERING = """\
import torch
from torch._inductor.lowering import register_lowering

aten = torch.ops.aten


@register_lowering(aten.expand)
def expand(x, sizes):
    return x


@register_lowering(aten.as_strided)
def as_strided(x, size, stride, storage_offset=None):
    return x
"""

# the same grid, but the downstream itself calls the inherited method that breaks
DOWN_GRID_CALLED = DOWN_GRID + "\n\ndef lazy(meta):\n    GridNpu().generate_lazy(meta)\n"


def _couplings(doc: dict) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for unit in doc["units"]:
        for c in unit["couplings"]:
            if c["kind"] in ("subclass_override", "registration"):
                out[f"{c['upstream'].split('::')[1]}@{c['owner'] or c['downstream']}"] = c
    return out


@pytest.fixture(scope="module")
def couplings(tmp_path_factory) -> dict[str, dict]:
    doc = impact_of_commit(
        tmp_path_factory.mktemp("round3"),
        UPSTREAM_V1,
        UPSTREAM_V2,
        "new parameters",
        {
            "torch_npu/_inductor/kernel.py": DOWN_KERNEL,
            "torch_npu/_inductor/grid.py": DOWN_GRID,
            "torch_npu/_inductor/lowering.py": DOWN_LOWERING,
        },
    )
    return _couplings(doc)


def test_a_call_passing_only_the_old_shape_is_no_breaking_path(couplings):
    # check_bounds passes `checker`, which the override lacked before the change too;
    # the only call passing `mask` is in `store`, which NPUKernel overrides
    c = couplings["Kernel.indexing@NPUKernel.indexing"]
    assert (c["action"], c["rule"]) == ("Test", "signature.no_breaking_call"), c["evidence"]
    assert "no new-upstream call passes `mask` to it" in c["evidence"]
    assert "NPUKernel overrides the caller `Kernel.store`" in c["evidence"]


def test_a_call_passing_the_new_keyword_still_breaks(couplings):
    c = couplings["Kernel.indexing@NPUKernel2.indexing"]
    assert (c["action"], c["rule"]) == ("Shim", "signature.replacement_breaks")
    assert "torch/_inductor/kernel.py:9" in c["evidence"] and "`Kernel.store`" in c["evidence"]


def test_a_lowering_parameter_that_is_no_schema_argument_is_test(couplings):
    c = next(v for k, v in couplings.items() if k.startswith("as_strided@"))
    assert (c["action"], c["rule"]) == ("Test", "signature.registration_not_op_argument")
    assert (
        "`relative_to_input` is no argument of the schema of `aten::as_strided`" in (c["evidence"])
    )
    assert "aten/src/ATen/native/native_functions.yaml:4" in c["evidence"]


def test_a_lowering_parameter_in_the_schema_stays_shim(couplings):
    c = next(v for k, v in couplings.items() if k.startswith("expand@"))
    assert (c["action"], c["rule"]) == ("Shim", "signature.registration_breaks")
    assert "implicit" in " ".join(c["problems"])


@pytest.mark.parametrize("owner", ["GridNpu", "FixedGridNpu", "PrecomputedGridNpu"])
def test_a_subclass_built_only_downstream_is_not_reached(couplings, owner):
    c = couplings[f"GridExpr.generate@{owner}.generate"]
    assert (c["action"], c["rule"]) == ("Test", "signature.no_breaking_call"), c["evidence"]
    assert "built and used only downstream" in c["evidence"]
    assert "the downstream never calls `generate_lazy` on it" in c["evidence"]
    assert "torch/_inductor/grid.py:6" in c["evidence"]
    # an untyped receiver (another class defines `generate` too) is never it either
    assert f"receiver `holder.grid` is never {owner}" in c["evidence"]


@pytest.mark.parametrize("owner", ["HandedGrid", "DottedGrid"])
def test_a_subclass_handed_to_upstream_or_named_by_path_stays_shim(couplings, owner):
    c = couplings[f"GridExpr.generate@{owner}.generate"]
    assert (c["action"], c["rule"]) == ("Shim", "signature.replacement_breaks")
    assert "`GridExpr.generate_lazy`" in c["evidence"]


def test_a_subclass_on_which_the_downstream_calls_the_breaking_method_stays_shim(
    tmp_path_factory,
):
    doc = impact_of_commit(
        tmp_path_factory.mktemp("round3_called"),
        {"torch/_inductor/grid.py": GRID_V1},
        {"torch/_inductor/grid.py": GRID_V2},
        "is_lazy",
        {"torch_npu/_inductor/grid.py": DOWN_GRID_CALLED},
    )
    c = _couplings(doc)["GridExpr.generate@GridNpu.generate"]
    assert (c["action"], c["rule"]) == ("Shim", "signature.replacement_breaks")
