"""The runner over another engine than the local pool: what any engine may do to it.

An engine (the Ray one) may hand the runner a result twice: Ray re-executes a task whose
node died after the first execution's result had already arrived. The runner must then
store, count and re-run nothing twice. A replaying engine stands in for Ray here; the
store is a real SQLite file.
"""

from __future__ import annotations

from collections import deque

from instep.profiles import load_profile
from instep.run import runner
from instep.run.runner import RunOptions, RunReporter, execute_run
from instep.run.worker_pool import PoolEvent, WorkItem
from instep.store import Store
from instep.triage.classifier import Classifier

CASES = [{"nodeid": f"t.py::{n}", "file": "t.py", "timeout": None} for n in ("ok", "bad")]


class ReplayingEngine:
    """Reports every outcome twice, as a re-executed task would."""

    def __init__(self) -> None:
        self.queue: deque[WorkItem] = deque()
        self.submitted: list[tuple[str, int]] = []

    def start(self) -> None: ...

    def close(self) -> None: ...

    def __enter__(self) -> ReplayingEngine:
        return self

    def __exit__(self, *exc: object) -> None: ...

    def submit(self, items: list[WorkItem], front: bool = False) -> None:
        self.submitted += [(i.nodeid, i.attempt) for i in items]
        self.queue.extend(items)

    def events(self):  # type: ignore[no-untyped-def]
        yield PoolEvent("collected", 0, None, data={"cases": CASES, "errors": []})
        while self.queue:
            item = self.queue.popleft()
            status = "failed" if item.nodeid.endswith("bad") else "passed"
            for _ in range(2):
                data = {"status": status, "duration": 0.01, "message": "AssertionError: no"}
                yield PoolEvent("outcome", 0, None, item.nodeid, item, data)


class Counting(RunReporter):
    def __init__(self) -> None:
        self.outcomes: list[tuple[str, str, bool]] = []

    def outcome(self, nodeid, status, final, data) -> None:  # type: ignore[no-untyped-def]
        self.outcomes.append((nodeid, status, final))


def test_a_result_reported_twice_is_stored_counted_and_rerun_once(tmp_path, monkeypatch):
    engine = ReplayingEngine()
    monkeypatch.setattr(runner, "_make_pool", lambda profile, settings, opts: engine)
    reporter = Counting()
    (tmp_path / "t.py").write_text("")  # the run's path exists; the engine runs nothing
    opts = RunOptions(paths=["t.py"], reruns=1, preimport=[], name="replayed", cwd=tmp_path)
    result = execute_run(
        tmp_path / "s.db", load_profile("cpu"), opts, reporter, classifier=Classifier
    )

    assert engine.submitted == [("t.py::ok", 1), ("t.py::bad", 1), ("t.py::bad", 2)]
    assert reporter.outcomes == [
        ("t.py::ok", "passed", True),
        ("t.py::bad", "failed", False),
        ("t.py::bad", "failed", True),
    ]
    assert result.counts == {"passed": 1, "failed": 1} and result.exit_code == 1
    store = Store(tmp_path / "s.db")
    try:
        stored = store.attempts(store.get_run("replayed").id)
    finally:
        store.close()
    assert stored == {
        "t.py::ok": [(1, "passed", True)],
        "t.py::bad": [(1, "failed", False), (2, "failed", True)],
    }
