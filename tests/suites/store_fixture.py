"""A real result store with a hand-made run, for the suites' tests (no tests executed)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

from instep.store import Store


def triad_counters(**legs: str) -> dict[str, Any]:
    counters = {f"instep.triad.{leg}.{state}": 1 for leg, state in legs.items()}
    return {"counters": counters}


def make_run(db: Path, name: str, rows: list[tuple[str, dict[str, Any]]], **run: Any) -> None:
    """Store a finished run ``name`` whose final outcomes are ``rows`` (nodeid, values)."""
    store = Store(db)
    try:
        created = store.create_run(
            name=name,
            profile=run.get("profile", "cpu"),
            tier=run.get("tier"),
            settings={"paths": [], "cwd": str(db.parent)},
            started_at=run.get("started_at"),
        )
        store.set_plan(created.id, [(n, n.split("::")[0], None) for n, _ in rows])
        now = run.get("started_at") or datetime(2026, 1, 1)
        for nodeid, values in rows:
            data = {"attempt": 1, "final": True, "started_at": now, "finished_at": now}
            data.update(values)
            store.record_outcome(created.id, nodeid, nodeid.split("::")[0], data)
        store.finish_run(created.id)
    finally:
        store.close()
