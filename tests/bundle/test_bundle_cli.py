"""``instep bundle`` on a real run of plain pytest cases: files, redaction, archive,
batches, errors, crash and time-out re-runs, languages."""

from __future__ import annotations

import json
import re

import pytest
from tests.bundle.conftest import (
    API_TOKEN,
    DB_PASSWORD,
    bundle_files,
    index,
    no_secret_in,
    paths_of,
    tar_files,
)

LEAK = "test_plain.py::test_leaks_credentials"


def test_secrets_never_reach_the_bundle_or_its_archive(project, tmp_path):
    result = project.bundle(LEAK, "--out", str(tmp_path / "out"), "--timeout", "60")
    assert result.code == 0, result.err
    directory, archive = paths_of(result)
    files = bundle_files(directory)
    # the secrets were really there: printed by the case, in its message, in the env
    stdout_tail = files["logs/stored_stdout_tail.txt"].decode()
    assert "token is <redacted> API_TOKEN=<redacted>" in stdout_tail
    env_dump = files["rerun/environment.txt"].decode()
    assert "API_TOKEN=<redacted>" in env_dump
    assert "DATABASE_URL=postgresql://u:<redacted>@h/db" in env_dump
    assert "token is <redacted>" in files["rerun/output.txt"].decode()
    assert "postgresql://u:<redacted>@h/db" in files["ISSUE.md"].decode()
    assert no_secret_in(files) == []
    assert no_secret_in(tar_files(archive)) == []
    assert API_TOKEN not in result.out + result.err and DB_PASSWORD not in result.err


def test_archive_holds_exactly_the_directory(project, tmp_path):
    result = project.bundle(LEAK, "--out", str(tmp_path), "--no-rerun")
    assert result.code == 0, result.err
    directory, archive = paths_of(result)
    assert archive == directory.with_name(directory.name + ".tar.gz")
    assert tar_files(archive) == bundle_files(directory)
    listed = index(directory)["files"]
    assert set(listed) | {"bundle.json"} == set(bundle_files(directory))


def test_title_sections_and_reproducer(project, tmp_path):
    result = project.bundle(LEAK, "--out", str(tmp_path), "--no-rerun")
    directory, _ = paths_of(result)
    issue = (directory / "ISSUE.md").read_text()
    title = issue.splitlines()[0]
    assert re.fullmatch(r"# \[Eager\]\[leaks_credentials\] ConnectionError: cannot reach .+", title)
    for heading in (
        "## Environment",
        "## Test",
        "## Comparison",
        "## First failing stage",
        "## Artifacts",
        "## Regression test ID",
        "## Known workaround and its performance impact",
        "## Ownership / escalation target",
    ):
        assert heading in issue
    assert "debug re-run: not run (--no-rerun)" in issue
    assert not (directory / "rerun").exists()
    command = (directory / "reproducer" / "pytest_command.sh").read_text()
    assert f"python -m pytest {project.root / 'test_plain.py'}::test_leaks_credentials" in command
    assert "-p no:cacheprovider" in command
    assert index(directory)["rerun"] is None
    assert "Stored outcome: **failed**" in issue


def test_batch_bundles_its_representative_and_lists_every_member(project, tmp_path):
    triage = project.instep("triage", "plain", "--db", str(project.db), "--format", "json")
    assert triage.code == 0, triage.err
    batches = json.loads(triage.out)["batches"]
    [batch] = [b for b in batches if len(b["cases"]) == 2]
    result = project.bundle(batch["batch"], "--out", str(tmp_path), "--no-rerun")
    assert result.code == 0, result.err
    directory, _ = paths_of(result)
    assert directory.name == f"plain__{batch['batch']}"
    data = index(directory)
    assert data["batch"] == batch["batch"]
    assert data["case"] == batch["representative"]
    rows = (directory / "cases.txt").read_text().splitlines()
    assert sorted(r.split("\t")[0] for r in rows) == sorted(batch["cases"])
    assert all("<redacted>" in r and DB_PASSWORD not in r for r in rows)
    issue = (directory / "ISSUE.md").read_text()
    assert "## Batch" in issue and f"`{batch['batch']}`" in issue
    assert "instep tier L2 --from-run plain" in issue


