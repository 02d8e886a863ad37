"""The torch version of an upstream snapshot (``torch/version.py``, else a ``__version__ =``
in ``torch/__init__.py``, else the pip label),
for the version gates the verdicts compare against. Reads one file; imports nothing.
"""

from __future__ import annotations

import re

_VERSION_RE = re.compile(r"""__version__\s*=\s*['"](\d+(?:\.\d+)+)""")


def parse_version(text: str | None) -> tuple[int, ...] | None:
    if not text:
        return None
    m = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", text)
    if not m:
        return None
    return tuple(int(g) for g in m.groups() if g is not None)


def snapshot_version(snapshot, label: str | None) -> tuple[int, ...] | None:
    """The torch version of an upstream snapshot: torch/version.py, torch/__init__.py, else
    the pip label."""
    paths = set(snapshot.paths())
    for candidate in ("torch/version.py", "torch/__init__.py"):
        if candidate in paths:
            m = _VERSION_RE.search(snapshot.read(candidate).decode("utf-8", "replace"))
            if m:
                return parse_version(m.group(1))
    return parse_version(label.split("==", 1)[1]) if label and "==" in label else None
