"""``instep run --impact``'s selection of the report's suggested tests: OpInfo operators
through L5 (or upstream's Inductor OpInfo test when a PyTorch tree is given), shipped
cases by node id, test functions a commit touched by name."""

from __future__ import annotations

import json
from pathlib import Path

from instep.impact_contract import SCHEMA, ImpactDocument
from instep.suites.impact_selection import L5_SUITE, select_tests
from instep.suites.opinfo.harness import split_selection
from instep.suites.tiers import builtin_path

L1_CASE = "instep:smoke/test_l1_smoke.py::test_smoke[pointwise]"


def _doc(*units: tuple[str, list[str]]) -> ImpactDocument:
    """A report whose Test units suggest these tests (each with one coupling), as the
    contract's reader gives it."""
    raw = {
        "schema": SCHEMA,
        "tool": "instep test",
        "generated_at": "",
        "lang": "en",
        "scope": None,
        "definitions": {"actions": {}, "counting": ""},
        "upstream": {"mode": "release", "old": "a", "new": "b"},
        "downstream": {"source": "", "files": None, "references": None},
        "summary": {
            "units": len(units),
            "coupled_units": len(units),
            "couplings": len(units),
            "places": len(units),
            "counts": {},
            "by_action": {},
            "by_risk": {},
            "by_stage_action": {},
            "by_coupling_kind": {},
            "already_adapted": 0,
            "refusals": 0,
            "module_refusals": 0,
        },
        "refusals": [],
        "hotspots": [],
        "units": [_unit(uid, tests) for uid, tests in units],
        "compat_debt": [],
        "warnings": [],
        "stats": {},
    }
    return ImpactDocument.from_json(json.dumps(raw))


def _unit(uid: str, tests: list[str]) -> dict:
    coupling = {
        "kind": "import_use",
        "upstream": "torch/x.py::f",
        "downstream": "npu/x.py:1",
        "owner": "g",
        "snippet": "",
        "action": "Test",
        "risk": "low",
        "code_change": "no",
        "rule": "r",
        "chain": [],
        "detail": "",
        "already_adapted": False,
        "gate": None,
        "best_effort": False,
        "problems": [],
        "evidence": "",
        "role": None,
    }
    return {
        "id": uid,
        "title": uid,
        "unit_kind": "file",
        "commit": None,
        "pr": None,
        "reverted_by": None,
        "reverts": None,
        "files": [],
        "upstream": [],
        "changes": [],
        "action": "Test",
        "risk": "low",
        "code_change": "no",
        "test_needed": "yes",
        "stage": "Inductor",
        "coupling_kinds": ["import_use"],
        "couplings": [coupling],
        "suggested_tests": tests,
        "tests": [],
        "rationale": "",
    }


def test_opinfo_and_shipped_cases_run_in_instep_suites(tmp_path):
    doc = _doc(
        ("lowering.py", ["opinfo:sum", "opinfo:cdist:grad"]),
        ("ir.py", ["opinfo:sum", "opinfo:cdist", L1_CASE]),
    )
    got = select_tests(doc, cwd=tmp_path)
    l5 = builtin_path(L5_SUITE)
    assert got.paths == [l5, builtin_path(L1_CASE)]
    assert got.units_of == {l5: ["ir.py", "lowering.py"], builtin_path(L1_CASE): ["ir.py"]}
    # one option for the L5 suite: each operator once, with its gradients when any asks
    assert got.opinfo_ops == ["sum", "cdist:grad"]
    assert got.pytest_args == ["--instep-opinfo-ops=sum,cdist:grad"]
    assert got.keyword is None  # instep's suites run whole: nothing to narrow


def test_with_a_pytorch_tree_opinfo_runs_upstreams_inductor_test_and_functions_by_name(
    tmp_path,
):
    tree = tmp_path / "pytorch"
    (tree / "test" / "inductor").mkdir(parents=True)
    (tree / "test" / "inductor" / "test_torchinductor_opinfo.py").write_text("")
    (tree / "test" / "inductor" / "test_lowering.py").write_text(
        "def test_expand_implicit():\n    pass\n\n\ndef test_other():\n    pass\n"
    )
    doc = _doc(
        ("a", ["opinfo:nn.functional.relu", "opinfo:cdist:grad"]),
        ("b", ["test/inductor/test_lowering.py::test_expand_implicit"]),
    )
    got = select_tests(doc, upstream_tests=tree, cwd=tmp_path)
    opinfo = "pytorch/test/inductor/test_torchinductor_opinfo.py"
    lowering = "pytorch/test/inductor/test_lowering.py"
    assert got.paths == [opinfo, lowering]
    assert got.opinfo_ops == [] and got.pytest_args == []
    # upstream's ids: test_comprehensive_<name, dots as _>_<device>_<dtype>
    assert got.keyword == (
        "test_comprehensive_cdist_ or test_comprehensive_nn_functional_relu_"
        " or test_expand_implicit"
    )


def test_a_selection_names_an_ops_gradients_once():
    assert split_selection(("sum", "cdist:grad", "nn.functional.*")) == (
        ("sum", "cdist", "nn.functional.*"),
        ("cdist",),
    )


def test_the_l5_suite_path_exists():
    assert Path(builtin_path(L5_SUITE)).is_file()
