"""Correctness, compile time, steady-state speedup and peak memory of one L6 model.

:func:`check_model` runs the triad (eager CPU, eager device, compiled device) on the
forward output and, with ``backward``, the parameter gradients; times the first compiled
call (the compile), then the median of ``iters`` eager and compiled steps after warm-up
(synchronising the device), and reads the device's peak allocated memory (the process's
peak RSS on CPU). Figures are stored with the outcome through :mod:`case_record` as
``model.compile_s``, ``model.eager_ms``, ``model.compiled_ms``, ``model.speedup``,
``model.peak_memory_bytes``.
"""

from __future__ import annotations

import copy
import resource
import statistics
import time
from typing import Any

import torch

from instep.suites.case_record import record_leg, record_value
from instep.suites.models.zoo import ModelSpec
from instep.suites.triad import CompiledMismatch, DeviceEagerMismatch, to_device


def _sync(device: str) -> None:
    module = getattr(torch, device, None)
    if device != "cpu" and module is not None and hasattr(module, "synchronize"):
        module.synchronize()


def _reset_peak(device: str) -> None:
    module = getattr(torch, device, None)
    if device != "cpu" and hasattr(module, "reset_peak_memory_stats"):
        module.reset_peak_memory_stats()


def peak_memory_bytes(device: str) -> float:
    module = getattr(torch, device, None)
    if device != "cpu" and hasattr(module, "max_memory_allocated"):
        return float(module.max_memory_allocated())
    return float(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024  # Linux: KiB


def _step(model: torch.nn.Module, batch: list[Any], backward: bool) -> tuple[Any, list[Any]]:
    model.zero_grad(set_to_none=True)
    out = model(*batch)
    if not backward:
        return out.detach(), []
    out.float().sum().backward()
    return out.detach(), [p.grad for p in model.parameters()]


def _compare(actual: Any, expected: Any, spec: ModelSpec) -> None:
    torch.testing.assert_close(
        to_device(actual, "cpu"),
        to_device(expected, "cpu"),
        atol=spec.atol,
        rtol=spec.rtol,
        check_device=False,
        check_stride=False,
    )


def _median_ms(fn: Any, device: str, iters: int) -> float:
    times = []
    for _ in range(iters):
        _sync(device)
        began = time.perf_counter()
        fn()
        _sync(device)
        times.append((time.perf_counter() - began) * 1000)
    return statistics.median(times)


def check_model(
    spec: ModelSpec,
    device: str,
    backend: str,
    *,
    backward: bool = True,
    iters: int = 10,
    warmup: int = 2,
) -> dict[str, float]:
    """Run the triad and the measurements for ``spec``; returns the recorded figures."""
    torch.manual_seed(0)
    reference = spec.build().train()
    batch = spec.batch(torch.Generator().manual_seed(1))
    try:
        ref_out, ref_grads = _step(reference, batch, backward)
    except Exception:
        record_leg("eager_cpu", "fail")
        raise
    record_leg("eager_cpu", "ok")

    eager_model = copy.deepcopy(reference).to(device)
    dev_batch = to_device(batch, device)
    try:
        eager_out, eager_grads = _step(eager_model, dev_batch, backward)
    except Exception:
        record_leg("eager_device", "fail")
        raise
    try:
        _compare((eager_out, eager_grads), (ref_out, ref_grads), spec)
    except AssertionError as exc:
        record_leg("eager_device", "mismatch")
        raise DeviceEagerMismatch(f"eager {device} differs from eager cpu: {exc}") from exc
    record_leg("eager_device", "ok")

    compiled_model = copy.deepcopy(reference).to(device)
    compiled = torch.compile(compiled_model, backend=backend, fullgraph=True)
    _reset_peak(device)
    began = time.perf_counter()
    try:
        out, grads = _step(compiled, dev_batch, backward)  # type: ignore[arg-type]
        _sync(device)
    except Exception:
        record_leg("compiled_device", "fail")
        raise
    compile_s = time.perf_counter() - began
    try:
        _compare((out, grads), (ref_out, ref_grads), spec)
    except AssertionError as exc:
        record_leg("compiled_device", "mismatch")
        raise CompiledMismatch(f"compiled ({backend}) on {device} differs: {exc}") from exc
    record_leg("compiled_device", "ok")

    for _ in range(warmup):
        _step(eager_model, dev_batch, backward)
        _step(compiled, dev_batch, backward)  # type: ignore[arg-type]
    eager_ms = _median_ms(lambda: _step(eager_model, dev_batch, backward), device, iters)
    compiled_ms = _median_ms(lambda: _step(compiled, dev_batch, backward), device, iters)  # type: ignore[arg-type]
    figures = {
        "compile_s": compile_s,
        "eager_ms": eager_ms,
        "compiled_ms": compiled_ms,
        "speedup": eager_ms / compiled_ms if compiled_ms > 0 else 0.0,
        "peak_memory_bytes": peak_memory_bytes(device),
    }
    for key, value in figures.items():
        record_value(f"model.{key}", value)
    return figures
