"""Suggested tests: the downstream's by what they import (read statically), the stage
cases' table, the commands that run each kind, the downstream's use of operators, the
test functions a commit touched. End to end: test_runnable_suggestions.py."""

from __future__ import annotations

from pathlib import Path

from instep.impact.join.test_suggestions import (
    DownstreamOps,
    DownstreamTests,
    parse_opinfo_test,
    run_commands,
    touched_test_functions,
)
from instep.impact.model import (
    Action,
    Coupling,
    CouplingKind,
    Reference,
    Risk,
    SuggestedTest,
    SuggestionKind,
    Tristate,
    UpstreamChange,
)
from instep.pyindex.test_imports import imported_names


def test_imported_names_reads_every_import_form():
    source = """
import os, torch_npu.utils.unrelated as u
from torch_npu._inductor import lowering_fx, config as cfg  # comment
from torch._inductor.codegen.triton import (
    TritonKernel,
)
from . import sibling
    from torch_npu.npu import amp
text = "import not_a_module"
"""
    names = imported_names(source)
    assert {
        "os",
        "torch_npu.utils.unrelated",
        "torch_npu._inductor",
        "torch_npu._inductor.lowering_fx",
        "torch_npu._inductor.config",
        "torch._inductor.codegen.triton",
        "torch_npu.npu.amp",
    } <= names
    assert not any(n.startswith(".") or n.endswith(".as") or "sibling" in n for n in names)
    assert "torch_npu._inductor.cfg" not in names


def _coupling(upstream: str, downstream: str) -> Coupling:
    return Coupling(
        CouplingKind.IMPORT_USE,
        upstream,
        downstream,
        "x",
        Action.TEST,
        Risk.LOW,
        Tristate.NO,
        "use.behaviour",
    )


def test_tests_importing_more_coupled_modules_come_first():
    tests = DownstreamTests(
        [
            ("test/test_a.py", "from torch_npu._inductor import lowering_fx\n"),
            (
                "test/test_b.py",
                "import torch_npu._inductor.lowering_fx\n"
                "from torch._inductor.lowering import expand\n",
            ),
            ("test/test_pkg.py", "import torch_npu._inductor\nimport torch_npu\n"),
        ]
    )
    unit = UpstreamChange("u", "u", "file")
    coupled = [
        _coupling("torch/_inductor/lowering.py::expand", "torch_npu/_inductor/lowering_fx.py:3")
    ]
    # test_b imports the downstream module and the changed upstream symbol; a package
    # import is not an import of its modules
    assert tests.for_unit(unit, coupled) == ["test/test_b.py", "test/test_a.py"]
    assert tests.for_unit(unit, []) == []


def test_every_stage_case_is_a_case_of_the_shipped_suite():
    """data/builtin_cases.toml names cases of instep's L1 suite: a renamed case fails here
    (read statically: the suite's CASES keys and test functions)."""
    import ast

    from instep.impact.join.test_suggestions import builtin_cases
    from instep.suites.tiers import builtin_path

    assert builtin_cases()
    for case in builtin_cases():
        path, _, node = builtin_path(case.test).partition("::")
        tree = ast.parse(Path(path).read_text(encoding="utf-8"))
        cases = next(
            n.value
            for n in tree.body
            if isinstance(n, ast.AnnAssign) and getattr(n.target, "id", "") == "CASES"
        )
        names = {k.value for k in cases.keys}
        function, _, param = node.partition("[")
        assert function == "test_smoke" and param.rstrip("]") in names, case.test
        assert all(p.startswith("torch/") and p.endswith(".") for p in case.symbols)


def test_commands_run_each_kind_where_it_lives():
    tests = [
        SuggestedTest("opinfo:sum", SuggestionKind.OPINFO, "op.reaches", ("a::f",), ""),
        SuggestedTest("opinfo:cdist:grad", SuggestionKind.OPINFO, "op.schema", ("a::g",), ""),
        SuggestedTest("opinfo:prod", SuggestionKind.OPINFO, "op.reaches", ("a::f",), ""),
        SuggestedTest(
            "instep:smoke/test_l1_smoke.py::test_smoke[pointwise]",
            SuggestionKind.BUILTIN,
            "stage.case",
            (),
            "",
        ),
        SuggestedTest(
            "test/inductor/test_x.py::TestX::test_y",
            SuggestionKind.UPSTREAM,
            "commit.touched",
            (),
            "",
        ),
        SuggestedTest("test/test_npu.py", SuggestionKind.DOWNSTREAM, "downstream.imports", (), ""),
    ]
    got = [(c.command, c.where) for c in run_commands(tests, limit=2)]
    assert got == [
        ("instep run --tier L5 --pytest-arg=--instep-opinfo-ops=sum,cdist:grad", "device"),
        ("instep run 'instep:smoke/test_l1_smoke.py::test_smoke[pointwise]'", "device"),
        ("instep run test/inductor/test_x.py::TestX::test_y", "upstream"),
        ("instep run test/test_npu.py", "downstream"),
    ]
    assert parse_opinfo_test("opinfo:cdist:grad") == ("cdist", True)
    assert parse_opinfo_test("opinfo:nn.functional.relu") == ("nn.functional.relu", False)
    assert parse_opinfo_test("test/x.py") is None


def test_the_downstreams_own_use_of_operators():
    def ref(target: str, role: str) -> Reference:
        return Reference(CouplingKind.OP_SCHEMA, target, "npu/x.py", 1, "", detail=role)

    ops = DownstreamOps.from_references(
        [
            ref("schema:aten.cummax", "table:TORCH_NATIVE_FALLBACK_LIST"),
            ref("schema:aten.cumsum.out", "table:TORCH_NATIVE_FALLBACK_LIST"),
            ref("schema:aten.prod.dim_int", "table:TORCH_NATIVE_FALLBACK_LIST"),
            ref("schema:aten.cdist", "make_fallback"),
            ref("schema:aten.sum", "register_lowering"),
            ref("schema:aten.mean.default", "use"),
            Reference(CouplingKind.IMPORT_USE, "torch._inductor.lowering.fallbacks", "x.py", 1, ""),
        ]
    )
    # an out= overload is no fallback of the op: a compiled graph calls the functional one
    assert ops.fallback == {"cummax", "prod", "cdist"}
    assert ops.lowered == {"sum"}


def test_touched_test_functions_are_the_ones_a_commit_added_or_changed():
    old = (
        b"class TestX:\n    def test_a(self):\n        pass\n\n"
        b"    def test_b(self):\n        pass\n"
    )
    new = (
        b"class TestX:\n    def test_a(self):\n        pass\n\n    def test_b(self):\n"
        b"        assert 1\n\n    def test_c(self):\n        pass\n\n    def helper(self):\n"
        b"        pass\n\n\ndef test_free():\n    pass\n"
    )
    assert touched_test_functions("test/test_x.py", old, new) == [
        "test/test_x.py::TestX::test_b",
        "test/test_x.py::TestX::test_c",
        "test/test_x.py::test_free",
    ]
    assert touched_test_functions("test/test_x.py", old, None) == []
    assert touched_test_functions("test/test_x.py", None, old) == [
        "test/test_x.py::TestX::test_a",
        "test/test_x.py::TestX::test_b",
    ]
