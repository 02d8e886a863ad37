"""Probes that tell whether this process initialised a device runtime below torch.

``torch.cuda.is_initialized()`` says whether *torch* initialised CUDA; a library that
calls the driver itself (``cuInit``: a device count, a capability query outside torch)
leaves it false, and a child forked afterwards still cannot use CUDA. A profile lists
these next to torch's own probe (``[runtime] initialized``). None of them loads or
initialises anything.
"""

from __future__ import annotations

import ctypes
import os

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
