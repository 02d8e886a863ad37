"""The status vocabulary: one ``Status`` enum whose members read, format and store as
their plain values, and the failing set defined once."""

from __future__ import annotations

import json

from instep.outcome import FAILING, MANIFESTATIONS, PASSING, STATUSES, Status


def test_status_is_its_plain_value_everywhere() -> None:
    assert f"{Status.FAILED}" == "failed"
    assert str(Status.TIMEOUT) == "timeout"
    assert f"{Status.ERROR:>7}" == "  error"
    assert json.dumps({"status": Status.CRASHED}) == '{"status": "crashed"}'
    assert Status("xfailed") is Status.XFAILED
    assert Status.PASSED == "passed"


def test_the_sets_take_stored_strings() -> None:
    assert STATUSES == (
        "passed",
        "failed",
        "error",
        "skipped",
        "xfailed",
        "xpassed",
        "crashed",
        "timeout",
    )
    assert {str(s) for s in FAILING} == {"failed", "error", "crashed", "timeout"}
    assert "failed" in FAILING and "xfailed" not in FAILING and None not in FAILING
    assert {"passed", "xpassed"} == set(PASSING)
    assert MANIFESTATIONS <= FAILING and "crashed" in MANIFESTATIONS


def test_a_record_reads_a_store_row_and_gives_it_back(tmp_path) -> None:
    from dataclasses import fields

    from instep.outcome import OutcomeRecord, records
    from instep.store import OUTCOME_FIELDS, Store

    assert tuple(f.name for f in fields(OutcomeRecord)) == OUTCOME_FIELDS
    with Store(tmp_path / "s.db") as store:
        run = store.create_run(name="r", profile="cpu", settings={"paths": ["t.py"]})
        store.set_plan(run.id, [("t.py::a", "t.py", None)])
        store.record_outcome(
            run.id, "t.py::a", "t.py", {"status": "timeout", "attempt": 1, "signature": "S"}
        )
        (row,) = store.outcome_rows(run.id)
        (record,) = store.outcome_records(run.id)
    assert record.status is Status.TIMEOUT and record.failing and record.signature == "S"
    assert record.case == "t.py::a" and record.as_dict()["status"] == "timeout"
    assert {k: v for k, v in record.as_dict().items() if v not in (None, {}, [])} == {
        k: v for k, v in row.items() if v not in (None, {}, [])
    }
    assert records([row, record]) == [record, record]
    partial = OutcomeRecord.from_row({"case": "t.py::b", "status": "passed", "extra": 1})
    assert not partial.failing and partial.evidence == {} and partial.layer is None
