"""The impact report as the engines exchange it (instep.impact_contract).

On real inputs: a real upstream git history and a downstream tree (tests/impact/
e2e_fixture.py) analysed by the impact engine, in commit mode and in release mode; the
document written, read back and written again; reports of another schema version given to
``instep run --impact`` and ``instep triage --impact`` (with a real run in a real store).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from tests.impact.e2e_fixture import build_downstream, build_upstream

import instep
from instep import impact_contract as contract
from instep.errors import BadInput
from instep.impact.analysis import ImpactRequest, analyse
from instep.impact.export.json_doc import as_document
from instep.impact_contract import ImpactDocument, read_report
from instep.store import Store

#: the fingerprint of every schema version's records and vocabularies (append only: a
#: change to the records is a new version, see the versioning rule in the module; 3 was
#: rewritten while the branch that made it merged its second half, before any release)
FINGERPRINTS = {2: "92213a3bc06b79d7", 3: "0079388955ee800c", 4: "61ab1e4b67c98af1"}


#: version checks of the kinds real backends write, added to the fixture's downstream so
#: that the report has a gated coupling, compat debt and a refusal (every record)
VERSIONS = """\
import torch
from packaging import version

if version.parse(torch.__version__) >= version.parse("2.14"):
    raise ImportError("this build supports torch < 2.14 only")

if version.parse(torch.__version__) < version.parse("2.5.1"):
    OLD_PATH = True

if version.parse(torch.__version__) < version.parse("2.14"):
    from torch._inductor.lowering import old_helper
else:
    old_helper = None
