"""triage --impact ties a shared object's failed load ("undefined symbol") to the native
unit that says it loses that symbol: a real failure, stored by a real ``instep run`` of a
test that imports a package whose extension module was built against upstream v1 and is
loaded against v2 (tests/impact/native_fixture.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests.impact.native_fixture import build_native_trees

import instep
from instep.impact.analysis import ImpactRequest, analyse
from instep.impact.export import render
from instep.impact_contract import ImpactDocument
from instep.outcome import FAILING
from instep.store import Store, outcome_dict
from instep.triage.culprits import CulpritIndex

TEST = """\
import dpkg


def test_backend_imports():
    assert dpkg.version()
"""


@pytest.fixture(scope="module")
def loop(tmp_path_factory):
    root = tmp_path_factory.mktemp("native-loop")
    trees = build_native_trees(root)
    (trees.down / "tests").mkdir()
    (trees.down / "tests/test_import.py").write_text(TEST)
    doc = render(
        analyse(
            ImpactRequest(
                downstream=str(trees.down),
                upstream_old=str(trees.old),
                upstream_new=str(trees.new),
                use_cache=False,
            )
        ),
        "json",
    )
    # the downstream's tests with upstream v2's libraries where the loader looks first
    paths = [str(trees.down), str(Path(instep.__file__).parents[1])]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(paths),
        "LD_LIBRARY_PATH": str(trees.new / "torch/lib"),
    }
    cmd = [sys.executable, "-m", "instep", "run", "--profile", "cpu", "-n", "1"]
    cmd += ["--preimport", "none", "--run", "after", "--db", str(root / "store.db"), "tests"]
    proc = subprocess.run(cmd, cwd=trees.down, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    with Store(str(root / "store.db")) as store:
        run = store.get_run("after")
        failed = [outcome_dict(o) for o in store.outcomes(run.id)]
    failed = [f for f in failed if f["status"] in FAILING]
    return ImpactDocument.from_json(doc), failed


def test_the_failed_load_is_tied_to_the_native_unit(loop):
    doc, failed = loop
    assert len(failed) == 1
    failure = failed[0]
    text = json.dumps(failure)
    assert "undefined symbol: _ZN2ns1" in text  # the real loader's message, stored
    ranked = CulpritIndex(doc).attribute(failure)
    assert ranked, text[:2000]
    first = ranked[0]
    assert first.unit == "dpkg/lib/libdown.so (linked symbols)"
    kinds = {e.kind: e.detail for e in first.evidence}
    assert kinds["native"].startswith("undefined symbol _ZN2ns1")
    assert kinds["native"].endswith("the report says dpkg/lib/libdown.so loses it")
    assert "kind_fits" in kinds and "shim" in kinds
    assert first.confidence == "high", first.one_line()
    assert first.as_dict()["coupling"]["kind"] == "linked_symbol"


def test_an_undefined_symbol_the_report_does_not_name_ties_by_library_only(loop):
    doc, failed = loop
    failure = dict(failed[0])
    failure["message"] = (
        "ImportError: /site-packages/dpkg/lib/libdown.so: undefined symbol: _ZN2ns5otherEv"
    )
    failure["exception_chain"] = []
    failure["longrepr"] = failure["message"]  # no frame: only the text ties
    ranked = CulpritIndex(doc).attribute(failure)
    assert [a.unit for a in ranked] == ["dpkg/lib/libdown.so (linked symbols)"]
    kinds = {e.kind for e in ranked[0].evidence}
    assert "library" in kinds and "native" not in kinds and "place" not in kinds
    assert ranked[0].confidence != "high"  # the symbol itself is not one the report names
