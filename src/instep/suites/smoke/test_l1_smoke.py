"""L1: backend smoke, one small compiled function per feature a backend must get right.

Each case runs the triad of seed 5.2 (:func:`instep.suites.triad.check_triad`): eager
CPU, eager on the device, compiled on the device with ``fullgraph=True``, and stores each
leg's state with the outcome. The cases are data (:data:`CASES`): pointwise, reductions
(with int/bool accumulation), views/as_strided/slice_scatter, in-place and input
mutation, aliasing outputs, 0-dim/empty/scalar inputs, dtype promotion, ``index_put``
with mixed index dtypes, a fallback op, random ops (statistics and seed
reproducibility), dynamic shapes (``dynamic=True`` and ``mark_dynamic``) and backward.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
import torch
import torch._dynamo
import torch.nn.functional as F

from instep.suites.triad import assert_same, check_triad, to_device


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def randn(*shape: int, seed: int = 0, grad: bool = False) -> torch.Tensor:
    return torch.randn(*shape, generator=_gen(seed)).requires_grad_(grad)


def randint(high: int, *shape: int, dtype: torch.dtype = torch.int64, seed: int = 0):
    return torch.randint(0, high, shape, generator=_gen(seed), dtype=dtype)


@dataclass(frozen=True)
class SmokeCase:
    fn: Callable[..., Any]
    args: Callable[[], list[Any]]
    options: dict[str, Any] = field(default_factory=dict)


def _inplace(x: torch.Tensor) -> torch.Tensor:
    y = x.clone()
    y.add_(1).mul_(2)
    return y


def _mutate_input(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    x.mul_(2)
    y[1:3] = 0.5
    return x + y


def _index_put_mixed(x, i64, i32, v):  # type: ignore[no-untyped-def]
    return x.index_put((i64, i32), v, accumulate=True)


CASES: dict[str, SmokeCase] = {
    "pointwise": SmokeCase(
        lambda a, b: ((a * b) + 1).sin().relu(), lambda: [randn(33), randn(33, seed=1)]
    ),
    "pointwise_broadcast": SmokeCase(
        lambda a, b: torch.tanh(a + b) * 0.5, lambda: [randn(4, 1), randn(1, 5, seed=1)]
    ),
    "where_mask": SmokeCase(
        lambda x: torch.where(x > 0, x, x.new_zeros(())), lambda: [randn(6, 7)]
    ),
    "reduction_sum_dim": SmokeCase(lambda x: x.sum(1), lambda: [randn(8, 129)]),
    "reduction_mean_amax": SmokeCase(lambda x: (x.mean(0), x.amax(-1)), lambda: [randn(5, 9)]),
    "reduction_int_accumulate": SmokeCase(
        lambda x: (x.sum(), x.sum(0)),
        lambda: [torch.full((4096, 2), 2**20, dtype=torch.int32)],
    ),
    "reduction_bool": SmokeCase(
        lambda b: (b.sum(), b.any(), b.all(), b.sum(1, dtype=torch.int32)),
        lambda: [randn(7, 300) > 0],
    ),
    "softmax_layernorm": SmokeCase(
        lambda x: (torch.softmax(x, -1), F.layer_norm(x, (x.shape[-1],))), lambda: [randn(4, 16)]
    ),
    "cumsum": SmokeCase(lambda x: x.cumsum(0), lambda: [randn(50)]),
    "views_transpose_slice": SmokeCase(
        lambda x: x.transpose(0, 1)[1:, ::2] * 2 + x.view(-1)[:4].sum(), lambda: [randn(6, 4)]
    ),
    "as_strided": SmokeCase(
        lambda x: torch.as_strided(x, (3, 3), (1, 3), 1) + 1, lambda: [randn(16)]
    ),
    "slice_scatter": SmokeCase(
        lambda x, s: torch.slice_scatter(x, s, dim=1, start=0, end=8, step=2),
        lambda: [randn(3, 8), randn(3, 4, seed=1)],
    ),
    "cat_stack": SmokeCase(
        lambda a, b: (torch.cat([a, b], 0), torch.stack([a, b], -1)),
        lambda: [randn(3, 4), randn(3, 4, seed=2)],
    ),
    "gather_embedding": SmokeCase(
        lambda w, i: (w[i], torch.gather(w, 1, i[:, None].clamp(max=3))),
        lambda: [randn(10, 4), randint(10, 6)],
    ),
    "inplace": SmokeCase(_inplace, lambda: [randn(12)]),
    "input_mutation": SmokeCase(
        _mutate_input, lambda: [randn(5), randn(5, seed=1)], {"check_inputs": True}
    ),
    "aliasing_outputs": SmokeCase(lambda x: (x.view(-1), x[0], x.t()), lambda: [randn(3, 4)]),
    "zero_dim": SmokeCase(lambda x, y: x * 2 + y, lambda: [torch.tensor(3.5), randn(4)]),
    "empty_tensor": SmokeCase(lambda x: (x.sum(0), x * 2, x.amax(1)), lambda: [torch.zeros(0, 4)]),
    "python_scalar": SmokeCase(lambda x, s: x * s + s, lambda: [randn(6), 2.5]),
    "dtype_promotion": SmokeCase(
        lambda i, f, b: (i + f, i * 2.5, b + i, (i // 3).to(torch.float16) * f),
        lambda: [randint(50, 8, dtype=torch.int32), randn(8), randn(8, seed=3) > 0],
    ),
    "index_put_mixed_dtypes": SmokeCase(
        _index_put_mixed,
        lambda: [
            torch.zeros(4, 5),
            torch.tensor([0, 2, 2]),
            torch.tensor([1, 3, 3], dtype=torch.int32),
            torch.tensor([1.0, 2.0, 3.0]),
        ],
    ),
    "fallback_op": SmokeCase(lambda x: torch.fft.rfft(x).abs() + 1, lambda: [randn(32)]),
    "matmul_linear": SmokeCase(
        lambda x, w, b: F.linear(x, w, b).relu(),
        lambda: [randn(8, 16), randn(4, 16, seed=1), randn(4, seed=2)],
    ),
    "backward": SmokeCase(
        lambda x, w: (x.sin() * w).tanh(),
        lambda: [randn(10, grad=True), randn(10, seed=1, grad=True)],
        {"backward": True},
    ),
    "dynamic_true": SmokeCase(lambda x: (x * 2).sum(0), lambda: [randn(7, 3)], {"dynamic": True}),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_smoke(name: str, device: str, backend: str) -> None:
    case = CASES[name]
    check_triad(case.fn, case.args(), device, backend, **case.options)


def _statistics(out: torch.Tensor, ref: torch.Tensor) -> None:
    """Random outputs: same shape/dtype, values in [0, 1), mean and std near U(0, 1)'s."""
    out, ref = to_device(out, "cpu"), to_device(ref, "cpu")
    assert out.shape == ref.shape and out.dtype == ref.dtype, (out.shape, ref.shape)
    assert float(out.min()) >= 0.0 and float(out.max()) < 1.0
    assert abs(float(out.mean()) - 0.5) < 0.02, f"mean {float(out.mean()):.4f}, expected 0.5"
    assert abs(float(out.std()) - 12**-0.5) < 0.02, f"std {float(out.std()):.4f}"


