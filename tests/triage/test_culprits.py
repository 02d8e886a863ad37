"""Failures traced to the upstream change that caused them (instep.triage.culprits).

End to end on real inputs: a real upstream git history (culprit_fixture: five commits, four
of which each break one downstream test), ``instep impact`` in commit mode, the
downstream's tests run by ``instep run`` against the old and the new upstream (real
failures with real chains), then each failure attributed from the stored outcome.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

import instep
from instep.cli import run as cli_run
from instep.errors import BadInput, MissingInput
from instep.impact_contract import Action, read_report
from instep.outcome import FAILING
from instep.store import Store, outcome_dict
from instep.triage.culprits import CulpritIndex

from .culprit_fixture import (
    EXPECTED,
    build_downstream,
    build_upstream,
    checkout,
    without_shipped_suites,
)


@pytest.fixture(scope="module")
def loop(tmp_path_factory):
    """(root, impact report path): upstream v1/v2 checkouts, downstream, impact JSON."""
    root = tmp_path_factory.mktemp("loop")
    up = build_upstream(root / "pytorch")
    build_downstream(root / "down")
    checkout(up, "v1", root / "v1")
    checkout(up, "v2", root / "v2")
    report = root / "impact.json"
    args = ["impact", "--upstream-git", str(up.path), "--range", "v1..v2"]
    args += ["--downstream", str(root / "down"), "--format", "json", "--out", str(report)]
    assert cli_run([*args, "--no-cache"]) == 0
    without_shipped_suites(report)
    old = run_downstream(root, "v1", "before", "tests")
    assert old.returncode == 0, old.stdout + old.stderr  # the downstream fits v1
    new = run_downstream(root, "v2", "after", "tests")
    assert new.returncode == 1, new.stdout + new.stderr
    return root, report


def run_downstream(
    root: Path, upstream: str, name: str, *extra: str
) -> subprocess.CompletedProcess:
    """``instep run`` of the downstream's tests with ``upstream`` (v1/v2) importable as torch."""
    # the instep under test comes last: the upstream's torch and the downstream come first
    paths = [str(root / upstream), str(root / "down"), str(Path(instep.__file__).parents[1])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    cmd = [sys.executable, "-m", "instep", "run", "--profile", "cpu", "-n", "1"]
    cmd += ["--preimport", "none", "--run", name, "--db", str(root / "store.db"), *extra]
    return subprocess.run(
        cmd, cwd=root / "down", env=env, capture_output=True, text=True, timeout=300
    )


def failures(root: Path, name: str) -> list[dict]:
    with Store(str(root / "store.db")) as store:
        run = store.get_run(name)
        rows = [outcome_dict(o) for o in store.outcomes(run.id)]
    return [r for r in rows if r["status"] in FAILING]


def test_each_failure_is_attributed_to_the_commit_that_caused_it(loop):
    root, report_path = loop
    failed = failures(root, "after")
    assert {f["case"] for f in failed} == set(EXPECTED)

    report = CulpritIndex.load(report_path)
    prs = {str(u["id"]): u["pr"] for u in json.loads(report_path.read_text())["units"]}
    for failure in failed:
        ranked = report.attribute(failure)
        assert ranked, failure["case"]
        first = ranked[0]
        assert first.pr == EXPECTED[failure["case"]], (
            failure["case"],
            [a.one_line() for a in ranked],
        )
        assert prs[first.unit] == first.pr
        assert first.confidence == "high", first.one_line()
        assert first.coupling is not None and first.coupling.downstream.startswith("npu_like/")
        # the unrelated commit (#205) is never named, whatever it shares with the failure
        assert all(a.pr != 205 for a in ranked), [a.one_line() for a in ranked]


def test_the_evidence_says_why(loop):
    root, report_path = loop
    report = CulpritIndex.load(report_path)
    by_case = {f["case"]: f for f in failures(root, "after")}
    hints = report.attribute(by_case["tests/test_hints.py"])[0]
    kinds = {e.kind: e.detail for e in hints.evidence}
    assert kinds["place"] == "coupled line npu_like/hints.py:2 is on the chain"
    assert "cannot import get_device_tflops from torch._inductor.utils" in kinds["import"]
    expand = report.attribute(by_case["tests/test_lowering.py::test_expand_lowering"])[0]
    assert "npu_expand()" in {e.kind: e.detail for e in expand.evidence}["named"]
    assert expand.as_dict()["coupling"]["kind"] == "registration"


def test_a_failure_that_no_change_explains_gets_no_culprit(loop):
    root, report_path = loop
    report = CulpritIndex.load(report_path)
    unrelated = {
        "case": "tests/test_other.py::test_x",
        "status": "failed",
        "layer": "lowering",
        "message": "AssertionError: 3 != 4",
        "exception_chain": [
            {
                "type": "AssertionError",
                "message": "3 != 4",
                "frames": [
                    {
                        "file": str(root / "down/tests/test_other.py"),
                        "function": "test_x",
                        "line": 3,
                    }
                ],
            }
        ],
    }
    assert report.attribute(unrelated) == []


def test_bad_reports_are_one_line_errors(tmp_path):
    with pytest.raises(MissingInput, match="no such file"):
        CulpritIndex.load(tmp_path / "absent.json")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(BadInput, match="not JSON"):
        CulpritIndex.load(tmp_path / "bad.json")
    (tmp_path / "other.json").write_text(json.dumps({"runs": []}))
    with pytest.raises(BadInput, match="no 'units' list"):
        CulpritIndex.load(tmp_path / "other.json")


def test_the_loop_in_three_commands(loop):
    """`instep run --impact` runs the tests the report suggests for its Shim units and
    records which unit chose each file; `instep triage --impact` names, per batch, the
    commit behind it and stores each case's culprits."""
    root, report_path = loop
    ran = run_downstream(root, "v2", "loop", "--impact", str(report_path), "--action", "Shim")
    assert ran.returncode == 1, ran.stdout + ran.stderr
    assert "--impact: 4 test files for 4 units" in ran.stderr
    with Store(str(root / "store.db")) as store:
        run = store.get_run("loop")
        cases = {o.case for o in store.outcome_records(run.id)}
        chose = run.settings["impact"]["units_of"]
    assert cases == set(EXPECTED)  # test_add.py is coupled to no Shim unit: not run
    prs = {u["id"]: u["pr"] for u in json.loads(report_path.read_text())["units"]}
    assert {f: [prs[u] for u in us] for f, us in chose.items()} == {
        case.split("::")[0]: [pr] for case, pr in EXPECTED.items()
    }

    env = {**os.environ, "COLUMNS": "250"}
    cmd = [sys.executable, "-m", "instep", "triage", "loop", "--impact", str(report_path)]
    cmd += ["--db", str(root / "store.db")]
    shown = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=root, timeout=120)
    assert shown.returncode == 0, shown.stderr
    assert "likely upstream causes" in shown.stdout
    for pr in EXPECTED.values():
        assert f"(#{pr}) (" in shown.stdout
    data = json.loads(
        subprocess.run([*cmd, "--format", "json"], env=env, capture_output=True, text=True).stdout
    )
    for batch in data["batches"]:
        [case] = batch["cases"]
        assert batch["culprit"]["pr"] == EXPECTED[case]
        assert batch["culprit"]["cases"] == 1 and batch["culprit"]["confidence"] == "high"
    with Store(str(root / "store.db")) as store:
        stored = {o.case: o.evidence["culprits"] for o in store.outcome_records(run.id)}
    assert {c: v[0]["pr"] for c, v in stored.items()} == EXPECTED

    # the evidence bundle's issue text names the culprit with its PR number
    case = "tests/test_lowering.py::test_expand_lowering"
    bundle = [sys.executable, "-m", "instep", "bundle", case, "--run", "loop", "--no-rerun"]
    bundle += ["--out", str(root / "bundles"), "--db", str(root / "store.db")]
    made = subprocess.run(bundle, env=env, capture_output=True, text=True, cwd=root, timeout=300)
    assert made.returncode == 0, made.stderr
    [issue] = (root / "bundles").glob("*/ISSUE.md")
    text = issue.read_text(encoding="utf-8")
    section = text.split("## Likely upstream cause", 1)[1].split("\n## ", 1)[0]
    assert "PR #201: [inductor] expand lowering takes implicit" in section
    assert (
        "registration `torch/_inductor/lowering.py::expand` -> `npu_like/lowering.py:8`" in section
    )


