"""The report's data and pages on hand-made stores: trend series, triad, artifacts, text."""

from __future__ import annotations

import re

import pytest
from tests.report.html_tables import parse
from tests.suites.store_fixture import make_run, triad_counters

from instep.errors import BadInput
from instep.report.dashboard import output_directory, write_dashboard
from instep.report.run_summary import (
    case_page_name,
    format_chain,
    summarize_run,
)
from instep.report.weekly import cell, judgement_text, run_report_markdown
from instep.store import Store

FAIL = {
    "status": "failed",
    "duration": 0.5,
    "layer": "lowering",
    "category": "lowering.missing_operator",
    "signature": "MissingOperatorWithoutDecomp: aten.x",
    "message": "MissingOperatorWithoutDecomp: aten.x",
    "exception_type": "RuntimeError",
}


def _summary(db, name, **kwargs):  # type: ignore[no-untyped-def]
    store = Store(db)
    try:
        return summarize_run(store, name, **kwargs)
    finally:
        store.close()


def test_trend_follows_runs_of_the_same_profile_and_tier_only(tmp_path):
    db = tmp_path / "s.db"
    make_run(db, "a", [("t.py::x", FAIL)])
    make_run(db, "other-profile", [("t.py::x", {"status": "passed"})], profile="npu")
    make_run(db, "other-tier", [("t.py::x", {"status": "passed"})], tier="L1")
    make_run(db, "d", [("t.py::x", {"status": "passed"})])
    make_run(db, "later", [("t.py::x", FAIL)])
    summary = _summary(db, "d")
    assert [p["run"] for p in summary.trend] == ["a", "d"]  # 'later' started after d
    assert [p["pass_rate"] for p in summary.trend] == [0.0, 1.0]
    assert summary.previous == "a"
    assert [b["judgement"] for b in summary.batches] == ["fixed"]
    assert [m["label"] for m in summary.migrations] == ["fixed"]
    short = _summary(db, "d", history=1)
    assert [p["run"] for p in short.trend] == ["d"] and short.previous is None


def test_case_page_shows_the_triad_and_links_artifacts(tmp_path):
    db = tmp_path / "s.db"
    (tmp_path / "dbg").mkdir()
    values = {
        **FAIL,
        "layer": "numerics",
        "category": "numerics.mismatch",
        "signature": "CompiledMismatch",
        "metrics": triad_counters(eager_cpu="ok", eager_device="ok", compiled_device="mismatch"),
        "artifacts": {
            "fx_graph": "dbg/fx.txt",
            "kernels": ["/tmp/k/kernel.py"],
            "odd": "javascript:alert(1)",
            "count": 3,
        },
    }
    make_run(db, "r", [("t.py::x", values), ("t.py::ok", {"status": "passed"})])
    summary = _summary(db, "r")
    written = write_dashboard(summary, tmp_path / "out")
    assert written.case_pages == 1
    html = (tmp_path / "out" / "cases" / case_page_name("t.py::x")).read_text()
    page = parse(html)
    assert page.tables["triad"] == [
        ["eager CPU", "eager device", "compiled device"],
        ["ok", "ok", "mismatch"],
    ]
    hrefs = [h for h in page.links if h.startswith("file://")]
    assert (tmp_path / "dbg" / "fx.txt").as_uri() in hrefs  # relative to the run's cwd
    assert "file:///tmp/k/kernel.py" in hrefs
    assert not any(h.startswith("javascript:") for h in page.links)
    assert "count: 3" in " ".join(html.split())
    index = parse((tmp_path / "out" / "index.html").read_text())
    assert index.tables["case-table"][1][0] == "t.py::x"


def test_a_run_without_failures(tmp_path):
    db = tmp_path / "s.db"
    make_run(db, "green", [("t.py::ok", {"status": "passed", "duration": 0.1})])
    summary = _summary(db, "green")
    assert summary.batches == [] and summary.matrix["total"] == 0
    write_dashboard(summary, tmp_path / "out")
    html = (tmp_path / "out" / "index.html").read_text()
    assert "No failures in this run." in html
    assert list((tmp_path / "out" / "cases").iterdir()) == []
    text = run_report_markdown(summary)
    assert "No failures in this run or the previous one." in text
    assert "| metric | this run |" in text and "previous run |" not in text


