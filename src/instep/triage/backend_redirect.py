"""A pytest plugin that redirects the backend tests compile with (for the backend ladder).

Loaded by the ladder's re-runs (``-p instep.triage.backend_redirect``) with
``INSTEP_LADDER_BACKEND`` set to one rung (``eager``, ``aot_eager``,
``aot_eager_decomp_partition`` or the target backend). At ``pytest_configure``, before
test modules are imported, it wraps ``torch.compile`` and ``torch._dynamo.optimize`` so
that whatever backend a test names is replaced by the rung's.

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
    return wrapper


def install(backend: str) -> None:
    """Wrap ``torch.compile`` (``backend`` is keyword-only) and ``torch._dynamo.optimize``
    (backend is its first positional) so that every compile uses ``backend``."""
    import torch
    import torch._dynamo

    if getattr(torch.compile, "__instep_redirected__", None) != backend:
        torch.compile = _redirect(torch.compile, backend, None)
    if getattr(torch._dynamo.optimize, "__instep_redirected__", None) != backend:
        torch._dynamo.optimize = _redirect(torch._dynamo.optimize, backend, 0)


def pytest_configure(config: Any) -> None:
    backend = os.environ.get(ENV)
    if backend and ("torch" in sys.modules or _torch_available()):
        install(backend)


def _torch_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("torch") is not None
