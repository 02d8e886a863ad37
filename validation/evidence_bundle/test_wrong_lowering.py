"""A real compile bug on the device, for the evidence-bundle validation on a GPU host.

``test_wrong_sin_lowering`` registers a lowering of ``aten.sin`` that computes ``cos``:
eager CPU and eager device agree, the compiled device result does not, so the triad
files it under numerics and ``instep bundle`` must bring back the generated (Triton)
kernel that computes ``cos``. ``test_right`` is the same program without the bug.
Run by docs/validation/evidence-bundle-cuda.md; not part of the CI suite.
"""

import torch
from torch._inductor import lowering
from torch._inductor.lowering import register_lowering

from instep.suites.triad import check_triad

aten = torch.ops.aten
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def f(x):
    return (x.sin() + 1).relu() * 2


def _inputs():
    return [torch.randn(64, generator=torch.Generator().manual_seed(0))]


def test_right():
    with torch._inductor.config.patch(force_disable_caches=True):
        check_triad(f, _inputs(), DEVICE)


def test_wrong_sin_lowering():
    original = lowering.lowerings[aten.sin.default]
    register_lowering(aten.sin.default)(lambda x: lowering.lowerings[aten.cos.default](x))
    try:
        with torch._inductor.config.patch(force_disable_caches=True):
            check_triad(f, _inputs(), DEVICE)
    finally:
        lowering.lowerings[aten.sin.default] = original
