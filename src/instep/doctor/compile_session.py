"""The parent side of ``instep doctor compile -- python script.py ARGS``.

:func:`run_compile_doctor` turns the user's command line into a run of
:mod:`instep.doctor.compile_bootstrap` under the *same* interpreter (``python``,
``python3.11``, a path, or a console script such as ``pytest`` whose shebang names one),
with the profile's env, lets it print watchdog reports live on stderr, enforces an
optional timeout (SIGUSR1 for a faulthandler dump of every stack, then SIGTERM/SIGKILL)
and returns the child's last snapshot: per-graph stage timings, what was active when it
ended (the stage a timeout happened in), watchdog reports and autotune logs.
It renders nothing.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import instep
from instep.doctor.compile_bootstrap import CONFIG_ENV
from instep.doctor.env_checks import is_this_python
from instep.errors import BadInput, MissingInput
from instep.inductor_cache import CACHE_VARIABLES, cache_state

TIMEOUT_EXIT = 124  # like coreutils' timeout
DUMP_GRACE_S = 3.0


@dataclass
class CompileDoctorResult:
    exit_code: int
    timed_out: bool
    snapshot: dict[str, Any] = field(default_factory=dict)
    wall_s: float = 0.0
    #: ``inductor_cache_dir`` and ``inductor_cache_empty_at_start``: stage times from a warm
    #: cache are not those of a cold one
    cache: dict[str, Any] = field(default_factory=dict)

    @property
    def graphs(self) -> list[dict[str, Any]]:
        return list(self.snapshot.get("graphs", []))

    @property
    def active(self) -> list[dict[str, Any]]:
        return list(self.snapshot.get("active", []))

    @property
    def stage_at_end(self) -> str | None:
        """The stage the longest-running open compile was in when the process ended."""
        return self.active[0]["stage"] if self.active else None

    def as_dict(self) -> dict[str, Any]:
        return {
            "exit_code": self.exit_code,
            "timed_out": self.timed_out,
            "stage_at_end": self.stage_at_end,
            "wall_s": round(self.wall_s, 3),
            **self.cache,
            **self.snapshot,
        }


def split_command(command: Sequence[str]) -> tuple[str, list[str]]:
    """(interpreter, argv for the bootstrap) from ``python [-m mod | script.py] ARGS``."""
    if not command:
        raise BadInput("doctor compile: give a command after '--', e.g. -- python script.py")
    first, rest = command[0], list(command[1:])
    name = os.path.basename(first)
    if name.startswith("python") or name.startswith("pypy"):
        interpreter = shutil.which(first) or first
        while rest and rest[0].startswith("-") and rest[0] != "-m":
            rest.pop(0)  # interpreter flags (-u, -X dev, ...) are not forwarded
        if not rest:
            raise BadInput(f"doctor compile: '{first}' needs a script or '-m module' to run")
        if rest[0] == "-m":
            if len(rest) < 2:
                raise BadInput("doctor compile: '-m' needs a module name")
            return interpreter, rest
        if not Path(rest[0]).is_file():
            raise MissingInput(f"doctor compile: script {rest[0]} does not exist")
        return interpreter, rest
    if first.endswith(".py") and Path(first).is_file():
        return sys.executable, list(command)
    path = shutil.which(first)
    if path is None:
        raise MissingInput(f"doctor compile: command '{first}' not found")
    interpreter = _shebang_python(Path(path))
    if interpreter is None:
        raise BadInput(
            f"doctor compile: '{first}' is not a Python program (expected python, a .py"
            " script, or a console script whose shebang names a Python)"
        )
    return interpreter, [path, *rest]


def _shebang_python(path: Path) -> str | None:
    try:
        with path.open("rb") as fh:
            line = fh.readline(400).decode("utf-8", "replace").strip()
    except OSError:
        return None
    if not line.startswith("#!"):
        return None
    parts = line[2:].split()
    if parts and os.path.basename(parts[0]) == "env" and len(parts) > 1:
        parts = [shutil.which(parts[1]) or parts[1]]
    return parts[0] if parts and "python" in os.path.basename(parts[0]) else None


def run_compile_doctor(
    command: Sequence[str],
    threshold_s: float = 300.0,
    repeat_s: float | None = None,
    timeout_s: float | None = None,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    snapshot_path: str | os.PathLike[str] | None = None,
) -> CompileDoctorResult:
    """Run ``command`` under the hooks and the watchdog; stdout/stderr pass through."""
    interpreter, argv = split_command(command)
    keep = snapshot_path is not None
    if snapshot_path is None:
        fd, name = tempfile.mkstemp(prefix="instep-doctor-", suffix=".json")
        os.close(fd)
        snapshot_path = name
    snapshot = Path(snapshot_path)
    snapshot.write_text("{}", encoding="utf-8")
    config = {
        "argv": argv,
        "threshold_s": threshold_s,
        "repeat_s": repeat_s,
        "snapshot": str(snapshot.resolve()),
    }
    caller_cache = {k: os.environ[k] for k in CACHE_VARIABLES if os.environ.get(k)}
    # the caller's cache (a CI cache, a clean-cache experiment) wins over the profile's
    child_env = {**os.environ, **(env or {}), **caller_cache, CONFIG_ENV: json.dumps(config)}
    if not is_this_python(interpreter):
        root = str(Path(instep.__file__).resolve().parent.parent)
        child_env["PYTHONPATH"] = os.pathsep.join(
            p for p in (root, child_env.get("PYTHONPATH")) if p
        )
    cache = cache_state(child_env)
    started = time.monotonic()
    timed_out = False
    try:
        proc = subprocess.Popen(
            [interpreter, "-m", "instep.doctor.compile_bootstrap"],
            env=child_env,
            cwd=cwd,
            start_new_session=True,
        )
    except OSError as exc:
        raise MissingInput(f"doctor compile: cannot run {interpreter}: {exc}") from None
    try:
        code = proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        code = _stop(proc)
    except KeyboardInterrupt:
        _stop(proc, dump=False)
        raise
    data: dict[str, Any] = {}
    try:
        data = json.loads(snapshot.read_text(encoding="utf-8") or "{}")
    except (OSError, ValueError):
        data = {}
    finally:
        if not keep:
            snapshot.unlink(missing_ok=True)
    if timed_out:
        code = TIMEOUT_EXIT
    elif code < 0:
        code = 128 - code  # killed by a signal: shell convention
    return CompileDoctorResult(code, timed_out, data, time.monotonic() - started, cache)


def _stop(proc: subprocess.Popen[bytes], dump: bool = True) -> int:
    """Ask for a stack dump (SIGUSR1), then SIGTERM, then SIGKILL the process group."""
    if dump and hasattr(signal, "SIGUSR1"):
        _signal(proc, signal.SIGUSR1)
        time.sleep(min(DUMP_GRACE_S, 1.0))
    for sig, wait in ((signal.SIGTERM, DUMP_GRACE_S), (signal.SIGKILL, 10.0)):
        _signal(proc, sig)
        try:
            return proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue
    return proc.wait()


def _signal(proc: subprocess.Popen[bytes], sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(sig)
