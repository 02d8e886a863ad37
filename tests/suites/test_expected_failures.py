"""Expected-failure lists: TOML data, reconciliation with a run, PyTorch/torch_npu formats."""

from __future__ import annotations

import json

import pytest
from tests.suites.store_fixture import make_run

from instep.errors import BadInput
from instep.suites import expected_failures as xf

LIST = """
[[case]]
case = "TestOps::test_sort_float32"
reason = "sort lowering missing"
layer = "lowering"
issue = "https://example.invalid/issues/7"

[[case]]
case = "test_opinfo[allclose-*]"
reason = "data-dependent bool"
layer = "dynamo"

[[case]]
case = "TestOps::test_never_run"
reason = "gone"
"""

OUTCOMES = [
    {"case": "test/t.py::TestOps::test_sort_float32", "status": "failed", "layer": "lowering"},
    {"case": "opinfo/test_l5.py::test_opinfo[allclose-float32]", "status": "passed"},
    {"case": "test/t.py::TestOps::test_add", "status": "failed", "message": "boom\nmore"},
    {"case": "test/t.py::TestOps::test_mul", "status": "passed"},
]


@pytest.fixture
def entries(tmp_path):
    path = tmp_path / "L5.toml"
    path.write_text(LIST, encoding="utf-8")
    return xf.load_list(path)


def test_list_entries_match_node_ids_by_suffix_and_pattern(entries):
    sort, allclose, _ = entries
    assert sort.layer == "lowering" and sort.issue.endswith("/7")
    assert sort.matches("test/t.py::TestOps::test_sort_float32")
    assert not sort.matches("test/t.py::TestOps::test_sort_float32x")
    assert allclose.matches("a/test_l5.py::test_opinfo[allclose-float64]")
    assert not allclose.matches("a/test_l5.py::test_opinfo[add-float32]")


def test_reconcile_sorts_expected_fixed_unexpected_and_not_run(entries):
    result = xf.reconcile(OUTCOMES, entries)
    assert [c for c, _ in result.expected] == ["test/t.py::TestOps::test_sort_float32"]
    assert [c for c, _ in result.fixed] == ["opinfo/test_l5.py::test_opinfo[allclose-float32]"]
    assert [u["case"] for u in result.unexpected] == ["test/t.py::TestOps::test_add"]
    assert [e.case for e in result.not_run] == ["TestOps::test_never_run"]
    assert not result.ok
    assert result.as_dict()["fixed"][0]["note"] == "fixed - remove it"


def test_bad_list_is_a_one_line_error(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text('[[case]]\nreason = "no case key"\n', encoding="utf-8")
    with pytest.raises(BadInput, match=r"bad.toml: \[\[case\]\] #1 needs a 'case' string"):
        xf.load_list(path)
    typed = tmp_path / "typed.json"
    typed.write_text(json.dumps({"test_x (__main__.T)": {"WEIRD": "r"}}), encoding="utf-8")
    with pytest.raises(BadInput, match="type 'WEIRD' not one of"):
        xf.load_list(typed)


def test_pytorch_disabled_tests_json_round_trip(tmp_path):
    upstream = {
        "test_sort (__main__.TestInductorOpInfoCPU)": [
            "https://github.com/x/y/issues/1",
            ["linux"],
        ],
        "test_add (__main__.TestOps)": ["", []],
    }
    path = tmp_path / "disabled.json"
    path.write_text(json.dumps(upstream), encoding="utf-8")
    entries = xf.load_list(path)
    assert entries[0].case == "TestInductorOpInfoCPU::test_sort"
    assert entries[0].issue == "https://github.com/x/y/issues/1"
    assert entries[0].platforms == ["linux"]
    assert entries[0].matches("test/inductor/t.py::TestInductorOpInfoCPU::test_sort")
    assert xf.export_pytorch_disabled(entries) == upstream


def test_npu_typed_json_round_trip_and_types_from_layers(tmp_path):
    typed = {
        "test_index_put (__main__.TestIndexing)": {"DTYPE": "int32 indices unsupported"},
        "test_allreduce (__main__.TestDist)": {"HCCL": "needs 8 cards"},
    }
    path = tmp_path / "disabled_tests_type.json"
    path.write_text(json.dumps(typed), encoding="utf-8")
    entries = xf.load_list(path)
    assert [e.npu_type for e in entries] == ["DTYPE", "HCCL"]
    assert xf.export_npu_typed(entries) == typed
    assert xf.npu_type_for("numerics", None, "Tensor-likes are not close!") == "VALUE"
    assert xf.npu_type_for("lowering", None, "NotImplementedError: aten.sort") == "NOT_SUPPORT"
    assert xf.npu_type_for("runtime", None, "NPU out of memory") == "MEMORY"
    assert xf.npu_type_for("dynamo", None, "something else") == "OTHER"


def test_propose_explains_each_listed_entry_that_ran(entries):
    proposals = {p.case: p for p in xf.propose(OUTCOMES, entries)}
    sort = proposals["test/t.py::TestOps::test_sort_float32"]
    assert sort.layer == "lowering" and sort.status == "failed"
    fixed = proposals["opinfo/test_l5.py::test_opinfo[allclose-float32]"]
    assert fixed.reason.startswith("passes now")
    assert len(proposals) == 2


def test_cli_check_convert_and_propose(instep, tmp_path):
    db = tmp_path / "r.db"
    rows = [
        ("test/t.py::TestOps::test_sort_float32", {"status": "failed", "layer": "lowering"}),
        ("test/t.py::TestOps::test_add", {"status": "passed"}),
    ]
    make_run(db, "r1", rows)
    listed = tmp_path / "x.toml"
    listed.write_text(LIST, encoding="utf-8")
    ok = instep("tier", "check", "r1", "--db", str(db), "--expected", str(listed))
    assert ok.code == 0, ok.err
    assert (
        "1 expected failures, 0 fixed, 0 unexpected successes, 0 failing differently,"
        " 0 unexpected, 2 listed but not run"
    ) in ok.out
    opinfo = "opinfo/test_l5.py::test_opinfo[allclose-float32]"
    make_run(
        db,
        "r2",
        [
            (rows[0][0], {"status": "passed"}),
            (rows[1][0], {"status": "failed"}),
            (opinfo, {"status": "xpassed"}),
        ],
    )
    bad = instep("tier", "check", "r2", "--db", str(db), "--expected", str(listed))
    assert bad.code == 1
    assert "FIXED - remove it: test/t.py::TestOps::test_sort_float32" in bad.out
    assert "UNEXPECTED failed: test/t.py::TestOps::test_add" in bad.out
    assert f"FIXED - remove it: {opinfo}" in bad.out  # brackets printed, not eaten as markup

    out = tmp_path / "disabled.json"
    conv = instep("tier", "convert", str(listed), "--to", "pytorch", "-o", str(out))
    assert conv.code == 0, conv.err
    data = json.loads(out.read_text())
    assert data["test_sort_float32 (__main__.TestOps)"] == ["https://example.invalid/issues/7", []]
    back = instep("tier", "convert", str(out), "--to", "instep")
    assert 'case = "TestOps::test_sort_float32"' in back.out

    npu = instep("tier", "propose", "r1", "--db", str(db), "--list", str(out), "--format", "npu")
    assert npu.code == 0, npu.err
    assert json.loads(npu.out) == {"test_sort_float32 (__main__.TestOps)": {"OTHER": "failed"}}
