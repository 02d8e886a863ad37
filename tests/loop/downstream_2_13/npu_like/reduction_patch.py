"""Pattern 4: monkey-patch of a function whose signature changed.

Like torch_npu (``lowering.make_reduction = make_reduction``), we replace
``torch._inductor.lowering.make_reduction`` with our own factory that has the
2.13.0 signature ``(reduction_type, override_return_dtype=None)``. In 2.14.1
the upstream ``sum_`` lowering calls the module-global ``make_reduction`` at
lowering time with a new keyword ``strict_sum=...``.
"""

from __future__ import annotations

from torch._inductor import lowering as _lowering

CALLS: list[str] = []
_saved = {}


def npu_make_reduction(reduction_type, override_return_dtype=None):
    CALLS.append(reduction_type)
    upstream = _saved["make_reduction"]
    return upstream(reduction_type, override_return_dtype)


def install() -> None:
    _saved["make_reduction"] = _lowering.make_reduction
    _lowering.make_reduction = npu_make_reduction


def uninstall() -> None:
    if "make_reduction" in _saved:
        _lowering.make_reduction = _saved.pop("make_reduction")
