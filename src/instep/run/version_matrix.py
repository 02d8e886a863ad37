"""The version matrix of a run, read through the profile's probes.

Module and Python probes run together in one subprocess of the *user's* Python (so the
runner never imports torch itself, and a device is never initialised in the runner);
command, file and environment probes run here. A probe that fails gives ``None`` (and
an ``errors`` entry when the probe is not optional). Nothing here decides compatibility.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from instep.profiles import Profile, VersionProbe

PROBE_TIMEOUT_S = 120

_SCRIPT = r"""
import contextlib, importlib, io, json, sys
probes = json.loads(sys.argv[1])
out = {}
for p in probes:
    try:
        if p.get("module"):
            value = importlib.import_module(p["module"])
            for part in p.get("attribute", "__version__").split("."):
                value = getattr(value, part)
            out[p["name"]] = None if value is None else str(value)
        else:
            buf = io.StringIO()
            with contextlib.redirect_stdout(buf):
                exec(compile(p["python"], "<probe " + p["name"] + ">", "exec"), {})
            out[p["name"]] = buf.getvalue().strip()
    except BaseException as exc:
        out[p["name"]] = {"error": type(exc).__name__ + ": " + str(exc)[:300]}
sys.stdout.write("\n@@INSTEP@@" + json.dumps(out))
"""


def read_version_matrix(profile: Profile, env: dict[str, str] | None = None) -> dict[str, Any]:
    """``{probe name: value}`` plus ``errors`` for required probes that failed."""
    matrix: dict[str, Any] = {}
    errors: dict[str, str] = {}
    results: dict[str, Any] = {}
    for probe in profile.version_probes:
        if probe.module:
            static = _module_version_statically(probe.module, probe.attribute)
            if static is not None:
                results[probe.name] = static
    in_python = [
        p for p in profile.version_probes if (p.module or p.python) and p.name not in results
    ]
    if in_python:
        payload = json.dumps([p.model_dump(exclude_none=True) for p in in_python])
        try:
            proc = subprocess.run(
                [sys.executable, "-c", _SCRIPT, payload],
                capture_output=True,
                text=True,
                timeout=PROBE_TIMEOUT_S,
                env={**os.environ, **(env or {})},
            )
            marker = proc.stdout.rfind("\n@@INSTEP@@")
            if marker >= 0:
                results |= json.loads(proc.stdout[marker + len("\n@@INSTEP@@") :])
        except (subprocess.TimeoutExpired, OSError, ValueError) as exc:
            errors["python"] = f"probe process failed: {exc}"
    for probe in profile.version_probes:
        if probe.module or probe.python:
            value = results.get(probe.name)
            if isinstance(value, dict):
                if not probe.optional:
                    errors[probe.name] = value["error"]
                value = None
        else:
            value = _probe_here(probe)
        if value is not None and probe.regex:
            match = re.search(probe.regex, value)
            value = (match.group(1) if match.groups() else match.group(0)) if match else None
        matrix[probe.name] = value or None
    if errors:
        matrix["errors"] = errors
    return matrix


def _probe_here(probe: VersionProbe) -> str | None:
    try:
        if probe.env:
            return os.environ.get(probe.env)
        if probe.file:
            with open(os.path.expanduser(probe.file), encoding="utf-8", errors="replace") as fh:
                return fh.read().strip()
        if probe.command:
            proc = subprocess.run(
                probe.command, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S
            )
            return proc.stdout.strip() if proc.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired):
        return None
    return None


def _module_version_statically(module: str, attribute: str) -> str | None:
    """A module's version without importing it (importing torch costs seconds).

    ``__version__`` of a top-level package comes from its distribution's metadata;
    ``version.NAME`` from a constant assignment in the package's ``version.py``.
    ``None`` when neither applies: the probe then imports the module in a subprocess.
    """
    import ast
    import importlib.metadata
    import importlib.util

    top = module.split(".")[0]
    if attribute == "__version__" and module == top:
        for dist in importlib.metadata.packages_distributions().get(top, []):
            try:
                return importlib.metadata.version(dist)
            except importlib.metadata.PackageNotFoundError:
                continue
        return None
    parts = attribute.split(".")
    if len(parts) != 2 or parts[0] != "version":
        return None
    if module != top:
        return None
    try:  # find_spec of a top-level name does not import it (of a submodule it would)
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        candidate = Path(location) / "version.py"
        if candidate.is_file():
            break
    else:
        return None
    try:
        tree = ast.parse(candidate.read_text(encoding="utf-8"))
    except (OSError, SyntaxError):
        return None
    for node in tree.body:
        targets = (
            node.targets
            if isinstance(node, ast.Assign)
            else ([node.target] if isinstance(node, ast.AnnAssign) else [])
        )
        value = getattr(node, "value", None)
        constant = isinstance(value, ast.Constant) and isinstance(value.value, str)
        for target in targets:
            if constant and isinstance(target, ast.Name) and target.id == parts[1]:
                return value.value  # type: ignore[union-attr]
    return None
