"""Downstream tests are suggested by what they import, read statically."""

from __future__ import annotations

from instep.impact.join.test_suggestions import DownstreamTests, suggested_tests
from instep.impact.model import Action, Coupling, CouplingKind, Risk, Tristate, UpstreamChange
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
    assert suggested_tests(
        ["test/inductor/test_x.py"], ["test/test_b.py", "test/inductor/test_x.py"]
    ) == [
        "test/inductor/test_x.py",
        "test/test_b.py",
    ]
