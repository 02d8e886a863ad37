"""``instep report --weekly``: the runs of a profile and tier over a date range, and the
Chinese of the summaries and of a bundle's issue text on a real run.

The date-range tests store runs with set start times through the store API (hand-made
outcomes with exception chains); the Chinese tests run real CPU compiles
(``tests/suites/compiled_run.py``) and read what a user reads.
"""

from __future__ import annotations

import importlib.util
import re
from datetime import date, datetime

import pytest
from tests.suites.compiled_run import make_compiled_run
from tests.suites.store_fixture import make_run

from instep.report.weekly import weekly_range

#: English status words that must not appear in zh prose (data in `code` is quoted as is)
STATUS_WORDS = re.compile(
    r"\b(passed|failed|errors?|skipped|xfailed|xpassed|crashed|time-?outs?|ok|fail|mismatch)\b",
    re.IGNORECASE,
)


def _prose(markdown: str) -> str:
    """The text a reader reads as instep's own words: without code blocks and code spans."""
    text = re.sub(r"```.*?```", "", markdown, flags=re.DOTALL)
    return re.sub(r"`[^`\n]*`", "", text)


def _table(text: str, header_start: str) -> list[list[str]]:
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header_start))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip("|").split(" | ")])
    return rows


def _chain(file: str, line: int, kind: str = "RuntimeError") -> list[dict]:
    frames = [
        {"file": "/usr/lib/python3/site-packages/_pytest/python.py", "line": 166},
        {"file": file, "line": line, "function": "test", "module": "t"},
        {"file": "/usr/lib/python3/site-packages/torch/_dynamo/x.py", "line": 9},
    ]
    return [{"type": kind, "message": "m", "relation": None, "frames": frames}]


def _fail(message: str, layer: str, category: str, where: str, line: int) -> dict:
    return {
        "status": "failed",
        "layer": layer,
        "category": category,
        "signature": f"{category}: {message.splitlines()[-1]}",
        "message": message,
        "exception_chain": _chain(where, line),
    }


PASS = {"status": "passed"}
LOWERING = _fail(
    "backend='inductor' raised:\nLoweringException: no lowering for aten.foo",
    "lowering", "lowering.missing_operator", "tests/test_ops.py", 12,
)  # fmt: skip
CODEGEN = _fail("IndexError: index 3 is out of bounds", "codegen", "codegen.index", "t.py", 30)
MYSTERY = _fail("the widget frobnicated", "eager", "eager.unclassified", "tests/test_w.py", 7)


@pytest.fixture
def week(tmp_path):
    """cpu/L1 runs on 2 March (two failing batches), 4 March, 6 March (one fixed, one
    still failing, one new); and runs the summary must leave out: another profile, another
    tier, and a run a month earlier."""
    db = tmp_path / "week.db"

    def run(name, day, rows, **kw):
        started = datetime(2026, 3, day, 9, 0)
        make_run(db, name, rows, tier=kw.pop("tier", "L1"), started_at=started, **kw)

    make_run(db, "feb", [("t.py::a", MYSTERY)], tier="L1", started_at=datetime(2026, 2, 2))
    run("mon", 2, [("t.py::a", LOWERING), ("t.py::b", CODEGEN), ("t.py::c", PASS)])
    run("wed", 4, [("t.py::a", LOWERING), ("t.py::b", PASS), ("t.py::c", PASS)])
    run("fri", 6, [("t.py::a", LOWERING), ("t.py::b", PASS), ("t.py::c", MYSTERY)])
    run("npu", 5, [("t.py::a", PASS)], profile="npu")
    run("other-tier", 5, [("t.py::a", PASS)], tier="L2")
    (tmp_path / "instep.toml").write_text('[owners]\nlowering = "Li Lei (npu_inductor)"\n')
    return db


def _weekly(instep, db, *extra):
    result = instep(
        "report", "--weekly", "--db", str(db), "--since", "2026-03-01", "--until", "2026-03-07",
        *extra,
    )  # fmt: skip
    assert result.code == 0, result.err
    return result.out


