"""Pattern 3: import of a name that moved.

torch_npu's own cond lowering builds ``ir.Conditional`` directly. In 2.14.1
``torch._inductor.ir.Conditional`` is gone: ``torch.cond`` (and the new
``torch.switch``) are both lowered to ``ir.Switch``. This module imports the
2.13.0 name at module level, so importing it fails on 2.14.1.
"""

from __future__ import annotations

import torch
from torch._inductor import lowering as _lowering
from torch._inductor.ir import Conditional, TensorBox  # Conditional: gone in 2.14.1

CALLS: list[int] = []
_saved = {}
_COND = torch.ops.higher_order.cond


def npu_cond(pred, true_fn, false_fn, operands):
    CALLS.append(1)
    outs = Conditional.create(pred, true_fn, false_fn, operands)
    return [TensorBox.create(o) for o in outs]


def install() -> None:
    _saved["cond"] = _lowering.lowerings.get(_COND)
    _lowering.register_lowering(_COND, type_promotion_kind=None)(npu_cond)


def uninstall() -> None:
    if "cond" in _saved:
        old = _saved.pop("cond")
        if old is None:
            _lowering.lowerings.pop(_COND, None)
        else:
            _lowering.lowerings[_COND] = old
