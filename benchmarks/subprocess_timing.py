"""Wall time of one command run to completion (shared by the benchmark scripts).

Not a benchmark itself: ``python benchmarks/X.py`` puts this directory on ``sys.path``, so
the scripts import it as ``subprocess_timing``.
"""

from __future__ import annotations

import re
import sqlite3
import subprocess
import sys
import time
from pathlib import Path


def timed(argv: list[str], cwd: Path) -> float:
    """Seconds ``argv`` took in ``cwd``; exits the benchmark with its stderr if it failed."""
    return timed_output(argv, cwd)[0]


def timed_output(argv: list[str], cwd: Path) -> tuple[float, str]:
    """Seconds ``argv`` took in ``cwd`` and its stdout; exits the benchmark if it failed."""
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"{' '.join(argv[:8])}... failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return wall, proc.stdout


def pytest_passed(stdout: str) -> int:
    """The ``N passed`` of pytest's summary line (0 when it says none)."""
    found = re.findall(r"(\d+) passed", stdout)
    return int(found[-1]) if found else 0


def instep_passed(db: Path) -> int:
    """Final outcomes that passed in the one run of an instep store."""
    with sqlite3.connect(db) as conn:
        row = conn.execute(
            "SELECT count(*) FROM outcomes WHERE final = 1 AND status = 'passed'"
        ).fetchone()
    return int(row[0])


def check_same_work(side: str, passed: int, cases: int) -> None:
    """Both sides of a ratio must have run (and passed) every case, or the ratio is void."""
    if passed != cases:
        sys.exit(f"{side}: {passed} of {cases} cases passed; no ratio over different work")