def test_unknown_run_case_and_batch_are_one_line_errors(project, tmp_path):
    out = str(tmp_path)
    for args, expected in (
        (
            ("test_plain.py::test_nope", "--run", "plain"),
            "case 'test_plain.py::test_nope' not found",
        ),
        (("Bdeadbeef", "--run", "plain"), "batch 'Bdeadbeef' not found in run plain"),
        ((LEAK, "--run", "nope"), "run 'nope' not found"),
    ):
        result = project.instep("bundle", *args, "--db", str(project.db), "--out", out)
        assert result.code == 2, result.err
        assert expected in result.err
        assert len(result.err.strip().splitlines()) == 1
        assert "Traceback" not in result.err
    missing_db = project.instep(
        "bundle", LEAK, "--run", "plain", "--db", str(tmp_path / "x.db"), "--out", out
    )
    assert missing_db.code == 2 and "does not exist" in missing_db.err
    assert not list(tmp_path.glob("plain__*"))


def test_a_case_named_by_a_unique_suffix(project, tmp_path):
    result = project.bundle("test_same_cause_again", "--out", str(tmp_path), "--no-rerun")
    assert result.code == 0, result.err
    assert index(paths_of(result)[0])["case"] == "test_plain.py::test_same_cause_again"


def test_a_crash_re_runs_as_a_crash_with_the_stack_dump(project, tmp_path):
    result = project.bundle(
        "test_plain.py::test_segfault", "--out", str(tmp_path), "--timeout", "60"
    )
    assert result.code == 0, result.err
    directory, _ = paths_of(result)
    rerun = json.loads((directory / "rerun" / "rerun.json").read_text())
    assert rerun["status"] == "crashed" and rerun["signal"] == "SIGSEGV"
    output = (directory / "rerun" / "output.txt").read_text()
    assert "Fatal Python error: Segmentation fault" in output  # PYTHONFAULTHANDLER
    issue = (directory / "ISSUE.md").read_text()
    assert issue.startswith("# [")
    assert "Stored outcome: **crashed**" in issue
    assert "debug re-run: crashed" in issue and "(SIGSEGV)" in issue


@pytest.mark.slow
def test_a_hang_is_stopped_at_the_time_limit_with_a_stack_dump(project, tmp_path):
    # the limit covers pytest's start-up too (a few seconds on a busy machine)
    result = project.bundle("test_plain.py::test_hangs", "--out", str(tmp_path), "--timeout", "8")
    assert result.code == 0, result.err
    directory, _ = paths_of(result)
    rerun = json.loads((directory / "rerun" / "rerun.json").read_text())
    assert rerun["status"] == "timeout"
    assert 8 <= rerun["duration"] < 40
    output = (directory / "rerun" / "output.txt").read_text()
    assert "re-run timed out after 8s" in output
    assert "signal.pause()" in output or "test_hangs" in output  # faulthandler's dump
    assert "Stored outcome: **timeout**" in (directory / "ISSUE.md").read_text()


def test_chinese_issue_and_a_rewritten_bundle(project, tmp_path):
    first = project.bundle(LEAK, "--out", str(tmp_path), "--no-rerun")
    directory, _ = paths_of(first)
    (directory / "stale.txt").write_text("from an older bundle")
    again = project.bundle(LEAK, "--out", str(tmp_path), "--no-rerun", "--lang", "zh")
    assert again.code == 0, again.err
    assert not (directory / "stale.txt").exists()
    issue = (directory / "ISSUE.md").read_text()
    for heading in (
        "## 环境",
        "## 对照",
        "## 最早失败阶段",
        "## 回归测试 ID",
        "## 责任归属 / 下沉对象",
    ):
        assert heading in issue
    foreign = tmp_path / "mine"
    (foreign / "plain__test_leaks_credentials").mkdir(parents=True)
    (foreign / "plain__test_leaks_credentials" / "notes.txt").write_text("keep me")
    refused = project.bundle(LEAK, "--out", str(foreign), "--no-rerun")
    assert refused.code == 2 and "is not an instep bundle" in refused.err
    assert (foreign / "plain__test_leaks_credentials" / "notes.txt").exists()
