"""Probes that tell whether this process initialised a device runtime below torch, and
whether a device it initialised still works.

``torch.cuda.is_initialized()`` says whether *torch* initialised CUDA; a library that
calls the driver itself (``cuInit``: a device count, a capability query outside torch)
leaves it false, and a child forked afterwards still cannot use CUDA. A profile lists
these next to torch's own probe (``[runtime] initialized``). None of them loads or
initialises anything.

The health probes (``[runtime] healthy``) are asked by a case process after a failed
case, before it serves another (:mod:`instep.run.reuse_rule`): a device whose runtime
was never initialised here is healthy by definition, so they never initialise it either.
"""

from __future__ import annotations

import ctypes
import os
import sys

#: CUDA_ERROR_NOT_INITIALIZED: what the driver answers before ``cuInit``.
_CUDA_NOT_INITIALIZED = 3


def cuda_driver_initialised() -> bool:
    """Whether this process called ``cuInit``: ``cuDeviceGetCount`` answers
    CUDA_ERROR_NOT_INITIALIZED until then. A driver library that is not loaded yet (opened
    with ``RTLD_NOLOAD``, which never loads it) was not initialised."""
    try:
        lib = ctypes.CDLL("libcuda.so.1", mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
    except OSError:
        return False
    count = ctypes.c_int()
    try:
        return lib.cuDeviceGetCount(ctypes.byref(count)) != _CUDA_NOT_INITIALIZED
    except AttributeError:
        return False


def cuda_healthy() -> bool:
    """Whether CUDA, if torch initialised it here, still completes a synchronize (a sticky
    error such as an illegal memory access makes every later call fail)."""
    return _synchronizes("cuda")


def npu_healthy() -> bool:
    """Whether the NPU, if torch_npu initialised it here, still completes a synchronize."""
    return _synchronizes("npu")


def _synchronizes(name: str) -> bool:
    torch = sys.modules.get("torch")
    runtime = getattr(torch, name, None) if torch is not None else None
    is_initialized = getattr(runtime, "is_initialized", None)
    if runtime is None or is_initialized is None or not is_initialized():
        return True
    try:
        runtime.synchronize()
    except Exception:
        return False
    return True
