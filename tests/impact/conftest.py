"""Real wheels for the real-world tests, found the way a user finds them.

``INSTEP_REALWORLD=1``: ``pip download --no-deps`` of torch 2.13.0, torch 2.14.1 and
torch-npu 2.13.0 into instep's wheel cache (``INSTEP_CACHE_DIR``, else one folder for the
test session), as ``instep impact --upstream-old torch==2.13.0`` does; CI sets it. Or
``INSTEP_WHEELS``: a folder that already holds the three wheels. Otherwise the tests that
need them skip. Never a path of one machine.
"""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import pytest

SPECS = {"old": "torch==2.13.0", "new": "torch==2.14.1", "down": "torch-npu==2.13.0"}
_PREFIXES = {"old": "torch-2.13.0", "new": "torch-2.14.1", "down": "torch_npu-2.13.0"}


def _wheels_from_dir() -> dict[str, Path] | None:
    where = os.environ.get("INSTEP_WHEELS")
    if not where or not Path(where).is_dir():
        return None
    found = {}
    for key, prefix in _PREFIXES.items():
        hits = sorted(Path(where).glob(f"{prefix}*.whl"))
        if not hits:
            return None
        found[key] = hits[0]
    return found


@pytest.fixture(scope="session")
def real_wheels(tmp_path_factory) -> dict[str, Path]:
    """``old``, ``new``, ``down``: the three wheel files."""
    found = _wheels_from_dir()
    if found is not None:
        return found
    if os.environ.get("INSTEP_REALWORLD") != "1":
        pytest.skip("real wheels not available (set INSTEP_REALWORLD=1 or INSTEP_WHEELS)")
    from instep.impact.upstream.sources.pip_spec import download_wheel

    cache = Path(os.environ.get("INSTEP_CACHE_DIR") or tmp_path_factory.mktemp("instep-cache"))
    return {key: download_wheel(spec, cache) for key, spec in SPECS.items()}


class WheelFiles:
    """Read members of a wheel (``torch/_inductor/lowering.py``) without extracting it."""

    def __init__(self, wheel: Path) -> None:
        self.zip = zipfile.ZipFile(wheel)
        self.names = set(self.zip.namelist())

    def read(self, rel: str) -> bytes:
        return self.zip.read(rel)

    def python_files(self, under: str) -> list[str]:
        return sorted(n for n in self.names if n.startswith(under) and n.endswith(".py"))


@pytest.fixture(scope="session")
def torch_wheels(real_wheels) -> tuple[WheelFiles, WheelFiles]:
    """The old and the new torch wheel, readable member by member."""
    return WheelFiles(real_wheels["old"]), WheelFiles(real_wheels["new"])