def _rand(x: torch.Tensor) -> torch.Tensor:
    return torch.rand(20_000, device=x.device) + x.sum() * 0


def test_random_statistics(device: str, backend: str) -> None:
    check_triad(_rand, [torch.zeros(1)], device, backend, compare=_statistics, seed=0)


def test_random_seed_reproducibility(device: str, backend: str) -> None:
    compiled = torch.compile(_rand, backend=backend, fullgraph=True)
    x = torch.zeros(1, device=device)
    torch.manual_seed(1234)
    first = compiled(x)
    torch.manual_seed(1234)
    second = compiled(x)
    torch.manual_seed(4321)
    third = compiled(x)
    assert_same(first, second)
    assert not torch.equal(first.cpu(), third.cpu()), "a new seed gave the same numbers"


def test_dropout_statistics(device: str, backend: str) -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        return F.dropout(x, p=0.25, training=True)

    def compare(out: torch.Tensor, ref: torch.Tensor) -> None:
        out = to_device(out, "cpu")
        kept = out != 0
        assert abs(float(kept.float().mean()) - 0.75) < 0.02, float(kept.float().mean())
        assert torch.allclose(out[kept], torch.full_like(out[kept], 1 / 0.75))

    check_triad(fn, [torch.ones(20_000)], device, backend, compare=compare, seed=0)


def test_mark_dynamic(device: str, backend: str) -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        return (x.cos() + 1).sum(-1)

    torch._dynamo.reset()
    compiled = torch.compile(fn, backend=backend, fullgraph=True)
    for rows in (8, 13):
        x = randn(rows, 5, seed=rows)
        dev = to_device(x, device)
        torch._dynamo.mark_dynamic(dev, 0)
        check_triad(fn, [x], device, backend, compiled_fn=lambda t, _d=dev: compiled(_d))
