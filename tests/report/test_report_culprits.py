"""The dashboard of a run triaged with ``--impact``: case -> upstream unit -> coupling.

Real inputs, as a user makes them: the real upstream git history of
``tests/triage/culprit_fixture.py`` (four commits that each break one downstream test),
``instep impact`` in commit mode, ``instep run --impact`` against the new upstream and
``instep triage --impact``; then ``instep report``. Each Failing-now row names its
batch's culprit, and each case page its units with PR, confidence, evidence and coupling,
and the unit that selected its test file.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from tests.report.html_tables import parse, rows
from tests.triage.culprit_fixture import (
    EXPECTED,
    build_downstream,
    build_upstream,
    checkout,
    without_shipped_suites,
)

from instep.cli import run as cli_run
from instep.report.run_summary import case_page_name


@pytest.fixture(scope="module")
def triaged(tmp_path_factory):
    """(report directory, impact JSON) of a run triaged with --impact."""
    root = tmp_path_factory.mktemp("culprit-report")
    up = build_upstream(root / "pytorch")
    build_downstream(root / "down")
    checkout(up, "v2", root / "v2")
    impact = root / "impact.json"
    args = ["impact", "--upstream-git", str(up.path), "--range", "v1..v2", "--no-cache"]
    args += ["--downstream", str(root / "down"), "--format", "json", "--out", str(impact)]
    assert cli_run(args) == 0
    without_shipped_suites(impact)
    db = str(root / "store.db")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root / "v2"), str(root / "down")])}
    run = [sys.executable, "-m", "instep", "run", "--profile", "cpu", "-n", "1"]
    run += ["--preimport", "none", "--run", "loop", "--db", db, "--impact", str(impact)]
    ran = subprocess.run(
        run, cwd=root / "down", env=env, capture_output=True, text=True, timeout=300
    )
    assert ran.returncode == 1, ran.stdout + ran.stderr
    assert cli_run(["triage", "loop", "--impact", str(impact), "--db", db]) == 0
    out = root / "report"
    assert cli_run(["report", "loop", "--db", db, "--out", str(out)]) == 0
    return out, json.loads(impact.read_text())


def test_failing_now_names_each_batch_culprit(triaged):
    out, _ = triaged
    html = (out / "index.html").read_text(encoding="utf-8")
    table = parse(html).tables["failing-now-table"]
    assert table[0][-1] == "likely upstream cause"
    culprits = [r[-1] for r in table[1:]]
    named = sorted(int(m) for r in culprits for m in re.findall(r"#(\d+)", r))
    assert named == sorted(EXPECTED.values())  # each batch its own PR, none twice
    assert all(r.endswith("high, 1/1") for r in culprits), culprits


def test_case_page_links_case_to_unit_and_coupling(triaged):
    out, impact = triaged
    case = "tests/test_lowering.py::test_expand_lowering"
    html = (out / "cases" / case_page_name(case)).read_text(encoding="utf-8")
    [first, *_] = rows(html, "culprit-table")
    unit = next(u for u in impact["units"] if u.get("pr") == 201)
    assert "#201" in first[0] and f"({unit['id']})" in first[0]
    assert first[2].startswith("high (")
    assert "frame" in first[3] or "named" in first[3]  # the evidence that tied it
    assert first[4] == (
        "registration: npu_like/lowering.py:8 → torch/_inductor/lowering.py::expand"
    )
    selected = parse(html)
    text = " ".join(re.sub(r"<[^>]+>", "", html).split())
    assert f"selected by impact unit {unit['id']}" in text  # by run --impact
    assert "culprits" not in dict(selected.tables["evidence-fields"])  # shown once, above
