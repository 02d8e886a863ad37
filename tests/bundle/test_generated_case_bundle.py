"""A bundle of a case instep generates (L5 OpInfo) from a stored run: standalone script,
the triad legs in the comparison, and the known workaround from the L5 list."""

from __future__ import annotations

import ast

from tests.bundle.conftest import Project, index, paths_of
from tests.suites.store_fixture import make_run, triad_counters

CASE = "src/instep/suites/opinfo/test_l5_opinfo.py::test_opinfo[allclose-float32]"


def test_opinfo_case_gets_a_script_legs_and_the_listed_workaround(tmp_path):
    db = tmp_path / "instep.db"
    chain = [
        {
            "type": "torch._dynamo.exc.Unsupported",
            "message": "Data dependent operator\n  Explanation: aten.allclose.default",
            "frames": [{"module": "torch._dynamo.symbolic_convert", "line": 1, "function": "f"}],
        }
    ]
    values = {
        "status": "failed",
        "layer": "dynamo",
        "category": "dynamo.unsupported",
        "signature": "Unsupported: Data dependent operator",
        "exception_chain": chain,
        "message": chain[0]["message"],
        "metrics": triad_counters(eager_cpu="ok", eager_device="ok", compiled_device="fail"),
        "duration": 1.5,
    }
    make_run(db, "l5", [(CASE, values)], tier="L5", profile="cpu")
    project = Project(tmp_path, db)
    result = project.bundle(CASE, "--out", str(tmp_path / "out"), "--no-rerun", run="l5")
    assert result.code == 0, result.err
    directory, _ = paths_of(result)
    script = directory / "reproducer" / "repro_opinfo_allclose-float32.py"
    ast.parse(script.read_text())
    assert index(directory)["reproducer"]["script"] == "reproducer/" + script.name
    issue = (directory / "ISSUE.md").read_text()
    assert issue.splitlines()[0] == ("# [Dynamo][allclose] Unsupported: Data dependent operator")
    assert "- CPU compiled (inductor): stored: fail" in issue
    assert "- CPU eager (reference): stored: ok" in issue
    # the built-in L5 expected-failure list knows this one
    assert "Dynamo cannot capture it with fullgraph=True" in issue
    assert "L5.toml`: `test_opinfo[allclose-*]`" in issue
    assert "Dynamo / PyTorch" in issue  # the escalation target of the dynamo layer
