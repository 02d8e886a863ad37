"""``instep report RUN --format md [--lang zh]`` (the report of one run) and the command's
one-line errors."""

from __future__ import annotations

import sys

import pytest
from tests.report.conftest import SCRIPT

SECTION_7 = "| batch | topic | cases | passed / failed | judgement |"
SECTION_7_ZH = "| 批次 | 主题 | 用例数 | 本次结果 | 当前判断 |"


def _table(text: str, header: str) -> list[list[str]]:
    lines = text.splitlines()
    start = lines.index(header)
    body = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        body.append([c.strip() for c in line.strip("|").split(" | ")])
    return body


def test_run_report_has_the_batch_table_and_the_metrics(instep, report_store):
    result = instep("report", "week2", "--db", str(report_store.db), "--format", "md")
    assert result.code == 0, result.err
    text = result.out
    assert text.startswith("# Run report: week2\n")
    assert "- previous run: week1" in text
    batches = _table(text, SECTION_7)
    by_topic = {row[1]: row for row in batches}
    fixed = next(r for t, r in by_topic.items() if "aten.bar" in t)
    assert fixed[2:] == ["1", "1 passed / 0 failed", "fixed"]
    numerics = next(r for t, r in by_topic.items() if "Tensor-likes" in t)
    assert numerics[0].startswith("B") and numerics[2:] == ["3", "0 passed / 3 failed", "open"]
    new = next(r for t, r in by_topic.items() if "CppCompileError" in t)
    assert new[3:] == ["1 failed", "new in this run"]
    sank = next(r for t, r in by_topic.items() if "aten.foo" in t)
    assert sank[4].startswith("sank") and sank[4].endswith(new[0])  # → the batch it went to
    metrics = {r[0]: r[1:] for r in _table(text, "| metric | this run | previous run |")}
    assert metrics["cases executed"] == ["11", "11"]
    assert metrics["crashes (signal)"] == ["1", "1"]
    # test text cannot become markup in a rendered report, and pipes stay in their cell
    assert SCRIPT not in text
    assert "&lt;script&gt;alert(N)&lt;/script&gt;" in text


def test_run_report_in_chinese(instep, report_store, tmp_path):
    out = tmp_path / "weekly" / "zh.md"
    result = instep(
        "report", "week2", "--db", str(report_store.db), "--format", "md", "--lang", "zh",
        "--out", str(out),
    )  # fmt: skip
    assert result.code == 0, result.err
    assert result.out.strip() == str(out)
    text = out.read_text(encoding="utf-8")
    assert text.startswith("# 运行报告：week2\n")  # one run is not a weekly summary
    assert "## 批次与阶段结果" in text
    rows = _table(text, SECTION_7_ZH)
    judgements = {r[4].split(" → ")[0] for r in rows}
    assert {"已修复", "未解决", "本次新增"} <= judgements
    metrics = {r[0]: r[1:] for r in _table(text, "| 指标 | 本次运行 | 上一次运行 |")}
    assert metrics["编译成功率"][0].endswith("%")
    assert "失败所在层 numerics" in metrics


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["report", "no-such-run", "--format", "md"], "run 'no-such-run' not found"),
        (["report", "week2"], "--out DIR is required"),
        (["report", "week2", "--out", "a-file"], "exists and is not a directory"),
        (["report", "week2", "--out", "a-file/sub"], "cannot write there"),
        (["report", "week2", "--format", "md", "--out", "."], "is a directory"),
        (["report", "week2", "--lang", "fr"], "'fr' is not one of"),
    ],
)
def test_bad_input_is_one_line_exit_2(instep, report_store, tmp_path, args, expected):
    (tmp_path / "a-file").write_text("not a directory")
    result = instep(*args, "--db", str(report_store.db))
    assert result.code == 2
    assert expected in result.err
    assert result.err.strip().count("\n") == 0
    assert "Traceback" not in result.err


def test_missing_store_is_one_line(instep, tmp_path):
    result = instep("report", "latest", "--db", str(tmp_path / "none.db"), "--format", "md")
    assert result.code == 2
    assert "does not exist" in result.err and result.err.strip().count("\n") == 0


def test_dashboard_needs_no_chart_library(instep, report_store, monkeypatch, tmp_path):
    for name in [m for m in sys.modules if m == "plotly" or m.startswith("plotly.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "plotly", None)  # import plotly -> ImportError
    result = instep("report", "week2", "--db", str(report_store.db), "--out", "out")
    assert result.code == 0, result.err
    assert "<svg" in (tmp_path / "out" / "index.html").read_text(encoding="utf-8")
    # nor does the Markdown summary
    assert instep("report", "week2", "--db", str(report_store.db), "--format", "md").code == 0
