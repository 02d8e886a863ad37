"""Pattern 4b: monkey-patch of a classmethod whose signature changed.

Like torch_npu (``ir.Reduction.create = _patch_reduction_create``), we replace
``torch._inductor.ir.Reduction.create`` with a wrapper of the 2.13.0 signature.
In 2.14.1 ``make_reduction(...).inner`` calls ``Reduction.create(...,
strict_sum=...)``.
"""

from __future__ import annotations

from torch._inductor import ir as _ir
from torch._inductor.ir import ReductionHint

CALLS: list[str] = []
_saved = {}


def _npu_reduction_create(
    cls,
    device,
    dst_dtype,
    src_dtype,
    inner_fn,
    ranges,
    reduction_ranges,
    reduction_type,
    reduction_hint=ReductionHint.DEFAULT,
    input_node=None,
):
    CALLS.append(reduction_type)
    upstream = _saved["create"].__func__
    return upstream(
        cls,
        device,
        dst_dtype,
        src_dtype,
        inner_fn,
        ranges,
        reduction_ranges,
        reduction_type,
        reduction_hint,
        input_node,
    )


def install() -> None:
    _saved["create"] = _ir.Reduction.__dict__["create"]
    _ir.Reduction.create = classmethod(_npu_reduction_create)


def uninstall() -> None:
    if "create" in _saved:
        _ir.Reduction.create = _saved.pop("create")