def test_run_impact_bad_input(loop, tmp_path):
    root, report_path = loop
    ran = run_downstream(root, "v2", "bad", "--impact", str(tmp_path / "none.json"))
    assert ran.returncode == 2 and "no such file" in ran.stderr
    assert "Traceback" not in ran.stderr
    ran = run_downstream(root, "v2", "bad", "--impact", str(report_path), "--action", "Maybe")
    assert ran.returncode == 2 and "expected actions from Shim, Test, Check" in ran.stderr


def test_the_indexed_report_is_cached_by_its_content(loop, tmp_path):
    """One SQLite index per report content; a report's path, size and time lead to it
    (an alias), except while the report is too new for its time to be trusted."""
    root, report_path = loop
    cache = tmp_path / "culprits"
    failure = {f["case"]: f for f in failures(root, "after")}["tests/test_hints.py"]
    report = tmp_path / "impact.json"
    report.write_bytes(report_path.read_bytes())
    first = CulpritIndex.load(report, cache).attribute(failure)[0]
    assert len(list(cache.glob("*.sqlite"))) == 1
    assert not list(cache.glob("*.alias"))  # written just now: hashed until it is older
    hour_ago = time.time_ns() - 3600 * 10**9
    os.utime(report, ns=(hour_ago, hour_ago))
    again = CulpritIndex.load(report, cache).attribute(failure)[0]
    assert again.as_dict() == first.as_dict()
    assert len(list(cache.glob("*.alias"))) == 1
    assert CulpritIndex.load(report, cache).attribute(failure)[0].as_dict() == first.as_dict()
    copy = tmp_path / "copy.json"  # the same content elsewhere finds the same index
    shutil.copy(report, copy)
    os.utime(copy, ns=(hour_ago, hour_ago))
    assert CulpritIndex.load(copy, cache).attribute(failure)[0].as_dict() == first.as_dict()
    assert len(list(cache.glob("*.sqlite"))) == 1
    assert len(list(cache.glob("*.alias"))) == 2
    doc = json.loads(report_path.read_text())  # rewritten in place: its own index
    for unit in doc["units"]:
        unit["pr"] = 9000 + unit["pr"]
    report.write_text(json.dumps(doc))
    os.utime(report, ns=(hour_ago + 10**9, hour_ago + 10**9))
    assert CulpritIndex.load(report, cache).attribute(failure)[0].pr == 9203
    assert len(list(cache.glob("*.sqlite"))) == 2
    assert CulpritIndex.load(copy, cache).attribute(failure)[0].pr == 203


