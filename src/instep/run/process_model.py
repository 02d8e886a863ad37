"""Which processes import what, so that no device runtime is used across a fork.

Three models, chosen from the profile's ``[runtime] fork`` (``--process-model``
overrides it); docs/run.md, "Process models", measures what each costs per case:

- ``shared`` (``fork = "any"``, CPU): each worker host imports torch, collects the test
  files (importing their modules) and forks every case process from that state. Fastest:
  a case costs a fork.
- ``fork`` (``fork = "before_init"``, CUDA, NPU): collection runs in a throwaway process;
  worker hosts import torch and the backend but no test module, and check, through the
  profile's ``initialized`` probe, that no device was initialised before they fork. Each
  case process imports the test module it runs (``--isolate worker``: once, then runs
  many cases of that file).
- ``spawn`` (``fork = "never"``): like ``fork``, but case processes are fresh
  interpreters that import torch and the backend themselves. A ``fork`` host whose own
  imports initialised the device turns to ``spawn`` and says so.

This module only decides and probes; :mod:`instep.run.worker_host` acts on it.
"""

from __future__ import annotations

import sys
from enum import Enum

from instep.errors import BadInput


class ProcessModel(str, Enum):
    SHARED = "shared"
    FORK = "fork"
    SPAWN = "spawn"

    def __str__(self) -> str:
        return self.value

    @property
    def hosts_collect(self) -> bool:
        """Whether worker hosts import the test modules (else a throwaway process does)."""
        return self is ProcessModel.SHARED


_BY_RUNTIME = {"any": ProcessModel.SHARED, "before_init": ProcessModel.FORK}


def choose(runtime_fork: str, override: str | None = None) -> ProcessModel:
    """The model for a profile's ``[runtime] fork``, or the one the user named."""
    if override:
        try:
            return ProcessModel(override)
        except ValueError:
            raise BadInput(f"--process-model {override}: expected shared, fork or spawn") from None
    return _BY_RUNTIME.get(runtime_fork, ProcessModel.SPAWN)


def device_initialised(probe: str | None) -> bool:
    """Whether this process initialised the device, by the profile's dotted callable
    (``torch.cuda.is_initialized``). A probe whose module was never imported says no: a
    runtime nobody imported is not initialised. Never imports anything new."""
    if not probe or "." not in probe:
        return False
    module_name, _, attr = probe.rpartition(".")
    parts = module_name.split(".")
    # the longest imported module prefix, then attributes (torch.cuda is a module, but
    # torch.npu is an attribute that torch_npu installs on torch)
    for cut in range(len(parts), 0, -1):
        module = sys.modules.get(".".join(parts[:cut]))
        if module is None:
            continue
        target: object = module
        try:
            for name in [*parts[cut:], attr]:
                target = getattr(target, name)
            return bool(target())  # type: ignore[operator]
        except Exception:
            return False
    return False
