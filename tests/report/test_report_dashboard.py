"""``instep report RUN --out DIR`` on a store the real runner filled (two runs)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from tests.report.conftest import DEMO, SCRIPT
from tests.report.html_tables import parse, rows

from instep.cli import run as cli_run
from instep.report.dashboard import script_json
from instep.report.run_summary import case_page_name, summarize_run
from instep.store import Store

CASE = "test_demo.py::"


@pytest.fixture(scope="module")
def dashboard(report_store, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dashboard") / "report"
    code = cli_run(["report", "week2", "--db", str(report_store.db), "--out", str(out)])
    assert code == 0
    return out


def _html(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def test_cli_prints_the_index_path(instep, report_store, tmp_path):
    result = instep("report", "week2", "--db", str(report_store.db), "--out", "r")
    assert result.code == 0, result.err
    assert result.out.strip() == str(Path("r") / "index.html")
    assert (tmp_path / "r" / "index.html").is_file()


def test_directory_is_self_contained_and_light(dashboard):
    index = _html(dashboard / "index.html")
    for html in [index] + [_html(p) for p in (dashboard / "cases").iterdir()]:
        sources = re.findall(r'(?:src|href)="([^"]+)"', html)
        assert sources
        for source in sources:  # nothing from the network: relative, #anchors, file://
            assert not re.match(r"(https?:)?//", source), source
    scripts = re.findall(r"<script[^>]*>", index)
    assert scripts == ['<script src="assets/report.js">']  # no chart library
    assert sorted(p.name for p in (dashboard / "assets").iterdir()) == ["report.css", "report.js"]
    size = sum(p.stat().st_size for p in dashboard.rglob("*") if p.is_file())
    assert size < 1_000_000, size  # 11 cases, 8 case pages


def test_every_non_passing_case_has_a_page_linked_from_the_index(dashboard, report_store):
    index = parse(_html(dashboard / "index.html"))
    table = index.tables["case-table"][1:]
    statuses = {r[0]: r[1] for r in table}
    assert statuses[CASE + "test_ok"] == "passed"
    assert statuses[CASE + "test_crash"] == "crashed"
    assert statuses[CASE + "test_skipped"] == "skipped"
    assert statuses[CASE + "test_fixed_later"] == "passed"
    pages = {p.name for p in (dashboard / "cases").iterdir()}
    expected = {case_page_name(c) for c, s in statuses.items() if s != "passed"}
    assert pages == expected
    assert len(pages) == 8  # 6 failed, 1 crashed, 1 skipped
    for name in pages:
        assert f"cases/{name}" in index.links


def test_test_text_is_escaped_everywhere(dashboard):
    pages = [dashboard / "index.html", *(dashboard / "cases").iterdir()]
    escaped = SCRIPT.replace("<", "&lt;").replace(">", "&gt;")
    seen = 0
    for path in pages:
        html = _html(path)
        assert SCRIPT not in html, path
        assert "<img src=x" not in html and "<b>bold</b>" not in html, path
        seen += escaped in html
        # every <script> element is one the template opened: nothing broke out
        assert html.count("<script") == html.count("</script>"), path
    assert seen >= 2  # the index's table and the case's own page at least
    page = _html(dashboard / "cases" / case_page_name(CASE + "test_script_message"))
    assert "&lt;img src=x onerror=alert(2)&gt;" in page  # the captured stdout
    index = _html(dashboard / "index.html")
    assert "test_param[&lt;b&gt;bold&lt;/b&gt;]" in index


def _svg_charts(html: str) -> dict[str, str]:
    return dict(re.findall(r'<figure class="chart" id="chart-([\w-]+)">(.*?)</figure>', html, re.S))


def test_trend_charts_are_inline_svg_with_integer_count_axes(dashboard):
    charts = _svg_charts(_html(dashboard / "index.html"))
    assert set(charts) == {"trend-rates", "trend-counts"}
    rates = charts["trend-rates"]
    line = re.search(r'data-series="pass rate"[^>]*points="([^"]+)"', rates)
    assert line and len(line.group(1).split()) == 2  # week1, week2
    # week1: 2 passed of 10 run (the skipped case left out); week2: 3 of 10
    assert "pass rate, week1: 20 %" in rates and "pass rate, week2: 30 %" in rates
    counts = charts["trend-counts"]
    ticks = re.findall(r'<text class="tick"[^>]*text-anchor="end">([^<]+)</text>', counts)
    assert ticks and all(t.isdigit() for t in ticks), ticks  # counts: whole numbers only
    assert "failures, week2: 7" in counts


def test_one_run_draws_no_trend(report_store, tmp_path):
    out = tmp_path / "first"
    assert cli_run(["report", "week1", "--db", str(report_store.db), "--out", str(out)]) == 0
    html = _html(out / "index.html")
    assert _svg_charts(html) == {}
    assert "Trends appear from the second run" in html
    assert "trend-table" not in html


def test_script_json_cannot_end_its_element():
    value = {"m": "</script><script>alert(1)</script><!-- & >"}
    text = str(script_json(value))
    assert "<" not in text and ">" not in text and "&" not in text
    assert json.loads(text) == value


def test_header_version_matrix_and_metrics(dashboard):
    html = _html(dashboard / "index.html")
    versions = {r[0]: r[1] for r in parse(html).tables["version-matrix"]}  # no header row
    assert versions["python"].count(".") == 2
    assert "torch" in versions
    metrics = {r[0]: r[1:] for r in rows(html, "metrics-table")}
    assert metrics["cases collected"] == ["11", "11"]
    assert metrics["failures at kernel_compile"] == ["1", "-"]
    trend = rows(html, "trend-table")
    assert [r[0] for r in trend] == ["week1", "week2"]
    assert [r[4] for r in trend] == ["2", "3"]  # passed


def test_failures_by_layer_are_rows(dashboard):
    table = {r[0]: r[1:] for r in rows(_html(dashboard / "index.html"), "layer-table")}
    assert list(table) == ["eager", "kernel_compile", "numerics", "untriaged"]  # pipeline order
    assert table["numerics"] == ["3", "numerics.index_alias (3)"]
    assert table["kernel_compile"] == ["1", "kernel_compile.cpp_compile_error (1)"]
    assert table["untriaged"] == ["1", "crash.signal (1)"]
    assert sum(int(r[0]) for r in table.values()) == 7  # every failing outcome once


def test_failing_now_opens_the_page(dashboard, report_store):
    html = _html(dashboard / "index.html")
    assert html.index('id="failing-now-table"') < html.index('id="run"')  # metadata after
    assert re.search(r'<details id="run"[^>]*>\s*<summary>', html)  # and folded
    table = rows(html, "failing-now-table")
    by_error = {r[3]: r for r in table}
    states = [r[0] for r in table]
    assert states == ["new"] + ["still failing"] * 4 + ["changed", "fixed"]
    new = by_error["CppCompileError: C++ compile error in the kernel"]
    assert new[2] == "kernel_compile"
    line = 1 + next(i for i, t in enumerate(DEMO.splitlines()) if "CppCompileError" in t)
    assert new[4] == f"test_demo.py:{line}"
    chained = by_error["outer failure"]
    assert chained[5] == "python -m pytest test_demo.py::test_chained"
    crash = next(r for r in table if "SIGSEGV" in r[3])
    line = 1 + next(i for i, t in enumerate(DEMO.splitlines()) if "string_at" in t)
    assert crash[4] == f"test_demo.py:{line}"  # the test's line, not ctypes' own
    moved = next(r for r in table if r[0] == "changed")
    assert "aten.foo" in moved[3] and f"now in {new[1].split()[0]}" in moved[3]
    assert next(r for r in table if r[0] == "fixed")[5] == "fixed"


def test_the_reproduce_command_reproduces(dashboard, report_store):
    html = _html(dashboard / "index.html")
    command = next(r[5] for r in rows(html, "failing-now-table") if r[3] == "outer failure")
    where = re.search(r'<code id="reproduce-dir">([^<]+)</code>', html)
    assert where and Path(where.group(1)) == report_store.work  # named once, above the rows
    (report_store.work / "phase.txt").write_text("2")
    proc = subprocess.run(
        ["bash", "-c", command], cwd=where.group(1), capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 1, proc.stdout
    assert "ValueError: outer failure" in proc.stdout


def test_batches_are_judged_against_the_previous_run(dashboard):
    table = rows(_html(dashboard / "index.html"), "batch-table")
    by_signature = {r[3]: r for r in table}
    numerics = next(r for s, r in by_signature.items() if "Tensor-likes" in s)
    assert numerics[4] == "3" and numerics[5] == "0 passed / 3 failed"
    assert numerics[6] == "open"
    assert "AssertionError: Tensor-likes are not close" in numerics[7]  # the traceback
    fixed = next(r for s, r in by_signature.items() if "aten.bar" in s)
    assert (fixed[5], fixed[6]) == ("1 passed / 0 failed", "fixed")
    moved = next(r for s, r in by_signature.items() if "aten.foo" in s)
    assert moved[6].startswith("sank")
    new = next(r for s, r in by_signature.items() if "CppCompileError" in s)
    assert new[6] == "new in this run"


def test_migration_chains(dashboard):
    table = {r[0]: r for r in rows(_html(dashboard / "index.html"), "migration-table")}
    assert set(table) == {CASE + "test_moves", CASE + "test_fixed_later"}
    moves = table[CASE + "test_moves"]
    assert moves[1] == "deeper"
    assert "[lowering]" in moves[2] and "[kernel_compile]" in moves[2]
    assert moves[2].index("week1") < moves[2].index("week2")
    assert table[CASE + "test_fixed_later"][1] == "fixed"


def test_case_rows_carry_the_filter_data(dashboard, report_store):
    collector = parse(_html(dashboard / "index.html"))
    table, row_attrs = collector.tables["case-table"], collector.row_attrs["case-table"]
    attrs = {r[0]: a for r, a in zip(table, row_attrs, strict=True) if "data-status" in a}
    store = Store(report_store.db)
    try:
        summary = summarize_run(store, "week2")
    finally:
        store.close()
    batch_of = {c: b["batch"] for b in summary.batches if b["in_run"] for c in b["cases"]}
    for row in summary.cases:
        a = attrs[row["case"]]
        assert a["data-status"] == row["status"]
        assert a["data-batch"] == batch_of.get(row["case"], "")
    crash = attrs[CASE + "test_crash"]
    assert (crash["data-layer"], crash["data-category"]) == ("untriaged", "crash.signal")
    assert attrs[CASE + "test_ok"]["data-layer"] == ""
    assert SCRIPT.lower() in attrs[CASE + "test_script_message"]["data-search"]
    # every value a row can have is offered by the matching filter
    html = _html(dashboard / "index.html")
    for name in ("status", "layer", "category", "batch"):
        select = re.search(rf'<select id="f-{name}">(.*?)</select>', html, re.S)
        assert select
        options = set(re.findall(r'<option value="([^"]*)"', select.group(1)))
        assert {a[f"data-{name}"] for a in attrs.values()} <= options, name


def test_case_page_of_a_chained_failure(dashboard, report_store):
    html = _html(dashboard / "cases" / case_page_name(CASE + "test_chained"))
    page = parse(html)
    before_report = html.split('id="longrepr"')[0]  # pytest's own report is folded below
    assert before_report.count("outer failure") == 1  # the error once
    cause = re.search(r'<details class="cause"><summary>(.*?)</summary>', html, re.S)
    assert cause and "caused by" in cause.group(1) and "KeyError" in cause.group(1)
    user = page.tables["frames-1"]  # the user's frames, before any of pytest's
    line = 1 + next(i for i, t in enumerate(DEMO.splitlines()) if "raise ValueError" in t)
    assert user[1][:2] == [f"{report_store.work}/test_demo.py:{line}", "test_chained"]
    assert all("site-packages" not in r[0] for r in user[1:])
    facts = dict(page.tables["reproduce"])
    root = 1 + next(i for i, t in enumerate(DEMO.splitlines()) if "raise KeyError" in t)
    assert facts["where (your code)"] == f"test_demo.py:{root}"  # nearest the root cause
    assert facts["reproduce"].endswith("python -m pytest test_demo.py::test_chained")
    triad = page.tables["triad"]
    assert triad[1] == [
        "no leg recorded: this test does not run the triad (only instep's built-in suites"
        " record the three legs)"
    ]
    assert "pytest&#39;s report" in html or "pytest's report" in html


def test_case_page_of_a_crash_shows_its_output(dashboard):
    html = _html(dashboard / "cases" / case_page_name(CASE + "test_crash"))
    assert "SIGSEGV" in html
    assert "Fatal Python error: Segmentation fault" in html  # the stderr tail
    assert "no leg recorded: the case ended (crashed, layer untriaged)" in html
    numerics = _html(dashboard / "cases" / case_page_name(CASE + "test_numerics[1]"))
    assert "stderr line 1" in numerics
    fields = dict(parse(numerics).tables["evidence-fields"])  # fields, not a JSON dump
    assert fields["triage.decided_by"] == "rule"
    evidence = numerics[numerics.index('id="evidence"') :]
    assert "\\n" not in evidence and "{&#34;" not in evidence
    assert "No artifact stored" in numerics


def test_no_internal_references_in_pages(dashboard):
    for path in [dashboard / "index.html", *(dashboard / "cases").iterdir()]:
        assert not re.search(r"seed \d|seed 000|section \d", _html(path)), path
