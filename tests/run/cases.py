"""Test files the runner's tests execute: written into tmp dirs, run for real."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

RELIABILITY = """
import ctypes, os, signal, sys, time
import pytest

def test_passes():
    print("plain output")

def test_fails_with_chain():
    try:
        raise KeyError("inner cause")
    except KeyError as exc:
        raise ValueError("outer failure") from exc

def test_segfault():
    ctypes.string_at(0)

def test_os_exit():
    os._exit(3)

@pytest.mark.timeout(1.5)
def test_hang_in_c():
    signal.pause()

@pytest.mark.timeout(1.5)
def test_hang_in_python():
    while True:
        pass

def test_memory_past_limit():
    blob = bytearray(3 * 1024 ** 3)
    assert blob

def test_prints_100_mb():
    chunk = "x" * (1024 * 1024 - 1) + "\\n"
    for _ in range(100):
        sys.stdout.write(chunk)
    sys.stdout.write("THE END\\n")

def test_non_utf8_output():
    sys.stdout.flush()
    os.write(1, b"bad \\xff\\xfe bytes\\n")
    os.write(2, b"\\xc3\\x28 also bad\\n")

@pytest.mark.skip(reason="not on this backend")
def test_skipped():
    pass

@pytest.mark.xfail(reason="known bug")
def test_xfailed():
    assert False

def test_last_one_still_runs():
    pass
"""

COLLECTION_ERROR = "import this_module_does_not_exist_anywhere\n\ndef test_never():\n    pass\n"

SLOW_CASES = """
import time
import pytest

@pytest.mark.parametrize("i", range({n}))
def test_slow(i):
    time.sleep({sleep})
"""

FLAKY = """
from pathlib import Path

def test_flaky(tmp_path_factory):
    marker = Path(__file__).with_name("flaky.marker")
    if not marker.exists():
        marker.write_text("failed once")
        raise AssertionError("first attempt fails")

def test_always_fails():
    assert 1 == 2
"""


def write(directory: Path, name: str, text: str) -> Path:
    path = directory / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def show(instep, run: str, *extra: str) -> dict:
    result = instep("show", run, "--format", "json", *extra)
    assert result.code == 0, result.err
    return json.loads(result.out)


def by_case(data: dict) -> dict[str, dict]:
    return {o["case"].split("::")[-1]: o for o in data["outcomes"]}


def db_rows(db: Path, sql: str) -> list[tuple]:
    with sqlite3.connect(db) as conn:
        return conn.execute(sql).fetchall()
