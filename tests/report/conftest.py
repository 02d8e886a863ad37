"""A real result store for the report tests: one test file run twice by the real runner.

The session-scoped :func:`report_store` writes ``test_demo.py`` (cases that pass, fail
with messages the profile's rules classify, crash with SIGSEGV, skip; one whose message
holds a ``<script>`` payload) and runs it with ``instep run`` twice: phase 1, then phase
2 where one case is fixed and one moves from ``lowering`` to ``kernel_compile``. So the
trend, the batch judgement and the migration chains have two real points.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

SCRIPT = "<script>alert(1)</script>"
NO_TORCH = ("--preimport", "none")  # plain pytest cases: no torch in the workers

DEMO = """
import ctypes
import sys
from pathlib import Path

import pytest

PHASE = Path(__file__).with_name("phase.txt").read_text().strip()


def test_ok():
    print("plain output")


def test_script_message():
    print("<img src=x onerror=alert(2)>")
    raise AssertionError("SCRIPT in the message")


def test_moves():
    if PHASE == "1":
        raise RuntimeError("MissingOperatorWithoutDecomp: aten.foo")
    raise RuntimeError("CppCompileError: C++ compile error in the kernel")


def test_fixed_later():
    if PHASE == "1":
        raise RuntimeError("MissingOperatorWithoutDecomp: aten.bar")


def test_chained():
    try:
        raise KeyError("inner cause")
    except KeyError as exc:
        raise ValueError("outer failure") from exc


def test_crash():
    ctypes.string_at(0)


@pytest.mark.skip(reason="not on this backend")
def test_skipped():
    pass


@pytest.mark.parametrize("i", range(3))
def test_numerics(i):
    print("stderr line", i, file=sys.stderr)
    raise AssertionError("Tensor-likes are not close! Mismatched elements: 1 / 4")


@pytest.mark.parametrize("name", ["<b>bold</b>"])
def test_param(name):
    pass
""".replace("SCRIPT", SCRIPT)


@dataclass
class ReportStore:
    db: Path
    work: Path
    runs: tuple[str, str]
    seconds: float


def _instep_run(work: Path, db: Path, name: str) -> None:
    argv = ["run", "test_demo.py", *NO_TORCH, "--run", name, "--db", str(db)]
    proc = subprocess.run(
        [sys.executable, "-m", "instep", *argv],
        cwd=work,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_COLOR": "1"},
        timeout=300,
    )
    assert proc.returncode == 1, proc.stderr  # failures are expected: exit 1
    assert f"instep: run {name} finished" in proc.stderr, proc.stderr


@pytest.fixture(scope="session")
def report_store(tmp_path_factory) -> ReportStore:
    import time

    work = tmp_path_factory.mktemp("report-runs")
    (work / "test_demo.py").write_text(DEMO)
    db = work / "results.db"
    start = time.perf_counter()
    for phase, name in (("1", "week1"), ("2", "week2")):
        (work / "phase.txt").write_text(phase)
        _instep_run(work, db, name)
    return ReportStore(db, work, ("week1", "week2"), time.perf_counter() - start)