def test_weekly_rows_of_a_first_run(tmp_path):
    db = tmp_path / "s.db"
    make_run(db, "first", [("t.py::x", FAIL), ("t.py::y", FAIL)])
    text = run_report_markdown(_summary(db, "first"), "zh")
    row = next(line for line in text.splitlines() if re.match(r"\| B[0-9a-f]{8} ", line))
    assert row.endswith("| 2 | 2 失败 | 本次新增 |")
    assert "上一次运行: 无" in text and "配置档: cpu; 档位: -" in text


def test_chain_is_printed_root_cause_first():
    chain = [
        {"type": "ValueError", "message": "outer", "relation": None, "frames": []},
        {
            "type": "KeyError",
            "message": "'inner'",
            "relation": "cause",
            "frames": [{"file": "t.py", "line": 3, "function": "f", "module": "t"}],
        },
    ]
    text = format_chain(chain)
    assert text.index("KeyError: 'inner'") < text.index("direct cause") < text.index("outer")
    assert 'File "t.py", line 3, in f' in text


def test_markdown_cells_and_judgements():
    assert cell("a | b\nc <script>") == "a \\| b c &lt;script&gt;"
    assert judgement_text("open since week1", "zh") == "自 week1 起未解决"
    assert judgement_text("partly fixed: the rest still fails", "zh") == "部分修复：其余仍失败"
    assert judgement_text("open", "en") == "open"
    with pytest.raises(BadInput):
        run_report_markdown(None, "fr")  # type: ignore[arg-type]


def test_case_page_names_are_safe_and_distinct():
    names = {case_page_name(c) for c in ("t.py::a[x/y]", "t.py::a[x_y]", "t.py::a[x y]")}
    assert len(names) == 3
    for name in names:
        assert re.fullmatch(r"[A-Za-z0-9._-]+\.html", name)
    assert len(case_page_name("t.py::" + "x" * 5000)) < 120


def test_output_directory_refuses_a_file(tmp_path):
    (tmp_path / "f").write_text("")
    with pytest.raises(BadInput, match="not a directory"):
        output_directory(tmp_path / "f")
    assert output_directory(tmp_path / "new" / "dir").is_dir()


def test_outcome_rows_are_the_final_attempts_in_plan_order_in_one_query(tmp_path):
    from sqlalchemy import event, update

    from instep.store.schema import Outcome

    db = tmp_path / "s.db"
    make_run(db, "retried", [("t.py::a", FAIL), ("t.py::b", {"status": "passed"})])
    store = Store(db)
    try:
        run = store.get_run("retried")
        data = {"attempt": 2, "final": True, "status": "passed", "flaky": True}
        store.record_outcome(run.id, "t.py::a", "t.py", data)
        with store.session() as s:  # attempt 1 of t.py::a is no longer final
            s.execute(
                update(Outcome)
                .where(Outcome.attempt == 1, Outcome.status == "failed")
                .values(final=False)
            )
            s.commit()
        statements: list[str] = []
        listen = (store.engine, "before_cursor_execute")
        record = lambda *args: statements.append(args[2])  # noqa: E731
        event.listen(*listen, record)
        try:
            rows = store.outcome_rows(run.id)
        finally:
            event.remove(*listen, record)
        assert [(r["case"], r["attempt"], r["status"]) for r in rows] == [
            ("t.py::a", 2, "passed"),
            ("t.py::b", 1, "passed"),
        ]
        selects = [q for q in statements if q.lstrip().upper().startswith("SELECT")]
        assert len(selects) == 1  # cases come in the same query, not one query per outcome
        every = store.outcome_rows(run.id, final_only=False)
        assert [(r["case"], r["attempt"]) for r in every] == [
            ("t.py::a", 1),
            ("t.py::a", 2),
            ("t.py::b", 1),
        ]
    finally:
        store.close()


def test_a_second_report_into_the_same_directory_drops_stale_case_pages(tmp_path):
    db = tmp_path / "s.db"
    make_run(db, "one", [("t.py::x", FAIL), ("t.py::y", FAIL)])
    make_run(db, "two", [("t.py::x", FAIL), ("t.py::y", {"status": "passed"})])
    out = tmp_path / "out"
    write_dashboard(_summary(db, "one"), out)
    assert len(list((out / "cases").iterdir())) == 2
    (out / "notes.txt").write_text("mine")
    write_dashboard(_summary(db, "two"), out)
    assert [p.name for p in (out / "cases").iterdir()] == [case_page_name("t.py::x")]
    assert (out / "notes.txt").read_text() == "mine"
