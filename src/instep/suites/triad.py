"""The triad of seed 5.2 for one case: eager CPU, eager device, compiled device.

:func:`check_triad` runs ``fn`` eagerly on CPU (the reference), eagerly on the device and
compiled on the device (``fullgraph=True`` unless told otherwise), compares each device
result with the CPU one and records every leg's state (:mod:`case_record`). A compile
error is re-raised unchanged, so triage reads the compiler's own exception chain; a
device-eager failure raises :class:`DeviceEagerMismatch`/the device's error *before*
anything is compiled, so a failure tells "compiler" from "device eager" at once.
Comparison of undefined or random outputs is the caller's choice (``compare``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from instep.suites.case_record import record_leg


class DeviceEagerMismatch(AssertionError):
    """The device's eager result differs from eager CPU: not the compiler's fault."""


class CompiledMismatch(AssertionError):
    """The compiled result differs from eager CPU while device eager agrees."""


def to_device(value: Any, device: str) -> Any:
    """Tensors in ``value`` (nested lists/tuples/dicts) copied to ``device``; grads kept."""
    # torch is the user's: only in the process that runs the case
    import torch

    if isinstance(value, torch.Tensor):
        moved = value.detach().to(device)
        return moved.requires_grad_(value.requires_grad) if moved.is_floating_point() else moved
    if isinstance(value, (list, tuple)):
        return type(value)(to_device(v, device) for v in value)
    if isinstance(value, dict):
        return {k: to_device(v, device) for k, v in value.items()}
    return value


def clone_inputs(value: Any) -> Any:
    """A deep copy of the tensors in ``value`` (the case may mutate its inputs)."""
    # torch is the user's: only in the process that runs the case
    import torch

    if isinstance(value, torch.Tensor):
        copy = value.detach().clone()
        return copy.requires_grad_(value.requires_grad) if copy.is_floating_point() else copy
    if isinstance(value, (list, tuple)):
        return type(value)(clone_inputs(v) for v in value)
    if isinstance(value, dict):
        return {k: clone_inputs(v) for k, v in value.items()}
    return value


def assert_same(
    actual: Any, expected: Any, *, atol: float | None = None, rtol: float | None = None
):
    """``torch.testing.assert_close`` on CPU copies (device and strides not compared)."""
    # torch is the user's: only in the process that runs the case
    import torch

    kwargs: dict[str, Any] = {"equal_nan": True, "check_device": False, "check_stride": False}
    if atol is not None or rtol is not None:
        kwargs.update(atol=atol or 0.0, rtol=rtol or 0.0)
    torch.testing.assert_close(to_device(actual, "cpu"), to_device(expected, "cpu"), **kwargs)


Compare = Callable[[Any, Any], None]


def run_leg(
    leg: str,
    produce: Callable[[], Any],
    check: Callable[[Any], None] | None = None,
    mismatch: Callable[[AssertionError], AssertionError] | None = None,
) -> Any:
    """One leg of the triad: produce its result, check it, record how it went.

    An exception while producing is recorded as ``fail`` and raised unchanged (a compiler
    error stays itself); a failed check is recorded as ``mismatch`` and raised as
    ``mismatch(exc)`` (which says which leg departed from the reference).
    """
    try:
        result = produce()
    except Exception:
        record_leg(leg, "fail")
        raise
    if check is not None:
        try:
            check(result)
        except AssertionError as exc:
            record_leg(leg, "mismatch")
            if mismatch is None:
                raise
            raise mismatch(exc) from exc
    record_leg(leg, "ok")
    return result


def check_triad(
    fn: Callable[..., Any],
    args: Sequence[Any],
    device: str,
    backend: str = "inductor",
    *,
    compare: Compare = assert_same,
    fullgraph: bool = True,
    dynamic: bool | None = None,
    compiled_fn: Callable[..., Any] | None = None,
    check_inputs: bool = False,
    seed: int | None = None,
    backward: bool = False,
) -> tuple[Any, Any, Any]:
    """Run the three legs and return their results ``(eager_cpu, eager_device, compiled)``.

    ``args`` live on the CPU; each leg gets its own copy. ``check_inputs`` also compares
    the inputs after the call (input mutation). ``seed`` re-seeds before every leg.
    ``compiled_fn`` replaces ``torch.compile(fn, ...)`` (e.g. after ``mark_dynamic``).
    ``backward`` also runs ``.backward()`` on the sum of the output and compares the
    gradients of the inputs that require them: a leg's result is then ``(out, grads)``.
    """
    # torch is the user's: only in the process that runs the case
    import torch

    def call(callee: Callable[..., Any], inputs: Sequence[Any]) -> Any:
        if seed is not None:
            torch.manual_seed(seed)
        out = callee(*inputs)
        if not backward:
            return out
        out.sum().backward()
        grads = [t.grad for t in inputs if isinstance(t, torch.Tensor) and t.requires_grad]
        return out.detach(), grads

    cpu_in = clone_inputs(list(args))
    ref = run_leg("eager_cpu", lambda: call(fn, cpu_in))

    dev_in = to_device(clone_inputs(list(args)), device)

    def check(result: Any, inputs: Sequence[Any]) -> None:
        compare(result, ref)
        if check_inputs:
            compare(inputs, cpu_in)

    eager = run_leg(
        "eager_device",
        lambda: call(fn, dev_in),
        lambda result: check(result, dev_in),
        lambda exc: DeviceEagerMismatch(f"eager {device} differs from eager cpu: {exc}"),
    )

    comp_in = to_device(clone_inputs(list(args)), device)
    compiled = compiled_fn or torch.compile(
        fn, backend=backend, fullgraph=fullgraph, dynamic=dynamic
    )
    out = run_leg(
        "compiled_device",
        lambda: call(compiled, comp_in),
        lambda result: check(result, comp_in),
        lambda exc: CompiledMismatch(
            f"compiled ({backend}) on {device} differs from eager cpu: {exc}"
        ),
    )
    return ref, eager, out
