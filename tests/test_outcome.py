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
