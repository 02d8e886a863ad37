"""Which processes import what, so that no device runtime is used across a fork.

Three models, chosen from the profile's ``[runtime] fork`` (``--process-model``
overrides it); docs/run.md, "Process models", measures what each costs per case:

- ``shared`` (``fork = "any"``, CPU): each worker host imports torch, collects the test
  files (importing their modules) and forks every case process from that state. Fastest:
  a case costs a fork.
- ``fork`` (``fork = "before_init"``, CUDA, NPU): worker hosts import torch and the
  backend but no test module, and check, through the profile's ``initialized`` probe,
  that no device was initialised before they fork. Each host's first case process
  collects the whole run (as an xdist worker does; the first to finish plans the run)
  and serves cases of any file; later ones import the test file they run
  (``--isolate worker``: once, then many cases of it), most of them as standbys
  prepared while an earlier one runs. Meanwhile the host imports what the collection
  found it could import without touching the device (:class:`ImportWatch`).
- ``spawn`` (``fork = "never"``): like ``fork``, but case processes are fresh
  interpreters that import torch and the backend themselves. A ``fork`` host whose own
  imports initialised the device turns to ``spawn`` and says so.

This module only decides and probes; :mod:`instep.run.worker_host` acts on it.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
from collections.abc import Callable
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
        """Whether worker hosts import the test modules (else their case processes do)."""
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


def device_initialised(probes: str | list[str] | None) -> bool:
    """Whether this process initialised the device, by the profile's dotted callables
    (``torch.cuda.is_initialized``; any true says yes). A probe whose module was never
    imported says no: a runtime nobody imported is not initialised. Never imports anything
    new, except instep's own probes (:mod:`instep.run.device_probes`)."""
    if isinstance(probes, str):
        probes = [probes]
    return any(_probe(p) for p in probes or [])


def _probe(probe: str) -> bool:
    target = resolve_probe(probe)
    if target is None:
        return False
    try:
        return bool(target())
    except Exception:
        return False


def resolve_probe(probe: str) -> Callable[[], object] | None:
    """The callable a dotted probe names, looked up in modules already imported (instep's
    own are imported); ``None`` when it cannot be found."""
    if "." not in probe:
        return None
    module_name, _, attr = probe.rpartition(".")
    if module_name.startswith("instep.") and module_name not in sys.modules:
        with contextlib.suppress(ImportError):
            importlib.import_module(module_name)
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
        except Exception:
            return None
        return target if callable(target) else None
    return None


class ImportWatch:
    """Which modules a collecting process imported before the device was initialised.

    Under ``fork`` each case process imports its test module; what that module imports
    from installed packages (``torch.testing._internal``, ``torch._inductor``: seconds,
    a minute for some upstream files) can be imported once in the worker host instead,
    as long as importing it does not initialise the device. A case process that collects
    the whole run watches its own imports (an audit hook on ``import``): at each fresh
    import it checks the probe, and keeps how many modules had started and which were
    still executing (their module-level frames on the stack). Once the probe turns true,
    the modules that had finished before the last check that saw it false are the safe
    ones; the ones executing then, and all later ones, are not. Nothing is imported or
    executed for the watch itself.
    """

    def __init__(self, probe: str | list[str] | None) -> None:
        self.probe = probe
        self._count = 0
        self._executing: frozenset[str] = frozenset()
        self._tripped = False

    def install(self) -> None:
        if self.probe:
            sys.addaudithook(self._hook)

    def _hook(self, event: str, _args: tuple) -> None:  # type: ignore[type-arg]
        if event != "import" or self._tripped:
            return
        if device_initialised(self.probe):
            self._tripped = True
            return
        self._count = len(sys.modules)
        self._executing = _executing_modules()

    def safe_modules(self, exclude_under: list[str]) -> list[str]:
        """Installed modules imported before the device was initialised, in import order;
        none whose file lies under ``exclude_under`` (the test tree)."""
        if not self.probe:
            return []
        names = list(sys.modules)
        if self._tripped or device_initialised(self.probe):
            names = [n for n in names[: self._count] if n not in self._executing]
        roots = [os.path.realpath(p) + os.sep for p in exclude_under]
        safe = []
        for name in names:
            module = sys.modules.get(name)
            path = getattr(module, "__file__", None)
            if name == "__main__" or module is None:
                continue
            if path and any(os.path.realpath(path).startswith(r) for r in roots):
                continue
            safe.append(name)
        return safe


def _executing_modules() -> frozenset[str]:
    """Modules whose body is running now: their module-level frames on this stack."""
    names = set()
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == "<module>":
            names.add(frame.f_globals.get("__name__", ""))
        frame = frame.f_back
    return frozenset(names)


def warm_imports(modules: list[str]) -> list[str]:
    """Import ``modules`` in order (a worker host, before it forks); the ones that failed."""
    failed = []
    for name in modules:
        if name in sys.modules:
            continue
        try:
            importlib.import_module(name)
        except (Exception, SystemExit):  # a module may even call sys.exit at import
            failed.append(name)
    return failed
