"""Batches with stable ids, ``instep triage``, error migration and ``instep compare``."""

from __future__ import annotations

import json

from instep.store import Store
from instep.triage.batches import batch_id, follow, group_batches
from instep.triage.migration import compare, follow_cases

SITE = "/usr/lib/python3.11/site-packages/torch"


def _chain(type_: str, message: str, module: str) -> list[dict]:
    frame = {
        "file": f"{SITE}/{module.split('.', 1)[1].replace('.', '/')}.py",
        "module": module,
        "function": "f",
        "line": 3,
    }
    return [{"type": type_, "message": message, "relation": None, "frames": [frame]}]


LOWERING = ("IndexError", "list assignment index out of range", "torch._inductor.lowering")
CODEGEN = ("IndexError", "list assignment index out of range", "torch._inductor.codegen.cpp")
DYNAMO = ("RuntimeError", "guard failed on 0x7f00aa", "torch._dynamo.guards")


def _row(case: str, status: str, cause=None, duration: float = 1.0) -> dict:
    data = {"status": status, "duration": duration, "attempt": 1, "final": True}
    if cause is not None:
        type_, message, module = cause
        data.update(
            exception_type=type_, message=message, exception_chain=_chain(type_, message, module)
        )
    return {"case": case, **data}


def _store_run(store: Store, name: str, rows: list[dict]) -> None:
    run = store.create_run(name=name, profile="cpu", settings={})
    store.set_plan(run.id, [(r["case"], "t.py", None) for r in rows])
    for r in rows:
        store.record_outcome(run.id, r["case"], "t.py", {k: v for k, v in r.items() if k != "case"})
    store.finish_run(run.id)


BASE = [
    _row("t.py::a", "failed", LOWERING, 3.0),
    _row("t.py::b", "failed", LOWERING, 1.0),
    _row("t.py::c", "failed", LOWERING, 2.0),
    _row("t.py::d", "failed", DYNAMO),
    _row("t.py::e", "passed"),
    _row("t.py::f", "failed", CODEGEN),
]
NEW = [
    _row("t.py::a", "passed"),
    _row("t.py::b", "failed", CODEGEN),  # sank deeper: lowering -> codegen
    _row("t.py::c", "failed", LOWERING),
    _row("t.py::d", "failed", DYNAMO),
    _row("t.py::e", "failed", DYNAMO),  # new failure
    _row("t.py::f", "failed", LOWERING),  # regressed: codegen -> lowering
]


def test_triage_prints_and_stores_batches_with_stable_ids(instep, tmp_path):
    db = str(tmp_path / "s.db")
    store = Store(db)
    _store_run(store, "base", BASE)
    _store_run(store, "new", NEW)
    store.close()

    result = instep("triage", "base", "--db", db, "--format", "json")
    assert result.code == 0, result.err
    base = json.loads(result.out)["batches"]
    assert [(b["layer"], b["size"]) for b in base] == [
        ("lowering", 3),
        ("dynamo", 1),
        ("codegen", 1),
    ]
    assert base[0]["representative"] == "t.py::b"  # the fastest member
    assert base[0]["signature"] == "IndexError: list assignment index out of range"
    assert base[1]["signature"] == "RuntimeError: guard failed on 0x?"

    result = instep("triage", "new", "--db", db, "--base", "base", "--format", "json")
    data = json.loads(result.out)
    new_ids = {b["layer"]: b["batch"] for b in data["batches"]}
    assert new_ids["dynamo"] == base[1]["batch"]  # same cause, same id, across runs
    first = {b["layer"]: b["first_seen"] for b in data["batches"]}
    assert first["dynamo"] == "base"
    progress = {p["batch"]: p for p in data["progress"]}
    lowering = progress[base[0]["batch"]]
    assert (lowering["passed"], lowering["failed"]) == (1, 2)
    assert lowering["judgement"].startswith("partly fixed")

    # stored: each member's batch id is in its outcome's evidence
    shown = json.loads(instep("show", "new", "--db", db, "--format", "json").out)
    stored = {o["case"]: o["evidence"].get("batch") for o in shown["outcomes"]}
    assert stored["t.py::d"] == stored["t.py::e"] == new_ids["dynamo"]
    assert stored["t.py::a"] is None

    table = instep("triage", "new", "--db", db, "--base", "base")
    assert table.code == 0 and "partly fixed" in table.out and new_ids["dynamo"] in table.out


def test_compare_reports_migration(instep, tmp_path):
    db = str(tmp_path / "s.db")
    store = Store(db)
    _store_run(store, "base", BASE)
    _store_run(store, "new", NEW)
    store.close()
    result = instep("compare", "base", "new", "--db", db, "--format", "json")
    assert result.code == 1  # a new failure and a regression
    data = json.loads(result.out)
    cases = {k: [m["case"] for m in v] for k, v in data["cases"].items()}
    assert cases["fixed"] == ["t.py::a"]
    assert cases["deeper"] == ["t.py::b"]
    assert cases["shallower"] == ["t.py::f"]
    assert cases["still_failing"] == ["t.py::c", "t.py::d"]
    assert cases["new"] == ["t.py::e"]
    text = instep("compare", "base", "new", "--db", db)
    assert "migrated deeper" in text.out and "[codegen]" in text.out


def test_batch_ids_and_flaky_labels():
    assert batch_id("lowering", "x.y", "sig") == batch_id("lowering", "x.y", "sig")
    assert batch_id("lowering", "x.y", "sig") != batch_id("codegen", "x.y", "sig")
    rows = [dict(r, layer="lowering", category="c.d", signature="s") for r in BASE[:3]]
    batches = group_batches(rows)
    assert len(batches) == 1 and len(batches[0].cases) == 3
    assert follow(batches, [])[0].judgement == "not re-run"

    def run(status: str) -> list[dict]:
        return [{"case": "t.py::x", "status": status, "layer": "runtime", "signature": "s"}]

    chain = follow_cases([("1", run("failed")), ("2", run("passed")), ("3", run("failed"))])
    assert chain[0].label == "flaky"
    flagged = [{"case": "t.py::x", "status": "passed", "flaky": True}]
    assert compare(("1", run("failed")), ("2", flagged))["flaky"][0].case == "t.py::x"
