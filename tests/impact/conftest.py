"""Real wheels for the real-world tests, found the way a user finds them, and the whole
report of each real pair, analysed once per test session.

``INSTEP_REALWORLD=1``: ``pip download --no-deps`` of torch 2.13.0, torch 2.14.1 and
torch-npu 2.13.0 into instep's wheel cache (``INSTEP_CACHE_DIR``, else one folder for the
test session), as ``instep impact --upstream-old torch==2.13.0`` does; CI sets it. Or
``INSTEP_WHEELS``: a folder that already holds the three wheels. Otherwise the tests that
need them skip. Never a path of one machine.

The older pair, torch 2.12.0 -> 2.13.0 on torch-npu 2.12.0 (:func:`wheels_2_12`), runs only
when ``INSTEP_WHEELS`` holds its two further wheels, or with ``INSTEP_REALWORLD_2_12=1``
(then downloaded): CI sets neither. Its torch 2.12.0 wheel is a 532 MB download, and its
cold analysis about 78 CPU-s more, for rows (the removed named-tensor symbols and
overloads) that the tests on ELF files and git repositories the tests build cover too;
docs/validation/impact-native.md has the figures of that choice.
"""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path

import pytest

SPECS = {"old": "torch==2.13.0", "new": "torch==2.14.1", "down": "torch-npu==2.13.0"}
_PREFIXES = {"old": "torch-2.13.0", "new": "torch-2.14.1", "down": "torch_npu-2.13.0"}


def _wheels_from_dir(prefixes: dict[str, str] = _PREFIXES) -> dict[str, Path] | None:
    where = os.environ.get("INSTEP_WHEELS")
    if not where or not Path(where).is_dir():
        return None
    found = {}
    for key, prefix in prefixes.items():
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

    return {key: download_wheel(spec, _cache(tmp_path_factory)) for key, spec in SPECS.items()}


def _cache(tmp_path_factory) -> Path:
    """instep's cache for the session: ``INSTEP_CACHE_DIR``, else one folder for all."""
    where = os.environ.get("INSTEP_CACHE_DIR")
    return Path(where) if where else tmp_path_factory.getbasetemp() / "instep-cache"


SPECS_2_12 = {"old": "torch==2.12.0", "down": "torch-npu==2.12.0"}
_PREFIXES_2_12 = {"old": "torch-2.12.0", "down": "torch_npu-2.12.0"}


@pytest.fixture(scope="session")
def wheels_2_12(real_wheels, tmp_path_factory) -> dict[str, Path]:
    """``old``, ``new``, ``down`` of torch 2.12.0 -> 2.13.0 on torch-npu 2.12.0 (the new
    side is :func:`real_wheels`' old one); see the module's docstring for when."""
    found = _wheels_from_dir(_PREFIXES_2_12)
    if found is None:
        if os.environ.get("INSTEP_REALWORLD_2_12") != "1":
            pytest.skip(
                "torch 2.12.0 / torch-npu 2.12.0 wheels not at hand (INSTEP_WHEELS), and "
                "INSTEP_REALWORLD_2_12=1 (a 532 MB download) not set"
            )
        from instep.impact.upstream.sources.pip_spec import download_wheel

        cache = _cache(tmp_path_factory)
        found = {key: download_wheel(spec, cache) for key, spec in SPECS_2_12.items()}
    return {"old": found["old"], "new": real_wheels["old"], "down": found["down"]}


def _whole_analysis(wheels: dict[str, Path], cache: Path):
    """The report of ``wheels`` as ``instep impact`` makes it (the engine's object)."""
    from instep.impact.analysis import ImpactRequest, analyse

    return analyse(
        ImpactRequest(
            downstream=str(wheels["down"]),
            upstream_old=str(wheels["old"]),
            upstream_new=str(wheels["new"]),
            cache_dir=cache,
        )
    )


def _as_read(report) -> dict:
    """A report as a user's JSON reader sees it."""
    from instep.impact.export.json_doc import as_document

    return json.loads(as_document(report).to_json())


@pytest.fixture(scope="session")
def release_report(real_wheels, tmp_path_factory):
    """torch 2.13.0 -> 2.14.1 on torch-npu 2.13.0, whole (one cold analysis a session),
    as the renderers take it (sections, Markdown)."""
    return _whole_analysis(real_wheels, _cache(tmp_path_factory))


@pytest.fixture(scope="session")
def release_doc(release_report) -> dict:
    """The same report as a user's JSON reader sees it."""
    return _as_read(release_report)


@pytest.fixture(scope="session")
def release_doc_2_12(wheels_2_12, tmp_path_factory) -> dict:
    """torch 2.12.0 -> 2.13.0 on torch-npu 2.12.0, whole."""
    return _as_read(_whole_analysis(wheels_2_12, _cache(tmp_path_factory)))


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
