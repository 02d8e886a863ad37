"""Whether a case process may serve another case after the one it just ran.

``--isolate case``: never. ``--isolate worker``: after a case that passed, was skipped or
xfailed, yes. After a failure (an exception that pytest reported) the process is usually
still sound, and pytest-xdist keeps its workers for every failure; but a failure may also
have left it unusable, and then a fresh process (its host's prepared standby, where there
is one) runs the rest. The rule, checked in this order:

1. ``shared`` process model: a fresh process costs a fork, so every failure replaces it;
2. out of memory (``MemoryError``, ``OutOfMemoryError``) or an error matching the
   profile's ``[runtime] fatal_errors`` (a device error): replaced;
3. Dynamo's and Inductor's state is reset (``torch._dynamo.reset()``); if that raises:
   replaced;
4. when this process initialised the device (``[runtime] initialized``), every probe of
   ``[runtime] healthy`` (a synchronize) must say yes: else replaced;
5. otherwise it serves the next case.

A crash or a time-out leaves no process to ask: its host replaces it. This module only
decides; :mod:`instep.run.case_process` acts on the answer and records it in the
outcome's ``evidence.process_replaced``.
"""

from __future__ import annotations

import re
import sys
from typing import Any

from instep.outcome import FAILING
from instep.run.process_model import device_initialised, resolve_probe

OUT_OF_MEMORY_TYPES = frozenset({"MemoryError", "OutOfMemoryError"})


def replace_reason(data: dict[str, Any], settings: dict[str, Any]) -> str | None:
    """Why the process that produced outcome ``data`` must not run another case; ``None``
    when it may. ``settings`` are the run's (``isolate``, ``model``, ``fatal_errors``,
    ``device_probe``, ``device_healthy``)."""
    if settings.get("isolate") == "case":
        return "--isolate case"
    if data.get("status") not in FAILING:
        return None
    if settings.get("model", "shared") == "shared":
        return "a failure (under the shared model a fresh process costs a fork)"
    chain = data.get("exception_chain") or []
    types = {str(link.get("type") or "").rsplit(".", 1)[-1] for link in chain}
    if types & OUT_OF_MEMORY_TYPES:
        return f"out of memory ({sorted(types & OUT_OF_MEMORY_TYPES)[0]})"
    fatal = _fatal_match(data, chain, settings.get("fatal_errors") or [])
    if fatal is not None:
        return f"a device error ({fatal})"
    reset_error = _reset_compiler_state()
    if reset_error is not None:
        return f"resetting Dynamo failed ({reset_error})"
    probes = settings.get("device_probe")
    healthy = settings.get("device_healthy") or []
    if healthy and device_initialised(probes):
        sick = [p for p in healthy if not _healthy(p)]
        if sick:
            return f"the device no longer works here ({sick[0]}() is false)"
    return None


def _fatal_match(
    data: dict[str, Any], chain: list[dict[str, Any]], patterns: list[str]
) -> str | None:
    texts = [str(data.get("message") or "")]
    texts += [f"{link.get('type')}: {link.get('message')}" for link in chain]
    for pattern in patterns:
        regex = re.compile(pattern)
        for text in texts:
            found = regex.search(text)
            if found:
                line = next((ln for ln in text.splitlines() if regex.search(ln)), found[0])
                return line.strip()[:200]
    return None


def _reset_compiler_state() -> str | None:
    """``torch._dynamo.reset()`` where Dynamo was imported; the error it raised, if any."""
    dynamo = sys.modules.get("torch._dynamo")
    if dynamo is None:
        return None
    try:
        dynamo.reset()
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"[:200]
    return None


def _healthy(probe: str) -> bool:
    """A health probe's answer; one that cannot be found (its module is not imported) has
    nothing to say against the device, one that raises says no."""
    target = resolve_probe(probe)
    if target is None:
        return True
    try:
        return bool(target())
    except Exception:
        return False
