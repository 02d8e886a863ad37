"""``instep report RUN --out DIR`` on a store the real runner filled (two runs)."""

from __future__ import annotations

import json
import re
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


def test_directory_is_self_contained(dashboard):
    index = _html(dashboard / "index.html")
    plotly_js = dashboard / "assets" / "plotly.min.js"
    assert plotly_js.stat().st_size > 1_000_000  # the library itself, written once
    assert "Plotly" in plotly_js.read_text(encoding="utf-8")[:20_000]
    for html in [index] + [_html(p) for p in (dashboard / "cases").iterdir()]:
        sources = re.findall(r'(?:src|href)="([^"]+)"', html)
        assert sources
        for source in sources:  # nothing from the network: relative, #anchors, file://
            assert not re.match(r"(https?:)?//", source), source
    assert '<script src="assets/plotly.min.js">' in index
    assert (dashboard / "assets" / "report.js").is_file()
    assert (dashboard / "assets" / "report.css").is_file()


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


def test_embedded_json_parses_and_holds_the_figures(dashboard):
    index = parse(_html(dashboard / "index.html"))
    figures = {
        attrs["id"]: json.loads(text)
        for attrs, text in index.scripts
        if attrs.get("type") == "application/json"
    }
    assert set(figures) == {
        "figure-trend-rates",
        "figure-trend-counts",
        "figure-statuses",
        "figure-layers",
    }
    rates = {t["name"]: t for t in figures["figure-trend-rates"]["data"]}
    assert rates["pass rate"]["x"] == ["week1", "week2"]
    # week1: 2 passed of 10 run (the skipped case left out); week2: 3 of 10
    assert rates["pass rate"]["y"] == [20.0, 30.0]
    assert "compile success rate" in rates and "semantic pass rate" in rates
    bars = figures["figure-statuses"]["data"][0]
    assert dict(zip(bars["x"], bars["y"], strict=True)) == {
        "passed": 3,
        "failed": 6,
        "crashed": 1,
        "skipped": 1,
    }


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


def test_layer_category_matrix(dashboard):
    matrix = parse(_html(dashboard / "index.html")).tables["layer-matrix"]
    header, body = matrix[0], matrix[1:]
    cells = {(r[0], header[i]): r[i] for r in body for i in range(1, len(header) - 1) if r[i]}
    assert cells[("numerics", "numerics.index_alias")] == "3"
    assert cells[("kernel_compile", "kernel_compile.cpp_compile_error")] == "1"
    assert cells[("untriaged", "crash.signal")] == "1"
    totals = {r[0]: r[-1] for r in body}
    assert sum(int(v) for v in totals.values()) == 7  # every failing outcome once


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


def test_case_page_of_a_chained_failure(dashboard):
    html = _html(dashboard / "cases" / case_page_name(CASE + "test_chained"))
    page = parse(html)
    assert "ValueError" in html and "KeyError" in html and "outer failure" in html
    frames = [r for name, t in page.tables.items() if name.startswith("frames-") for r in t]
    line = 1 + next(i for i, t in enumerate(DEMO.splitlines()) if "raise ValueError" in t)
    assert any(r[0].endswith(f"test_demo.py:{line}") and r[1] == "test_chained" for r in frames), (
        frames
    )
    triad = page.tables["triad"]
    assert triad[1] == ["not run", "not run", "not run"]
    assert "pytest&#39;s report" in html or "pytest's report" in html


def test_case_page_of_a_crash_shows_its_output(dashboard):
    html = _html(dashboard / "cases" / case_page_name(CASE + "test_crash"))
    assert "SIGSEGV" in html
    assert "Fatal Python error: Segmentation fault" in html  # the stderr tail
    numerics = _html(dashboard / "cases" / case_page_name(CASE + "test_numerics[1]"))
    assert "stderr line 1" in numerics
    assert "&#34;decided_by&#34;: &#34;rule&#34;" in numerics  # the evidence JSON
    assert "No artifact stored" in numerics
