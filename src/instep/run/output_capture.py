"""Per-case output of a worker process: fds 1 and 2 sent to files, read back as bounded tails.

Output is captured at the file-descriptor level so that what C code prints, and what
faulthandler dumps when a case segfaults or hangs, is kept even when the process dies.
Files are truncated at the start of each case; only the last ``TAIL_BYTES`` are read back,
decoded as UTF-8 with ``errors='replace'``, so 100 MB or non-UTF-8 output costs nothing.
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

TAIL_BYTES = 64 * 1024


def redirect_std_fds(stdout_path: Path, stderr_path: Path) -> None:
    """Point fds 1 and 2 of this process at the two files (appending)."""
    sys.stdout.flush()
    sys.stderr.flush()
    for fd, path in ((1, stdout_path), (2, stderr_path)):
        target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(target, fd)
        os.close(target)


def truncate_std_fds() -> None:
    """Start a new case: empty both output files."""
    sys.stdout.flush()
    sys.stderr.flush()
    for fd in (1, 2):
        with contextlib.suppress(OSError):  # a terminal or pipe: nothing to truncate
            os.ftruncate(fd, 0)


def read_tail(path: Path, limit: int = TAIL_BYTES) -> tuple[str, int]:
    """The last ``limit`` bytes of ``path`` as text, and the file's whole size."""
    try:
        with open(path, "rb") as fh:
            size = fh.seek(0, os.SEEK_END)
            fh.seek(max(0, size - limit))
            data = fh.read(limit)
    except FileNotFoundError:
        return "", 0
    text = data.decode("utf-8", errors="replace")
    if size > limit:
        text = f"[… {size - limit} earlier bytes not kept …]\n" + text
    return text, size