def test_upstream_tests_that_import_a_changed_module_are_selected(loop, tmp_path):
    """`--upstream-tests DIR`: the upstream test modules importing a changed module run,
    narrowed to the test functions naming a changed symbol; others are left out."""
    from instep.suites.impact_selection import select_tests

    _, report_path = loop
    tests = tmp_path / "pytorch" / "test" / "inductor"
    tests.mkdir(parents=True)
    (tests / "test_utils.py").write_text(
        "from torch._inductor import utils\n\n\n"
        "def test_tflops():\n    assert utils.get_device_tflops\n\n\n"
        "def test_other():\n    assert utils\n"
    )
    (tests / "test_unrelated.py").write_text("import os\n\n\ndef test_x():\n    assert os\n")
    doc = read_report(report_path)
    hints = next(u for u in doc.units if u.pr == 203)
    hints = replace(hints, suggested_tests=())  # only the upstream tree can supply its tests
    doc = replace(doc, units=(hints,))
    selection = select_tests(doc, (Action.SHIM,), upstream_tests=tmp_path / "pytorch", cwd=tmp_path)
    assert selection.paths == ["pytorch/test/inductor/test_utils.py"]
    assert selection.units_of == {"pytorch/test/inductor/test_utils.py": [hints.id]}
    assert selection.keyword == "test_tflops"


def _triage(root: Path, *args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "instep", "triage", *args, "--db", str(root / "store.db")]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=root, timeout=300)