"""


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    root = tmp_path_factory.mktemp("contract")
    up = build_upstream(root / "pytorch")
    down = build_downstream(root / "torch_npu")
    (down / "torch_npu" / "versions.py").write_text(VERSIONS, encoding="utf-8")
    return up.path, down


@pytest.fixture(scope="module")
def documents(pair) -> dict[str, ImpactDocument]:
    """The report of the pair in commit mode and in release mode, as the writer builds it."""
    up, down = pair
    git = ImpactRequest(downstream=str(down), upstream_git=str(up), rev_range="v1..v2")
    release = ImpactRequest(downstream=str(down), upstream_old=f"{up}@v1", upstream_new=f"{up}@v2")
    return {
        name: as_document(analyse(dataclasses.replace(req, use_cache=False)))
        for name, req in (("git", git), ("release", release))
    }


@pytest.mark.parametrize("mode", ["git", "release"])
def test_a_real_report_round_trips(documents, mode):
    doc = documents[mode]
    # the fixture exercises the nested records, so the round trip covers them
    couplings = [c for u in doc.units for c in u.couplings]
    assert {c.kind for c in couplings} >= {
        contract.CouplingKind.IMPORT_USE,
        contract.CouplingKind.CONFIG,
        contract.CouplingKind.REGISTRATION,
        contract.CouplingKind.SUBCLASS_OVERRIDE,
    }
    assert [c.gate.at for c in couplings if c.gate] == ["torch_npu/versions.py:10"]
    assert [r.at for r in doc.refusals] == ["torch_npu/versions.py:5"]
    assert [d.at for d in doc.compat_debt] == ["torch_npu/versions.py:7"]
    assert doc.hotspots and contract.Action.SHIM in {u.action for u in doc.units}
    assert (doc.upstream.range is not None) == (mode == "git")
    # schema 3's records: the definitions, the counts, the suggested tests with their rules
    assert list(doc.definitions.actions) == [
        contract.Action.SHIM,
        contract.Action.TEST,
        contract.Action.CHECK,
    ]
    assert sum(c.couplings for c in doc.summary.counts.values()) == doc.summary.couplings
    assert sum(c.places for c in doc.summary.counts.values()) == doc.summary.places
    tests = [t for u in doc.units for t in u.tests]
    assert {t.kind for t in tests} >= {
        contract.SuggestionKind.BUILTIN,
        contract.SuggestionKind.DOWNSTREAM,
    }
    assert all(
        u.suggested_tests == tuple(dict.fromkeys(t.test for t in u.tests)) for u in doc.units
    )

    text = doc.to_json()
    back = ImpactDocument.from_json(text)
    assert back == doc
    assert back.to_json() == text  # read and written again: the same bytes
    # what a plain JSON reader sees: the range only in commit mode, every unit on its line
    plain = json.loads(text)
    assert ("range" in plain["upstream"]) == (mode == "git")
    assert plain["schema"] == f"instep.impact/{contract.SCHEMA_VERSION}"
    assert text.count('\n  {"id": ') == len(doc.units)


def test_the_cli_writes_what_the_reader_reads(pair, tmp_path):
    from instep.cli import run as cli_run

    up, down = pair
    out = tmp_path / "impact.json"
    args = ["impact", "--upstream-git", str(up), "--range", "v1..v2", "--downstream", str(down)]
    assert cli_run([*args, "--format", "json", "--out", str(out), "--no-cache"]) == 0
    doc = read_report(out)
    assert doc.to_json() == out.read_text(encoding="utf-8")
    assert {u.pr for u in doc.units} >= {101, 104}


def _variant(documents, tmp_path: Path, name: str, edit) -> Path:
    """The commit-mode report, edited as a plain JSON document."""
    raw = json.loads(documents["git"].to_json())
    edit(raw)
    path = tmp_path / name
    path.write_text(json.dumps(raw), encoding="utf-8")
    return path


def _older(raw: dict) -> None:  # as instep.impact/3 wrote it, before definitions were added
    raw["schema"] = "instep.impact/3"
    del raw["definitions"]


def _newer(raw: dict) -> None:  # a later version with a field this one does not know
    raw["schema"] = f"instep.impact/{contract.SCHEMA_VERSION + 1}"
    raw["units"][0]["python_symbols"] = []


@pytest.mark.parametrize(("edit", "version"), [(_older, 3), (_newer, contract.SCHEMA_VERSION + 1)])
def test_another_schema_version_is_one_line_naming_both(documents, tmp_path, edit, version):
    path = _variant(documents, tmp_path, f"v{version}.json", edit)
    expected = (
        f"--impact {path}: impact report schema {version}, this instep reads schema"
        f" {contract.SCHEMA_VERSION}; re-run instep impact with this instep"
    )
    with pytest.raises(BadInput) as caught:
        read_report(path)
    assert str(caught.value) == expected


def test_a_report_that_validates_but_names_another_version_is_refused(documents, tmp_path):
    path = _variant(
        documents, tmp_path, "v9.json", lambda raw: raw.update(schema="instep.impact/9")
    )
    said = f"impact report schema 9, this instep reads schema {contract.SCHEMA_VERSION}"
    with pytest.raises(BadInput, match=said):
        read_report(path)


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        (
            lambda raw: raw["units"][0]["couplings"][0].update(kind="telepathy"),
            "at units.0.couplings.0.kind: Input should be",
        ),
        (lambda raw: raw["units"][1].pop("risk"), "at units.1.risk: Field required"),
        (lambda raw: raw["units"][0].update(pr="101"), "at units.0.pr: Input should be a valid"),
        (lambda raw: raw["downstream"].update(extra=1), "at downstream.extra: Unexpected"),
        (lambda raw: raw.pop("schema"), "not an instep impact JSON report (schema None"),
    ],
)
def test_a_report_that_breaks_the_schema_is_one_line(documents, tmp_path, edit, needle):
    path = _variant(documents, tmp_path, "broken.json", edit)
    with pytest.raises(BadInput, match=re.escape(needle)) as caught:
        read_report(path)
    assert "\n" not in str(caught.value) and str(path) in str(caught.value)


def _instep(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(Path(instep.__file__).parents[1])}
    cmd = [sys.executable, "-m", "instep", *args]
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def _store_state(db: Path) -> str:
    """Everything the store holds, as a digest (runs, cases, outcomes, batches)."""
    return hashlib.sha256(db.read_bytes()).hexdigest() if db.exists() else "absent"


@pytest.mark.parametrize(("edit", "version"), [(_older, 3), (_newer, contract.SCHEMA_VERSION + 1)])
def test_run_and_triage_refuse_another_version_and_store_nothing(
    documents, tmp_path, edit, version
):
    """One line on stderr naming the file and both versions, exit 2, the store unchanged."""
    report = _variant(documents, tmp_path, f"v{version}.json", edit)
    tests = tmp_path / "suite"
    tests.mkdir()
    (tests / "test_one.py").write_text("def test_fails():\n    assert 1 == 2\n")
    db = tmp_path / "store.db"
    run = ["run", "test_one.py", "--profile", "cpu", "-n", "1", "--preimport", "none"]
    made = _instep(*run, "--run", "r1", "--db", str(db), cwd=tests)
    assert made.returncode == 1, made.stderr  # the case fails: a failure to triage
    before = _store_state(db)
    with Store(str(db)) as store:
        runs = [r.name for r in store.list_runs()]
    said = (
        f"--impact {report}: impact report schema {version}, this instep reads schema"
        f" {contract.SCHEMA_VERSION}; re-run instep impact with this instep"
    )
    for args in (
        ["triage", "r1", "--impact", str(report), "--db", str(db)],
        ["run", "--impact", str(report), "--profile", "cpu", "--run", "r2", "--db", str(db)],
    ):
        done = _instep(*args, cwd=tests)
        assert done.returncode == 2, (args, done.stderr)
        assert done.stderr.strip().splitlines() == [f"instep: error: {said}"], done.stderr
        assert _store_state(db) == before
    with Store(str(db)) as store:
        assert [r.name for r in store.list_runs()] == runs


def _fingerprint() -> str:
    """The records' fields and types and the vocabularies' values, as one digest."""
    parts = []
    for record in contract.RECORDS:
        fields = [f"{f.name}:{f.type}" for f in dataclasses.fields(record)]
        parts.append(f"{record.__name__}({', '.join(fields)})")
    vocabularies = [v for v in vars(contract).values() if isinstance(v, type)]
    vocabularies = [v for v in vocabularies if issubclass(v, contract.Vocab) and list(v)]
    for vocab in sorted(vocabularies, key=lambda v: v.__name__):
        parts.append(f"{vocab.__name__}[{', '.join(m.value for m in vocab)}]")
    return hashlib.blake2b("\n".join(parts).encode(), digest_size=8).hexdigest()


def test_a_change_to_the_records_is_a_new_schema_version():
    """Changing a record or a vocabulary without a new SCHEMA_VERSION fails here: bump it,
    add its fingerprint to FINGERPRINTS (keep the old ones) and update docs/impact.md."""
    now = _fingerprint()
    assert len(set(FINGERPRINTS.values())) == len(FINGERPRINTS)
    assert max(FINGERPRINTS) == contract.SCHEMA_VERSION, "add the new version's fingerprint"
    assert FINGERPRINTS[contract.SCHEMA_VERSION] == now, (
        f"the records changed: bump SCHEMA_VERSION to {contract.SCHEMA_VERSION + 1} and add"
        f" {contract.SCHEMA_VERSION + 1}: {now!r} to FINGERPRINTS"
    )


def test_the_docs_list_every_field_of_every_record():
    """docs/impact.md's JSON schema section names each record's fields, in order."""
    docs = Path(instep.__file__).parents[2] / "docs" / "impact.md"
    if not docs.is_file():
        pytest.skip("docs/ is not beside this checkout")
    text = docs.read_text(encoding="utf-8")
    section = text.split("## JSON schema", 1)[1].split("\n## ", 1)[0]
    assert f'`schema: "instep.impact/{contract.SCHEMA_VERSION}"`' in text
    table = dict(re.findall(r"^\| `(\w+)` \| ([^|]+) \|", section, re.MULTILINE))
    for record in contract.RECORDS:
        named = [f.strip(" `") for f in table.get(record.__name__, "").split(",")]
        assert named == [f.name for f in dataclasses.fields(record)], record.__name__
