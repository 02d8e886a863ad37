"""How L5 calls and checks one OpInfo case, the way upstream's Inductor OpInfo test does.

A case is op x dtype (x every sample with ``--instep-all-samples``, else the first
sample). Like ``test/inductor/test_torchinductor_opinfo.py`` it calls ``op.get_op()``
through a plain wrapper function, resets Dynamo per case, compiles with
``fullgraph=True`` (otherwise Dynamo silently falls back to eager and hides the failure)
and lets Dynamo capture data-dependent shapes and scalars. To keep the harness from
inventing failures it: seeds *outside* the compiled function and replaces OpInfo's
``wrapper_set_seed`` with a plain call (Dynamo skips the original: "Attempted to call
function marked as skipped"); compares random ops statistically (ops the dispatcher tags
``nondeterministic_seeded`` while the eager reference runs, plus the patterns in
``data/opinfo.toml``); compares only shape/dtype of undefined outputs (``empty*``).
Samples are built on the CPU (eager CPU is the reference, ``reference_in_float`` for
float16/bfloat16 as upstream does) and copied to the device for the other two legs.
"""

from __future__ import annotations

import fnmatch
import functools
import math
import unittest
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from instep.suites.triad import (
    CompiledMismatch,
    DeviceEagerMismatch,
    clone_inputs,
    run_leg,
    to_device,
)
from instep.tomlfile import load_toml
from instep.user_python import run_script

DATA = Path(__file__).resolve().parent.parent / "data" / "opinfo.toml"
LOW_PRECISION = ("float16", "bfloat16")


GRAD_SUFFIX = ":grad"  # in an ops selection: this op with its gradients checked too


@dataclass(frozen=True)
class OpCase:
    op_name: str  # full name: name[.variant]
    dtype: str
    grad: bool = False  # selected as ``name:grad``: compare gradients too

    @property
    def id(self) -> str:
        return f"{self.op_name}-{self.dtype}"


@functools.lru_cache(maxsize=1)
def harness_data() -> dict[str, Any]:
    return load_toml(DATA)


def full_name(op: Any) -> str:
    return op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")


@functools.lru_cache(maxsize=1)
def ops_by_name() -> dict[str, Any]:
    # torch is the user's: only in the process that runs the case
    from torch.testing._internal.common_methods_invocations import op_db

    return {full_name(op): op for op in op_db}