def test_upstream_old_computes_the_impact_against_the_torch_the_run_used(loop, tmp_path):
    """`triage RUN --upstream-old X`: the impact from X to the torch the run imported (its
    version matrix says where), attributed exactly as `--impact` with that report."""
    root, report_path = loop
    ran = run_downstream(root, "v2", "up-old", "tests")
    assert ran.returncode == 1, ran.stdout + ran.stderr
    with Store(str(root / "store.db")) as store:
        matrix = store.get_run("up-old").version_matrix
    assert Path(matrix["torch_dir"]) == root / "v2" / "torch"
    release = tmp_path / "release.json"  # the same two sides, made by instep impact
    args = ["impact", "--upstream-old", str(root / "v1"), "--upstream-new", str(root / "v2")]
    args += ["--downstream", str(root / "down"), "--format", "json", "--out", str(release)]
    assert cli_run([*args, "--no-cache"]) == 0
    given = _triage(root, "up-old", "--impact", str(release), "--format", "json")
    assert given.returncode == 0, given.stderr
    old = ["--upstream-old", str(root / "v1"), "--downstream", str(root / "down")]
    computed = _triage(root, "up-old", *old, "--format", "json")
    assert computed.returncode == 0, computed.stderr
    culprits = json.loads(computed.stdout)["culprits"]
    assert culprits == json.loads(given.stdout)["culprits"]
    assert set(culprits) == set(EXPECTED)
    # each first culprit is the change the commit-mode report ties the failure to
    by_commit = CulpritIndex.load(report_path)
    for failure in failures(root, "up-old"):
        first = by_commit.attribute(failure)[0]
        assert culprits[failure["case"]][0]["coupling"] == first.as_dict()["coupling"]
    table = _triage(root, "up-old", *old)
    assert f"likely upstream causes (from {root / 'v1'} -> " in table.stdout

    # the cpu profile names no backend package: the run does not say what was tested
    bad = _triage(root, "up-old", "--upstream-old", str(root / "v1"))
    assert bad.returncode == 2 and "give --downstream X" in bad.stderr, bad.stderr
    assert "Traceback" not in bad.stderr
    both = _triage(root, "up-old", "--upstream-old", "x", "--impact", str(release))
    assert both.returncode == 2 and "give one" in both.stderr


def test_show_by_unit_groups_a_stored_run_by_selecting_and_culprit_unit(loop):
    """`instep show RUN --by-unit`: per unit, the cases it selected (run --impact) and the
    failures it is the first culprit of (triage --impact), with pass/fail counts."""
    root, report_path = loop
    ran = run_downstream(root, "v2", "by-unit", "--impact", str(report_path), "--action", "Shim")
    assert ran.returncode == 1, ran.stdout + ran.stderr
    show = [sys.executable, "-m", "instep", "show", "by-unit", "--by-unit"]
    show += ["--db", str(root / "store.db")]
    before = json.loads(subprocess.run([*show, "--format", "json"], capture_output=True).stdout)
    assert before["culprit"] == []  # not triaged yet
    assert _triage(root, "by-unit", "--impact", str(report_path)).returncode == 0
    shown = subprocess.run([*show, "--format", "json"], capture_output=True, text=True)
    assert shown.returncode == 0, shown.stderr
    data = json.loads(shown.stdout)
    prs = {u["id"]: u["pr"] for u in json.loads(report_path.read_text())["units"]}
    # each Shim unit selected its one test file, whose one case fails on v2
    assert {
        prs[g["unit"]]: (g["passed"], g["failed"], g["cases"]) for g in data["selected_by"]
    } == {pr: (0, 1, [case]) for case, pr in EXPECTED.items()}
    assert {prs[g["unit"]]: (g["failed"], g["cases"]) for g in data["culprit"]} == {
        pr: (1, [case]) for case, pr in EXPECTED.items()
    }
    assert all(g["title"] for g in data["culprit"])
    table = subprocess.run(
        show, capture_output=True, text=True, env={**os.environ, "COLUMNS": "250"}
    )
    assert "outcomes by the unit that selected them" in table.stdout
    assert "outcomes by likely culprit" in table.stdout
    for g in data["culprit"]:
        assert g["unit"] in table.stdout
