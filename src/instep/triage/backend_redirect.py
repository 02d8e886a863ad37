"""A pytest plugin that redirects the backend tests compile with (for the backend ladder).

Loaded by the ladder's worker hosts (``-p instep.triage.backend_redirect``). At
``pytest_configure``, before test modules are imported, it wraps ``torch.compile`` and
``torch._dynamo.optimize``; the wrappers read ``INSTEP_LADDER_BACKEND`` (one rung:
``eager``, ``aot_eager``, ``aot_eager_decomp_partition`` or the target backend) at each
call, so whatever backend a test names is replaced by the rung's. The variable may be set
for the whole session or for one case only (the ladder's work items carry it, so one set
of hosts serves every rung).

What cannot be redirected: tests that call Inductor directly (``compile_fx``,
``torch._inductor.compile``, ``aot_compile``), tests that assert on generated code
(``run_and_get_code``, FileCheck on output code: with a debug backend there is none, so
they fail on every rung and the ladder reports the case as reproduced at ``eager``, i.e.
not bounded), and functions compiled before the plugin is configured. A function
compiled while the test modules are imported keeps the backend of that moment: when the
rung is set per case and anything compiled during collection, each case of the session
is skipped with :data:`NEEDS_OWN_HOST` and the ladder runs it in hosts started with the
rung instead. Nothing here classifies.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import sys
from typing import Any

import pytest

ENV = "INSTEP_LADDER_BACKEND"


NEEDS_OWN_HOST = "instep ladder: compiled while collecting; needs a host started per rung"

_STATE: dict[str, Any] = {"collecting": False, "compiled": False, "session_backend": None}


def _rewrite(args: tuple, kwargs: dict, backend: str, position: int | None) -> tuple:
    if position is None or "backend" in kwargs or len(args) <= position:
        kwargs["backend"] = backend
    else:
        args = (*args[:position], backend, *args[position + 1 :])
    if backend != "inductor":
        kwargs.pop("mode", None)  # modes and options are Inductor's
        kwargs.pop("options", None)
    return args, kwargs


def _redirect(original: Any, position: int | None) -> Any:
    """``original`` with the backend replaced by ``$INSTEP_LADDER_BACKEND`` when set."""

    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if _STATE["collecting"]:
            _STATE["compiled"] = True
        backend = os.environ.get(ENV)
        if backend:
            args, kwargs = _rewrite(args, kwargs, backend, position)
        return original(*args, **kwargs)

    wrapper.__instep_original__ = original  # type: ignore[attr-defined]
    return wrapper


def install() -> None:
    """Wrap ``torch.compile`` (``backend`` is keyword-only) and ``torch._dynamo.optimize``
    (backend is its first positional), once."""
    # torch is the user's: only in the process that runs the case
    import torch
    import torch._dynamo

    if not hasattr(torch.compile, "__instep_original__"):
        torch.compile = _redirect(torch.compile, None)
    if not hasattr(torch._dynamo.optimize, "__instep_original__"):
        torch._dynamo.optimize = _redirect(torch._dynamo.optimize, 0)


def pytest_configure(config: Any) -> None:
    if "torch" in sys.modules or _torch_available():
        install()
        _STATE.update(collecting=True, compiled=False, session_backend=os.environ.get(ENV))


def pytest_collection_finish(session: Any) -> None:
    _STATE["collecting"] = False


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: Any) -> None:
    """A rung set for this case only cannot reach what was compiled at import."""
    backend = os.environ.get(ENV)
    if _STATE["compiled"] and backend and backend != _STATE["session_backend"]:
        pytest.skip(NEEDS_OWN_HOST)


def _torch_available() -> bool:
    return importlib.util.find_spec("torch") is not None
