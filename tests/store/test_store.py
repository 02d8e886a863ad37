"""The result store: migrations, no duplicate attempts, concurrent case inserts, merge."""

from __future__ import annotations

import sqlite3
import threading
import time

from instep.store import Store
from instep.store.database import HEAD, current_revision, upgrade


def _run_with_outcomes(store: Store, name: str, statuses: dict[str, str]):
    run = store.create_run(name=name, profile="cpu", settings={"paths": ["t.py"]})
    store.set_plan(run.id, [(n, "t.py", None) for n in statuses])
    for nodeid, status in statuses.items():
        assert store.record_outcome(
            run.id, nodeid, "t.py", {"status": status, "attempt": 1, "duration": 0.5}
        )
    store.finish_run(run.id)
    return run


def test_new_store_is_migrated_to_head_with_wal(tmp_path):
    db = tmp_path / "sub" / "s.db"
    store = Store(db)
    assert current_revision(store.engine) == HEAD
    store.close()
    with sqlite3.connect(db) as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        assert {"runs", "cases", "run_cases", "outcomes", "alembic_version"} <= tables
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        columns = {r[1] for r in conn.execute("PRAGMA table_info(outcomes)")}
    later = {
        "layer",
        "category",
        "signature",
        "stage",
        "confidence",
        "evidence",
        "exception_chain",
        "timings",
        "stage_timings",
        "metrics",
        "artifacts",
        "attempt",
        "flaky",
    }
    assert later <= columns
    again = Store(db)  # reopening (and upgrading again) changes nothing
    upgrade(again.engine)
    assert current_revision(again.engine) == HEAD
    again.close()


def test_store_is_a_context_manager_that_closes_even_on_error(tmp_path, monkeypatch):
    closed: list[str] = []
    monkeypatch.setattr(Store, "close", lambda self: closed.append(self.target))
    db = tmp_path / "s.db"
    with Store(db) as store:
        assert current_revision(store.engine) == HEAD
    assert closed == [str(db)]
    try:
        with Store(db) as store:
            raise KeyError("inside")
    except KeyError:
        pass
    assert closed == [str(db), str(db)]


def test_new_store_waits_for_a_writer_that_holds_the_rollback_journal(tmp_path):
    # Another runner created the file a moment ago and still holds its write lock, before
    # the switch to WAL. SQLite refuses our switch at once (no busy handler: it would
    # deadlock); opening must wait for the writer instead of failing "database is locked".
    db = tmp_path / "s.db"
    other = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    other.execute("CREATE TABLE scratch (a)")
    other.execute("BEGIN")
    other.execute("INSERT INTO scratch VALUES (1)")
    releaser = threading.Timer(0.5, lambda: other.execute("COMMIT"))
    releaser.start()
    started = time.monotonic()
    store = Store(db)
    waited = time.monotonic() - started
    releaser.join()
    other.close()
    assert current_revision(store.engine) == HEAD
    assert waited >= 0.4
    store.close()


def test_an_attempt_is_stored_once(tmp_path):
    store = Store(tmp_path / "s.db")
    run = _run_with_outcomes(store, "r", {"t.py::a": "passed"})
    assert not store.record_outcome(run.id, "t.py::a", "t.py", {"status": "failed", "attempt": 1})
    assert store.record_outcome(run.id, "t.py::a", "t.py", {"status": "failed", "attempt": 2})
    assert [o.status for o in store.outcomes(run.id, final_only=False)] == ["passed", "failed"]


def test_cases_are_shared_between_stores_opened_twice(tmp_path):
    one, two = Store(tmp_path / "s.db"), Store(tmp_path / "s.db")
    ids_one = one.case_ids([("t.py::a", "t.py"), ("t.py::b", "t.py")])
    ids_two = two.case_ids([("t.py::b", "t.py"), ("t.py::c", "t.py")])
    assert ids_one["t.py::b"] == ids_two["t.py::b"]
    assert len({*ids_one.values(), *ids_two.values()}) == 3


def test_get_run_by_name_id_and_latest(tmp_path):
    store = Store(tmp_path / "s.db")
    first = _run_with_outcomes(store, "first", {"t.py::a": "passed"})
    _run_with_outcomes(store, "second", {"t.py::a": "failed"})
    assert store.get_run(str(first.id)).name == "first"
    assert store.get_run("latest").name == "second"
    assert store.status_counts(store.get_run("second").id) == {"failed": 1}


