"""The torch version of an upstream snapshot (``torch/version.py``, else a ``__version__ =``
in ``torch/__init__.py``, else the pip label),
for the version gates the verdicts compare against, and the build it is (CPU, CUDA, ROCm,
XPU: :func:`snapshot_build`). Reads one file; imports nothing.
"""

from __future__ import annotations

import ast
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


_BUILDS = (("cuda", "CUDA"), ("hip", "ROCm"), ("rocm", "ROCm"), ("xpu", "XPU"))


def snapshot_build(snapshot) -> str | None:
    """The build ``torch/version.py`` says the snapshot is ("CUDA 13.0", "ROCm 6.4",
    "XPU …", else "CPU"), or None without that file (a source tree has none). Two wheels of
    different builds differ in ``torch.version.cuda`` and the like for that reason alone:
    the analysis warns (``torch==2.13.0`` from a CPU index against a CUDA ``2.14.1``)."""
    if "torch/version.py" not in set(snapshot.paths()):
        return None
    try:
        tree = ast.parse(snapshot.read("torch/version.py").decode("utf-8", "replace"))
    except (SyntaxError, ValueError):
        return None
    values: dict[str, object] = {}
    for stmt in tree.body:
        target = stmt.targets[0] if isinstance(stmt, ast.Assign) and stmt.targets else None
        if isinstance(stmt, ast.AnnAssign):
            target = stmt.target
        value = getattr(stmt, "value", None)
        if isinstance(target, ast.Name) and isinstance(value, ast.Constant):
            values[target.id] = value.value
    for name, label in _BUILDS:
        if isinstance(values.get(name), str):
            return f"{label} {values[name]}"
    return "CPU"
