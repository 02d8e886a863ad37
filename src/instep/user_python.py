"""Run a small script in the *user's* Python and read back its JSON answer.

instep never imports torch or the backend into its own process: probes, environment
checks and OpInfo enumeration run as ``python -c SCRIPT PAYLOAD`` in a child. The script
reads its JSON payload from ``sys.argv[1]`` and ends with
``sys.stdout.write(ANSWER_MARK + json.dumps(answer))``; whatever else it prints (imports
that talk) is ignored. Failures come back as one line, never as an exception.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from typing import Any

ANSWER_MARK = "\n@@INSTEP-ANSWER@@"


def run_script(
    script: str,
    payload: Any,
    *,
    python: str | None = None,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    timeout: float | None = None,
) -> tuple[Any, str | None]:
    """``(answer, None)``, or ``(None, one line saying why there is none)``."""
    python = python or sys.executable
    try:
        proc = subprocess.run(
            [python, "-c", script, json.dumps(payload)],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=dict(env) if env is not None else None,
            cwd=cwd,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return None, f"timed out after {timeout:g}s"
    except OSError as exc:
        return None, f"cannot run {python}: {' '.join(str(exc).split())}"
    marker = proc.stdout.rfind(ANSWER_MARK)
    if marker < 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        return None, f"the process exited {proc.returncode}: {tail[0]}"
    try:
        return json.loads(proc.stdout[marker + len(ANSWER_MARK) :]), None
    except ValueError as exc:
        return None, f"unreadable answer: {exc}"