def test_durations_come_from_unsharded_runs_only(tmp_path):
    store = Store(tmp_path / "s.db")
    _run_with_outcomes(store, "full", {"t.py::a": "passed"})
    sharded = store.create_run(name="s", profile="cpu", settings={}, shard="1/2")
    store.record_outcome(sharded.id, "t.py::b", "t.py", {"status": "passed", "duration": 9.0})
    assert store.durations(["t.py::a", "t.py::b"]) == {"t.py::a": 0.5}


def test_merge_copies_runs_once_and_renames_clashes(tmp_path, instep):
    a, b = Store(tmp_path / "a.db"), Store(tmp_path / "b.db")
    _run_with_outcomes(a, "nightly", {"t.py::x": "passed", "t.py::y": "failed"})
    _run_with_outcomes(b, "nightly", {"t.py::x": "crashed"})
    a.close()
    b.close()
    result = instep("merge", str(tmp_path / "a.db"), str(tmp_path / "b.db"), "--db", "all.db")
    assert result.code == 0, result.err
    assert "merged 2 runs (3 outcomes)" in result.out
    again = instep("merge", str(tmp_path / "a.db"), "--db", "all.db")
    assert "merged 0 runs" in again.out and "1 already present" in again.out
    merged = Store(tmp_path / "all.db")
    names = sorted(r.name for r in merged.list_runs())
    assert names[0] == "nightly" and names[1].startswith("nightly@")
    statuses = {
        name: sorted(o.status for o in merged.outcomes(merged.get_run(name).id)) for name in names
    }
    assert statuses == {names[0]: ["failed", "passed"], names[1]: ["crashed"]}
    missing = instep("merge", "nope.db", "--db", "all.db")
    assert missing.code == 2 and "nope.db" in missing.err


def test_bad_db_argument_is_one_line(instep, tmp_path):
    (tmp_path / "adir").mkdir()
    result = instep("runs", "--db", str(tmp_path / "adir"))
    assert result.code == 2
    assert "directory" in result.err


def test_a_file_that_is_not_a_store_is_one_line_and_left_as_it_was(instep_proc, tmp_path):
    for name, content in (("bad.db", b"hello\n"), ("cut.db", b"SQLite format 3\0" + b"x" * 90)):
        path = tmp_path / name
        path.write_bytes(content)
        for command in (("runs",), ("show", "latest"), ("merge", name)):
            result = instep_proc(*command, "--db", name)
            assert result.code == 2, (command, result.err)
            assert result.err.strip() == (
                f"instep: error: --db {name}: cannot open the store: file is not a database"
                " (expected a SQLite store)"
            )
        assert path.read_bytes() == content  # never written, never lost
    assert {p.name for p in tmp_path.iterdir()} == {"bad.db", "cut.db"}  # no -wal, no -shm


def test_postgres_store_has_the_same_schema_and_behaviour(postgres_url):
    store = Store(postgres_url)
    assert current_revision(store.engine) == HEAD
    run = _run_with_outcomes(store, "pg", {"t.py::a": "passed", "t.py::b": "timeout"})
    assert not store.record_outcome(run.id, "t.py::a", "t.py", {"status": "passed", "attempt": 1})
    assert store.status_counts(run.id) == {"passed": 1, "timeout": 1}
    second = Store(postgres_url)  # a second client: no migration race, same cases
    assert second.case_ids([("t.py::a", "t.py")]) == store.case_ids([("t.py::a", "t.py")])
    store.close()
    second.close()


def test_instep_run_into_postgres(postgres_url, instep, tmp_path):
    (tmp_path / "test_pg.py").write_text("def test_ok():\n    pass\n")
    result = instep("run", "test_pg.py", "--preimport", "none", "--db", postgres_url, "--run", "p")
    assert result.code == 0, result.err
    shown = instep("show", "p", "--db", postgres_url, "--format", "json")
    assert '"status": "passed"' in shown.out
    merged = instep("merge", postgres_url, "--db", str(tmp_path / "local.db"))
    assert merged.code == 0 and "  p\n" in merged.out
