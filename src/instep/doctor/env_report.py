"""``instep doctor env`` as a library call: version matrix + environment checks + API scan.

:func:`diagnose_environment` runs the version probes and the environment checks (two
subprocesses of the user's Python, side by side) and, when test paths are given, the
static API scan against the torch that Python would import. :class:`EnvReport` holds the
results and says whether anything failed; rendering is the CLI's job.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from instep.doctor.api_scan import ApiScanReport, InstalledTorch, scan_test_sources
from instep.doctor.env_checks import (
    CheckStatus,
    EnvCheck,
    is_this_python,
    require_torch,
    run_env_checks,
)
from instep.doctor.version_matrix import VersionMatrix, read_version_matrix
from instep.errors import MissingDependency
from instep.profiles import Profile


@dataclass
class EnvReport:
    profile: str
    matrix: VersionMatrix
    checks: list[EnvCheck]
    api_scan: ApiScanReport | None = None

    @property
    def failed(self) -> bool:
        bad_check = any(c.status is CheckStatus.FAIL for c in self.checks)
        bad_probe = any(p.failed for p in self.matrix.probes)
        return bad_check or bad_probe or bool(self.api_scan and self.api_scan.missing)

    def as_dict(self) -> dict[str, Any]:
        return {
            "profile": self.profile,
            "ok": not self.failed,
            "version_matrix": self.matrix.as_dict(),
            "checks": [c.as_dict() for c in self.checks],
            "api_scan": self.api_scan.as_dict() if self.api_scan else None,
        }


def torch_root_of(python: str | None) -> Path:
    """Where ``python`` would import torch from (found without importing it)."""
    if is_this_python(python):
        return InstalledTorch().root
    code = (
        "import importlib.util, json\n"
        "spec = importlib.util.find_spec('torch')\n"
        "print(json.dumps(list(spec.submodule_search_locations) if spec else []))\n"
    )
    proc = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=60)
    roots = json.loads(proc.stdout or "[]") if proc.returncode == 0 else []
    if not roots:
        raise MissingDependency("torch", "the API scan", f"install torch in {python}")
    return Path(roots[0])


def diagnose_environment(
    profile: Profile,
    tests: Sequence[str | Path] = (),
    python: str | None = None,
    cwd: str | None = None,
    env: Mapping[str, str] | None = None,
) -> EnvReport:
    require_torch(python, "instep doctor env")
    with ThreadPoolExecutor(max_workers=2) as pool:
        matrix = pool.submit(read_version_matrix, profile, python, env, cwd)
        checks = pool.submit(run_env_checks, profile, python, cwd, env)
        scan = None
        if tests:
            base = Path(cwd) if cwd else Path.cwd()
            paths = [p if Path(p).is_absolute() else base / p for p in map(Path, tests)]
            scan = scan_test_sources(paths, InstalledTorch(torch_root_of(python)))
        return EnvReport(profile.name, matrix.result(), checks.result(), scan)
