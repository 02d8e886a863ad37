"""A pytest plugin that redirects the backend tests compile with (for the backend ladder).

Loaded by the ladder's worker hosts (``-p instep.triage.backend_redirect``).
``INSTEP_LADDER_BACKEND`` names one rung (``eager``, ``aot_eager``,
``aot_eager_decomp_partition`` or the target backend): set for the whole session, it is
read at ``pytest_configure``, before test modules are imported; set for one case (the
ladder's work items carry it, so one set of hosts serves every rung), it is read when
that case starts. Either way ``torch.compile`` and ``torch._dynamo.optimize`` are
wrapped so that whatever backend a test names is replaced by the rung's; a later rung
replaces an earlier one's wrapper rather than stacking on it.

What cannot be redirected: tests that call Inductor directly (``compile_fx``,
``torch._inductor.compile``, ``aot_compile``), tests that assert on generated code
(``run_and_get_code``, FileCheck on output code: with a debug backend there is none, so
they fail on every rung and the ladder reports the case as reproduced at ``eager``, i.e.
not bounded), and compiled functions created before the plugin is configured. Nothing
here classifies.
"""

from __future__ import annotations

import functools
import os
import sys
from typing import Any

import pytest

ENV = "INSTEP_LADDER_BACKEND"


def _redirect(original: Any, backend: str, position: int | None) -> Any:
    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if position is None or "backend" in kwargs or len(args) <= position:
            kwargs["backend"] = backend
        else:
            args = (*args[:position], backend, *args[position + 1 :])
        if backend != "inductor":
            kwargs.pop("mode", None)  # modes and options are Inductor's
            kwargs.pop("options", None)
        return original(*args, **kwargs)

    wrapper.__instep_redirected__ = backend  # type: ignore[attr-defined]
    wrapper.__instep_original__ = original  # type: ignore[attr-defined]
    return wrapper


def _original(fn: Any) -> Any:
    return getattr(fn, "__instep_original__", fn)


def install(backend: str) -> None:
    """Wrap ``torch.compile`` (``backend`` is keyword-only) and ``torch._dynamo.optimize``
    (backend is its first positional) so that every compile uses ``backend``."""
    import torch
    import torch._dynamo

    if getattr(torch.compile, "__instep_redirected__", None) != backend:
        torch.compile = _redirect(_original(torch.compile), backend, None)
    if getattr(torch._dynamo.optimize, "__instep_redirected__", None) != backend:
        torch._dynamo.optimize = _redirect(_original(torch._dynamo.optimize), backend, 0)


def pytest_configure(config: Any) -> None:
    backend = os.environ.get(ENV)
    if backend and ("torch" in sys.modules or _torch_available()):
        install(backend)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: Any, nextitem: Any) -> None:
    """A rung set for this case only (the worker host sets it in the case's process)."""
    if "torch" not in sys.modules:
        return
    backend = os.environ.get(ENV)
    if backend:
        install(backend)
    else:
        uninstall()  # the previous case's rung must not leak into this one


def uninstall() -> None:
    """Put back the original ``torch.compile`` and ``torch._dynamo.optimize``."""
    import torch
    import torch._dynamo

    torch.compile = _original(torch.compile)
    torch._dynamo.optimize = _original(torch._dynamo.optimize)


def _torch_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("torch") is not None
