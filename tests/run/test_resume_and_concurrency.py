"""Nothing finished is lost: SIGKILL of the runner then --resume, and concurrent writers."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.run.cases import SLOW_CASES, db_rows, write


def _instep_proc(args: list[str], cwd: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "instep", *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for_outcomes(db: Path, at_least: int, timeout: float = 60) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if db.exists():
            try:
                count = db_rows(db, "SELECT count(*) FROM outcomes")[0][0]
            except Exception:  # tables not created yet
                count = 0
            if count >= at_least:
                return count
        time.sleep(0.05)
    raise AssertionError(f"fewer than {at_least} outcomes after {timeout}s")


def test_sigkill_then_resume_gives_exactly_one_final_outcome_per_case(tmp_path):
    write(tmp_path, "test_slow.py", SLOW_CASES.format(n=12, sleep=0.25))
    db = tmp_path / ".instep" / "instep.db"
    runner = _instep_proc(
        ["run", "test_slow.py", "--preimport", "none", "--run", "killed", "--isolate", "case"],
        tmp_path,
    )
    _wait_for_outcomes(db, 3)
    runner.send_signal(signal.SIGKILL)
    runner.wait(timeout=10)
    before = db_rows(db, "SELECT count(*) FROM outcomes")[0][0]
    assert 3 <= before < 12
    assert db_rows(db, "SELECT status FROM runs WHERE name = 'killed'") == [("running",)]

    resumed = subprocess.run(
        [sys.executable, "-m", "instep", "run", "--resume", "killed", "--workers", "2"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert resumed.returncode == 0, resumed.stderr
    rows = db_rows(
        db,
        "SELECT c.nodeid, count(*), sum(o.final) FROM outcomes o JOIN cases c ON c.id = o.case_id"
        " GROUP BY c.nodeid",
    )
    assert len(rows) == 12
    assert all(count == 1 and finals == 1 for _, count, finals in rows), rows
    assert db_rows(db, "SELECT status FROM runs WHERE name = 'killed'") == [("finished",)]


def test_killed_runner_leaves_no_worker_processes(tmp_path):
    write(tmp_path, "test_slow.py", SLOW_CASES.format(n=40, sleep=0.2))
    db = tmp_path / ".instep" / "instep.db"
    runner = _instep_proc(["run", "test_slow.py", "--preimport", "none"], tmp_path)
    _wait_for_outcomes(db, 2)
    children = _descendants(runner.pid)
    assert children, "the runner should have worker hosts"
    runner.send_signal(signal.SIGKILL)
    runner.wait(timeout=10)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and any(_alive(p) for p in children):
        time.sleep(0.1)
    assert not [p for p in children if _alive(p)]


def _descendants(pid: int) -> list[int]:
    out = subprocess.run(["ps", "-eo", "pid=,ppid="], capture_output=True, text=True).stdout
    parents: dict[int, list[int]] = {}
    for line in out.splitlines():
        child, parent = (int(x) for x in line.split())
        parents.setdefault(parent, []).append(child)
    found, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split()[2] != "Z"
    except FileNotFoundError:
        return False


def test_two_runs_write_one_sqlite_file_at_once(tmp_path):
    write(tmp_path, "test_slow.py", SLOW_CASES.format(n=15, sleep=0.02))
    procs = [
        _instep_proc(["run", "test_slow.py", "--preimport", "none", "--run", name], tmp_path)
        for name in ("first", "second")
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    db = tmp_path / ".instep" / "instep.db"
    rows = db_rows(
        db,
        "SELECT r.name, count(o.id) FROM runs r JOIN outcomes o ON o.run_id = r.id"
        " WHERE o.status = 'passed' GROUP BY r.name ORDER BY r.name",
    )
    assert rows == [("first", 15), ("second", 15)]