def test_the_weekly_summary_covers_the_runs_of_the_range(instep, week):
    text = _weekly(instep, week, "--profile", "cpu", "--tier", "L1")
    assert text.startswith("# Weekly summary: profile cpu, tier L1, 2026-03-01 to 2026-03-07\n")
    trend = _table(text, "| run | date |")
    assert [(r[0], r[1]) for r in trend] == [
        ("mon", "2026-03-02"), ("wed", "2026-03-04"), ("fri", "2026-03-06"),
    ]  # fmt: skip
    # passed, pass rate, failures: b fixed on Wednesday, c newly failing on Friday
    assert [r[3:6] for r in trend] == [
        ["1", "33.3%", "2"],
        ["2", "66.7%", "1"],
        ["1", "33.3%", "2"],
    ]
    assert [r[6] for r in trend] == ["0", "0", "1"]  # unclassified: the mystery on Friday
    layers = {r[0]: r[1:] for r in _table(text, "| layer | mon |")}
    assert layers == {
        "eager": ["0", "0", "1"],
        "lowering": ["1", "1", "1"],
        "codegen": ["1", "0", "0"],
    }
    for absent in ("feb", "npu", "other-tier"):
        assert f"| {absent} |" not in text


def test_first_against_last_run_new_fixed_and_still_failing(instep, week):
    text = _weekly(instep, week)  # profile and tier: those of the range's last run
    assert "profile cpu, tier L1" in text
    assert "- cases: 1 newly failing, 1 fixed, 1 still failing, 0 failing differently" in text
    changes = {r[1]: r[3] for r in _table(text, "| batch | layer | topic | state |")}
    assert changes == {"eager": "new", "lowering": "still failing", "codegen": "fixed"}


def test_to_do_lists_failing_batches_with_file_line_and_owner(instep, week):
    text = _weekly(instep, week)
    todo = _table(text, "| batch | layer | first error |")
    assert [r[1] for r in todo] == ["eager", "lowering"]  # new first, then still failing
    new, still = todo
    assert new[2:] == ["`RuntimeError: the widget frobnicated`", "`tests/test_w.py:7`", "1",
                       "new", "unassigned"]  # fmt: skip
    # the wrapper line "backend='inductor' raised:" is skipped; the user's frame, not torch's
    assert still[2:] == ["`LoweringException: no lowering for aten.foo`", "`tests/test_ops.py:12`",
                         "1", "still failing", "Li Lei (npu_inductor)"]  # fmt: skip


def test_the_default_range_is_the_last_seven_days():
    assert weekly_range(None, None, today=date(2026, 3, 7)) == (date(2026, 3, 1), date(2026, 3, 7))
    assert weekly_range(date(2026, 3, 3), date(2026, 3, 3)) == (date(2026, 3, 3), date(2026, 3, 3))


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--weekly", "--since", "2026-03-08", "--until", "2026-03-01"], "after --until"),
        (["--weekly", "--since", "March"], "does not match the format"),
        (["--weekly", "week2"], "covers a date range"),
        (["latest", "--since", "2026-03-01", "--format", "md"], "only with --weekly"),
    ],
)
def test_bad_weekly_options_are_one_line(instep, week, args, expected):
    result = instep("report", *args, "--db", str(week))
    assert result.code == 2 and expected in result.err, result.err
    assert result.err.strip().count("\n") == 0 and "Traceback" not in result.err


def test_a_range_without_runs_says_so(instep, week):
    result = instep("report", "--weekly", "--db", str(week), "--since", "2025-01-01",
                    "--until", "2025-01-07", "--lang", "zh")  # fmt: skip
    assert result.code == 0, result.err
    assert "该时间段内没有运行。" in result.out


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch not installed")
def test_no_english_status_word_in_zh_output_of_a_real_run(tmp_path_factory):
    run = make_compiled_run(tmp_path_factory.mktemp("zh-run"))
    today = datetime.now().date().isoformat()  # the run started now
    weekly = run.instep("report", "--weekly", "--lang", "zh", "--until", today)
    report = run.instep("report", "latest", "--format", "md", "--lang", "zh")
    out = run.work / "bundle"
    run.instep(
        "bundle", "test_compiled.py::test_backend_fails_to_compile", "--run", run.name,
        "--no-rerun", "--lang", "zh", "--out", str(out),
    )  # fmt: skip
    issue = next(out.rglob("ISSUE.md")).read_text(encoding="utf-8")
    assert "## 需处理" in weekly and "未指派" in weekly and "test_compiled.py:" in weekly
    assert "失败" in report and "## 最早失败阶段" in issue
    for name, text in (("weekly", weekly), ("run report", report), ("ISSUE.md", issue)):
        # known exception: the issue title is the case's own error, quoted as the template says
        body = text.split("\n", 1)[1]
        assert STATUS_WORDS.findall(_prose(body)) == [], name
