"""Wall time of one command run to completion (shared by the benchmark scripts).

Not a benchmark itself: ``python benchmarks/X.py`` puts this directory on ``sys.path``, so
the scripts import it as ``subprocess_timing``.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path


def timed(argv: list[str], cwd: Path) -> float:
    """Seconds ``argv`` took in ``cwd``; exits the benchmark with its stderr if it failed."""
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"{' '.join(argv[:8])}... failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return wall