def split_selection(only: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``('sum', 'cdist:grad')`` -> the name patterns, and those wanting gradients."""
    names = tuple(p.removesuffix(GRAD_SUFFIX) for p in only)
    grad = tuple(p.removesuffix(GRAD_SUFFIX) for p in only if p.endswith(GRAD_SUFFIX))
    return names, grad


def enumerate_cases(
    device: str, dtypes: tuple[str, ...], only: tuple[str, ...] = (), limit: int = 0
) -> list[OpCase]:
    """op x supported dtype over ``op_db`` in its order; ``limit`` caps the number of ops.
    ``only`` selects ops by name pattern; ``name:grad`` selects one with its gradients.

    For a device other than the CPU the enumeration runs in a child process: importing
    ``op_db`` evaluates device capabilities (``SM53OrLater`` and the like), which
    initialises CUDA, and a fork server whose collection initialised CUDA cannot fork
    usable case processes ("Cannot re-initialize CUDA in forked subprocess").
    """
    if device == "cpu":
        return _enumerate_here(device, dtypes, only, limit)
    pairs, error = run_script(_ENUMERATE_CHILD, [device, list(dtypes), list(only), limit])
    if error is not None:
        raise RuntimeError(f"enumerating OpInfo cases for {device} failed: {error}")
    return [OpCase(name, dtype, grad) for name, dtype, grad in pairs]


_ENUMERATE_CHILD = """
import json, sys
from instep.suites.opinfo.harness import _enumerate_here
from instep.user_python import ANSWER_MARK
device, dtypes, only, limit = json.loads(sys.argv[1])
cases = _enumerate_here(device, tuple(dtypes), tuple(only), limit)
sys.stdout.write(ANSWER_MARK + json.dumps([[c.op_name, c.dtype, c.grad] for c in cases]))
"""


def _enumerate_here(
    device: str, dtypes: tuple[str, ...], only: tuple[str, ...] = (), limit: int = 0
) -> list[OpCase]:
    # torch is the user's: only in the process that runs the case
    import torch

    skip = harness_data().get("skip", {})
    only, with_grad = split_selection(only)
    cases: list[OpCase] = []
    ops_taken = 0
    for name, op in ops_by_name().items():
        if only and not any(fnmatch.fnmatchcase(name, pattern) for pattern in only):
            continue
        grad = any(fnmatch.fnmatchcase(name, pattern) for pattern in with_grad)
        if any(fnmatch.fnmatchcase(name, pattern) for pattern in skip):
            continue
        wanted = [d for d in dtypes if op.supports_dtype(getattr(torch, d), device)]
        if not wanted:
            continue
        if limit and ops_taken >= limit:
            break
        ops_taken += 1
        cases += [OpCase(name, d, grad) for d in wanted]
    return cases


def is_undefined_output(name: str) -> bool:
    return name in harness_data().get("undefined_output_ops", [])


def _seedless_wrapper(op: Any, *args: Any, **kwargs: Any) -> Any:
    # OpInfo's own wrapper seeds inside the op: Dynamo skips it. We seed outside.
    return op(*args, **kwargs)


def _patch_wrapper_set_seed() -> None:
    # torch is the user's: only in the process that runs the case
    import torch.testing._internal.common_methods_invocations as cmi

    cmi.wrapper_set_seed = _seedless_wrapper


def _calls_rng(fn: Any, args: list[Any], kwargs: dict[str, Any]) -> tuple[Any, bool]:
    # torch is the user's: only in the process that runs the case
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    class SeededOps(TorchDispatchMode):
        hit = False

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            if torch.Tag.nondeterministic_seeded in func.tags:
                SeededOps.hit = True
            return func(*args, **(kwargs or {}))

    with SeededOps():
        out = fn(*args, **kwargs)
    return out, SeededOps.hit


def _tensors(value: Any) -> list[Any]:
    # torch is the user's: only in the process that runs the case
    import torch

    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _tensors(v)]
    return []


def assert_statistically_close(actual: Any, expected: Any) -> None:
    """Random outputs: same structure, shapes and dtypes; moments agree within 6 sigma."""
    # torch is the user's: only in the process that runs the case
    import torch

    got, want = _tensors(to_device(actual, "cpu")), _tensors(to_device(expected, "cpu"))
    assert len(got) == len(want), f"{len(got)} output tensors, expected {len(want)}"
    for a, b in zip(got, want, strict=True):
        assert a.shape == b.shape, f"shape {tuple(a.shape)}, expected {tuple(b.shape)}"
        assert a.dtype == b.dtype, f"dtype {a.dtype}, expected {b.dtype}"
        if a.numel() < 30 or not (a.is_floating_point() or a.dtype == torch.bool):
            continue
        a64, b64 = a.double().flatten(), b.double().flatten()
        fa, fb = a64[torch.isfinite(a64)], b64[torch.isfinite(b64)]
        if fa.numel() < 30 or fb.numel() < 30:
            continue
        spread = max(float(fa.std()), float(fb.std()), 1e-12)
        bound = 6 * spread * math.sqrt(1 / fa.numel() + 1 / fb.numel()) + 1e-9
        gap = abs(float(fa.mean()) - float(fb.mean()))
        assert gap <= bound, f"mean {float(fa.mean()):.5g} vs {float(fb.mean()):.5g}"
        if float(fb.std()) > 1e-9:
            ratio = float(fa.std()) / float(fb.std())
            assert 0.5 < ratio < 2.0, f"std ratio {ratio:.3f}"


def assert_same_layout(actual: Any, expected: Any) -> None:
    """Undefined outputs: shapes and dtypes only."""
    got, want = _tensors(actual), _tensors(expected)
    assert len(got) == len(want)
    for a, b in zip(got, want, strict=True):
        assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, a.dtype, b.shape, b.dtype)


def assert_values_close(actual: Any, expected: Any, low_precision: bool = False) -> None:
    # torch is the user's: only in the process that runs the case
    import torch

    a, b = to_device(actual, "cpu"), to_device(expected, "cpu")
    if low_precision:  # the reference was computed in float32 (reference_in_float)
        a = _upcast(a)
        torch.testing.assert_close(
            a, b, rtol=1e-2, atol=1e-2, equal_nan=True, check_device=False, check_stride=False
        )
        return
    torch.testing.assert_close(a, b, equal_nan=True, check_device=False, check_stride=False)


def _upcast(value: Any) -> Any:
    # torch is the user's: only in the process that runs the case
    import torch

    if isinstance(value, torch.Tensor):
        return value.float() if value.dtype in (torch.float16, torch.bfloat16) else value
    if isinstance(value, (list, tuple)):
        return type(value)(_upcast(v) for v in value)
    return value


def _grads(out: Any, inputs: list[Any]) -> list[Any]:
    # torch is the user's: only in the process that runs the case
    import torch

    leaves = [t for t in _tensors(inputs) if t.requires_grad]
    outs = [t for t in _tensors(out) if t.requires_grad and t.is_floating_point()]
    if not leaves or not outs:
        return []
    loss = sum(t.sum() for t in outs)
    return list(torch.autograd.grad(loss, leaves, allow_unused=True))


def run_case(
    case: OpCase, device: str, backend: str, *, all_samples: bool = False, grad: bool = False
) -> int:
    """Run the triad for every chosen sample of ``case``; returns the samples checked."""
    # torch is the user's: only in the process that runs the case
    import torch
    import torch._dynamo
    import torch._dynamo.config as dynamo_config

    _patch_wrapper_set_seed()
    op = ops_by_name()[case.op_name]
    dtype = getattr(torch, case.dtype)
    func = op.get_op()

    def fn(*args: Any, **kwargs: Any) -> Any:
        return func(*args, **kwargs)

    requires_grad = bool(
        grad and op.supports_autograd and dtype in op.supported_backward_dtypes("cpu")
    )
    torch.manual_seed(0)
    samples = op.sample_inputs("cpu", dtype, requires_grad=requires_grad)
    if not all_samples:
        samples = [next(iter(samples))]
    undefined = is_undefined_output(case.op_name)
    patterns = harness_data().get("random_op_patterns", [])
    named_random = any(fnmatch.fnmatchcase(case.op_name, p) for p in patterns)
    low = case.dtype in LOW_PRECISION
    keep = _matching(harness_data().get("keep_on_cpu", {}), case.op_name)
    signs = _matching(harness_data().get("sign_ambiguous_outputs", {}), case.op_name)
    checked = 0
    for sample in samples:
        args = [sample.input, *sample.args]
        kwargs = dict(sample.kwargs)
        torch._dynamo.reset()
        # eager CPU (reference; in float32 for low precision dtypes, as upstream)
        ref_args, ref_kwargs = clone_inputs(args), clone_inputs(kwargs)
        if low:
            ref_args, ref_kwargs = _to_float(ref_args), _to_float(ref_kwargs)

        # (the closures below run within this iteration: defaults bind its values)
        def reference(
            ref_args: list[Any] = ref_args, ref_kwargs: dict[str, Any] = ref_kwargs
        ) -> tuple[Any, bool, list[Any]]:
            torch.manual_seed(0)
            ref, seeded = _calls_rng(fn, ref_args, ref_kwargs)
            return ref, seeded, (_grads(ref, ref_args) if requires_grad else [])

        try:
            ref, seeded, ref_grads = run_leg("eager_cpu", reference)
        except NotImplementedError as exc:
            if not no_cpu_kernel(exc):
                raise
            # a skip (pytest honours unittest's), not a failure: nothing to compare with
            raise unittest.SkipTest(
                f"no eager CPU reference: {case.op_name} has no CPU kernel ({exc})"
            ) from None
        random = seeded or named_random

        def compare(actual: Any, expected: Any, random: bool = random) -> None:
            if signs and isinstance(actual, tuple) and isinstance(expected, tuple):
                actual = normalise_signs(actual, signs)
                expected = normalise_signs(expected, signs)
            if undefined:
                assert_same_layout(actual, expected)
            elif random:
                assert_statistically_close(_upcast(actual) if low else actual, expected)
            else:
                assert_values_close(actual, expected, low)

        def check(
            result: tuple[Any, list[Any]], ref: Any = ref, ref_grads: list[Any] = ref_grads
        ) -> None:
            compare(result[0], ref)
            if requires_grad:
                compare(result[1], ref_grads)

        def leg_of(callee: Any, leg_args: list[Any], leg_kwargs: dict[str, Any]) -> Any:
            def produce() -> tuple[Any, list[Any]]:
                torch.manual_seed(0)
                out = callee(*leg_args, **leg_kwargs)
                return out, (_grads(out, leg_args) if requires_grad else [])

            return produce

        # eager device
        dev_args, dev_kwargs = to_device_except(clone_inputs(args), kwargs, device, keep)
        run_leg(
            "eager_device",
            leg_of(fn, dev_args, dev_kwargs),
            check,
            lambda exc: DeviceEagerMismatch(f"eager {device} differs from eager cpu: {exc}"),
        )
        # compiled device
        comp_args, comp_kwargs = to_device_except(clone_inputs(args), kwargs, device, keep)
        compiled = torch.compile(fn, backend=backend, fullgraph=True)
        with dynamo_config.patch(
            capture_scalar_outputs=True, capture_dynamic_output_shape_ops=True
        ):
            run_leg(
                "compiled_device",
                leg_of(compiled, comp_args, comp_kwargs),
                check,
                lambda exc: CompiledMismatch(
                    f"compiled ({backend}) {case.op_name} {case.dtype} on {device} differs"
                    f" from eager cpu: {exc}"
                ),
            )
        checked += 1
    return checked


def _matching(table: dict[str, list[Any]], op_name: str) -> list[Any]:
    """The entry of a data table whose fnmatch pattern matches ``op_name`` ([] if none)."""
    for pattern, value in table.items():
        if fnmatch.fnmatchcase(op_name, pattern):
            return list(value)
    return []


def no_cpu_kernel(exc: BaseException) -> bool:
    """Whether the eager CPU reference failed because the op has no CPU kernel at all
    (a CUDA/NPU-only op such as ``_efficient_attention_forward``): a harness limit."""
    text = str(exc)
    return "Could not run" in text and "'CPU' backend" in text


def to_device_except(
    args: list[Any], kwargs: dict[str, Any], device: str, keep: list[Any]
) -> tuple[list[Any], dict[str, Any]]:
    """``args``/``kwargs`` on ``device``, except the positions (in ``args``) and keyword
    names in ``keep``, which the op requires on the CPU."""
    moved = [a if i in keep else to_device(a, device) for i, a in enumerate(args)]
    moved_kwargs = {k: v if k in keep else to_device(v, device) for k, v in kwargs.items()}
    return moved, moved_kwargs


def normalise_signs(outputs: tuple[Any, ...], positions: list[int]) -> tuple[Any, ...]:
    """Outputs defined up to each column's sign, made comparable: every column of the
    listed outputs is flipped so that its largest-magnitude element is positive."""
    # torch is the user's: only in the process that runs the case
    import torch

    out = list(outputs)
    for i in positions:
        t = out[i]
        if not isinstance(t, torch.Tensor) or t.dim() < 2 or t.is_complex():
            continue
        t = t.detach().cpu()
        pivot = t.abs().argmax(dim=-2, keepdim=True)
        sign = torch.sign(torch.gather(t, -2, pivot))
        out[i] = t * torch.where(sign == 0, torch.ones_like(sign), sign)
    return tuple(out)


def _to_float(value: Any) -> Any:
    # torch is the user's: only in the process that runs the case
    import torch

    if isinstance(value, torch.Tensor):
        if value.dtype in (torch.float16, torch.bfloat16):
            return value.detach().float().requires_grad_(value.requires_grad)
        return value
    if isinstance(value, (list, tuple)):
        return type(value)(_to_float(v) for v in value)
    if isinstance(value, dict):
        return {k: _to_float(v) for k, v in value.items()}
    return value
