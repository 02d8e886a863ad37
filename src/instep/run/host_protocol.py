"""What the runner and its worker hosts agree on: the pipe variable and its messages.

Kept apart so the runner can use them without importing pytest (the hosts do that).
Messages are pickled dicts over ``multiprocessing.connection.Connection`` pipes:
runner -> host ``run`` (cases) and ``stop``; host -> runner ``ready``, ``collected``,
``start``, ``outcome``, ``done``, ``fatal``, ``collect_failed``.
"""

from __future__ import annotations

import signal

#: Environment variable holding the host's two pipe fds: ``"IN,OUT"``.
ENV_FDS = "INSTEP_HOST_FDS"


def signal_name(num: int) -> str:
    """How a death by signal ``num`` is recorded (``SIGSEGV``; ``signal 99`` if unnamed)."""
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


def last_error_line(text: str) -> str:
    """The line of a pytest error text that says why (``E   ModuleNotFoundError: …``)."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for line in reversed(lines):
        if line.startswith("E ") or "Error" in line or "error" in line:
            return line.removeprefix("E").strip()
    return lines[-1] if lines else "no output"
