"""The version matrix of seed 000 5.1, read through a profile's version probes.

:func:`read_version_matrix` runs the module and Python probes together in *one*
subprocess of the user's Python (``python`` argument, default: this interpreter), so that
instep's own process never imports torch nor initialises a device; command, file and
environment probes run here. Each probe gives a :class:`ProbeResult` (value, or the error
that explains its absence). The profile's ``env`` is applied to the probe process (the
NPU profile's ``TORCH_DEVICE_BACKEND_AUTOLOAD=0``). Nothing here judges compatibility or
renders output.
"""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import os
import re
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from instep.profiles import Profile, VersionProbe
from instep.user_python import ANSWER_MARK, run_script

PROBE_TIMEOUT_S = 120

# Plain multi-line Python (seed 000 6.1: no clever one-liners in bootstraps).
_PROBE_SCRIPT = r"""
import contextlib
import importlib
import io
import json
import sys

probes = json.loads(sys.argv[1])
out = {}
for probe in probes:
    try:
        if probe.get("module"):
            value = importlib.import_module(probe["module"])
            for part in probe.get("attribute", "__version__").split("."):
                value = getattr(value, part)
            out[probe["name"]] = {"value": None if value is None else str(value)}
        else:
            buf = io.StringIO()
            with contextlib.redirect_stdout(buf):
                exec(compile(probe["python"], "<probe " + probe["name"] + ">", "exec"), {})
            out[probe["name"]] = {"value": buf.getvalue().strip()}
    except BaseException as exc:
        out[probe["name"]] = {"error": type(exc).__name__ + ": " + str(exc)[:300]}
sys.stdout.write(ANSWER_MARK + json.dumps(out))
""".replace("ANSWER_MARK", repr(ANSWER_MARK))


@dataclass
class ProbeResult:
    name: str
    source: str  # 'module', 'python', 'command', 'file' or 'env'
    value: str | None = None
    error: str | None = None  # why there is no value
    optional: bool = True

    @property
    def failed(self) -> bool:
        """A required probe gave nothing."""
        return self.value is None and not self.optional

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "source": self.source,
            "value": self.value,
            "error": self.error,
            "optional": self.optional,
        }


@dataclass
class VersionMatrix:
    python: str  # the interpreter the in-Python probes ran in
    probes: list[ProbeResult] = field(default_factory=list)

    def get(self, name: str) -> str | None:
        for probe in self.probes:
            if probe.name == name:
                return probe.value
        return None

    def as_dict(self) -> dict[str, Any]:
        return {"python_executable": self.python, "probes": [p.as_dict() for p in self.probes]}

    def flat(self) -> dict[str, Any]:
        """``{probe: value}`` plus ``errors`` for required probes (the runner's record)."""
        out: dict[str, Any] = {p.name: p.value for p in self.probes}
        errors = {p.name: p.error or "no value" for p in self.probes if p.failed}
        if errors:
            out["errors"] = errors
        return out


def _source_of(probe: VersionProbe) -> str:
    for source in ("module", "python", "command", "file", "env"):
        if getattr(probe, source):
            return source
    return "?"


def read_version_matrix(
    profile: Profile,
    python: str | None = None,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
) -> VersionMatrix:
    """Run every probe of ``profile``; a probe that fails gives a result with ``error``."""
    python = python or sys.executable
    child_env = {**os.environ, **profile.env, **(env or {})}
    answers: dict[str, dict[str, Any]] = {}
    if python == sys.executable:  # read versions of *this* interpreter without importing
        for probe in profile.version_probes:
            if probe.module:
                static = _module_version_statically(probe.module, probe.attribute)
                if static is not None:
                    answers[probe.name] = {"value": static}
    in_python = [
        p for p in profile.version_probes if (p.module or p.python) and p.name not in answers
    ]
    process_error: str | None = None
    if in_python:
        got, error = run_script(
            _PROBE_SCRIPT,
            [p.model_dump(exclude_none=True) for p in in_python],
            python=python,
            env=child_env,
            cwd=cwd,
            timeout=PROBE_TIMEOUT_S,
        )
        if error is None:
            answers.update(got)
        else:
            process_error = f"probe process: {error}"
    matrix = VersionMatrix(python=python)
    for probe in profile.version_probes:
        result = ProbeResult(probe.name, _source_of(probe), optional=probe.optional)
        if probe.module or probe.python:
            answer = answers.get(probe.name)
            if answer is None:
                result.error = process_error or "no answer from the probe process"
            else:
                result.value, result.error = answer.get("value"), answer.get("error")
        else:
            result.value, result.error = _probe_here(probe, child_env)
        if result.value is not None and probe.regex:
            match = re.search(probe.regex, result.value)
            if match:
                result.value = match.group(1) if match.groups() else match.group(0)
            else:
                result.value, result.error = None, f"regex {probe.regex!r} did not match"
        if result.value == "":
            result.value, result.error = None, result.error or "empty output"
        matrix.probes.append(result)
    return matrix


def _probe_here(probe: VersionProbe, env: Mapping[str, str]) -> tuple[str | None, str | None]:
    try:
        if probe.env:
            value = env.get(probe.env)
            return value, None if value is not None else f"${probe.env} is not set"
        if probe.file:
            path = os.path.expanduser(probe.file)
            with open(path, encoding="utf-8", errors="replace") as fh:
                return fh.read().strip(), None
        if probe.command:
            proc = subprocess.run(
                probe.command,
                capture_output=True,
                text=True,
                timeout=PROBE_TIMEOUT_S,
                env=dict(env),
            )
            if proc.returncode == 0:
                return _one_value(proc.stdout), None
            return None, f"{probe.command[0]} exited {proc.returncode}"
    except FileNotFoundError as exc:
        return None, f"not found: {exc.filename}"
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, " ".join(str(exc).split())
    return None, "no source"


def _one_value(stdout: str) -> str:
    """A command's answer as one value: per-device tools print a line per device
    (``nvidia-smi --query-gpu=driver_version`` on two GPUs), and equal lines say one thing."""
    lines = list(dict.fromkeys(line.strip() for line in stdout.splitlines() if line.strip()))
    return ", ".join(lines)


def _module_version_statically(module: str, attribute: str) -> str | None:
    """A module's version without importing it (importing torch costs seconds).

    ``__version__`` of a top-level package comes from its distribution's metadata;
    ``version.NAME`` from a constant assignment in the package's ``version.py``.
    ``None`` when neither applies: the probe then imports the module in a subprocess.
    """
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
