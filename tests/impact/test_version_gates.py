"""Version gates in torch_npu's styles, and the compat debt they leave behind."""

from __future__ import annotations

import ast
import re
import textwrap

import pytest

from instep.impact.downstream.version_gates import (
    GateLookup,
    compat_debt,
    gate_spans,
    gates_in,
    min_supported_in,
    parse_version,
)

SRC = textwrap.dedent(
    """
    import torch
    from packaging.version import Version
    from npu_ext._compat.version import CURRENT_VERSION

    MIN_SUPPORTED_VERSION: tuple = (2, 13)
    IS_TORCH_214 = CURRENT_VERSION >= (2, 14)

    if CURRENT_VERSION >= (2, 14):
        from torch.distributed.tensor._op_schema import OpStrategy
    else:
        from torch.distributed.tensor._ops._matrix_ops import _mm_like_strategy

    if torch.__version__ < "2.13":
        OLD = 1

    if Version(torch.__version__) >= Version("2.15"):
        NEW = 1

    if is_torch_version_ge("2.14"):
        HELPER = 1

    if IS_TORCH_214:
        CONST = 1


    # COMPAT(>= 2.15): upstream pytorch#190615 added DeviceOpOverrides and
    #   DeviceInterface hooks.
    # CAN REMOVE when MIN_SUPPORTED >= (2, 15): remove the legacy patch helpers.
    def patch_codegen():
        if CURRENT_VERSION >= (2, 15):
            return
        GraphLowering.codegen_with_cpp_wrapper = None


    if hasattr(ir.SliceView, "create"):
        PROBE = 1

    try:
        from torch._inductor.codegen.cpp_utils import device_to_aten
    except ImportError:
        device_to_aten = None
    """
)


def _gates():
    tree = ast.parse(SRC)
    return gates_in(tree, "x.py", SRC), gate_spans(tree, "x.py", SRC)


def _line(text: str) -> int:
    return next(i for i, line in enumerate(SRC.splitlines(), 1) if text in line)


def test_parse_version():
    assert parse_version("2.14.1+cpu") == (2, 14, 1)
    assert parse_version((2, 14)) == (2, 14)
    assert parse_version("main") is None


def test_each_gate_form_and_its_range():
    _, spans = _gates()
    at = GateLookup(spans).at
    g = at(_line("import OpStrategy"))
    assert (g.kind, g.min_version, g.max_version) == ("version_compare", (2, 14), None)
    g = at(_line("import _mm_like_strategy"))
    assert (g.min_version, g.max_version, g.note) == (None, (2, 14), "else")
    assert at(_line("OLD = 1")).max_version == (2, 13)
    assert at(_line("NEW = 1")).min_version == (2, 15)
    assert at(_line("HELPER = 1")).min_version == (2, 14)
    assert at(_line("CONST = 1")).min_version == (2, 14)
    assert at(_line("PROBE = 1")).kind == "hasattr"
    assert at(_line("from torch._inductor.codegen.cpp_utils")).kind == "try_import"
    fb = at(_line("device_to_aten = None"))
    assert (fb.kind, fb.note) == ("try_import", "import failed")
    assert at(_line("import torch")) is None


def test_early_return_gates_the_rest_the_other_way_and_compat_comment():
    gates, spans = _gates()
    inner = GateLookup(spans).at(_line("codegen_with_cpp_wrapper = None"))
    assert (inner.kind, inner.max_version, inner.note) == (
        "version_compare",
        (2, 15),
        "after early exit",
    )
    comment = next(g for g in gates if g.kind == "compat_comment")
    assert comment.upstream_pr == 190615
    assert comment.max_version == (2, 15)
    assert comment.line == _line("# COMPAT(>= 2.15)")
    # the marker guards the def that follows it
    span = next(s for s in spans if s.gate == comment)
    assert span.start == _line("def patch_codegen")


def test_min_supported_constant():
    assert min_supported_in(ast.parse(SRC)) == (2, 13)


def test_compat_debt():
    gates, _ = _gates()
    debt = compat_debt(gates, (2, 14), (2, 14))
    lines = {(g.line, g.note): why for g, why in debt}
    gate_line = _line("if CURRENT_VERSION >= (2, 14):")
    assert "always true" in lines[(gate_line, "")]
    assert "always false" in lines[(gate_line, "else")]  # the else branch is dead code
    assert "always false" in lines[(_line("OLD = 1") - 1, "")]
    assert not any(line == _line("Version(torch.__version__) >=") for line, _ in lines)
    assert _line("# COMPAT(>= 2.15)") not in lines  # needed until 2.15
    later = {g.line: why for g, why in compat_debt(gates, (2, 15), (2, 15))}
    assert "CAN REMOVE" in later[_line("# COMPAT(>= 2.15)")]
    # nothing to remove while 2.13 is still supported, except the < 2.13 block
    assert [g.condition for g, _ in compat_debt(gates, (2, 13), (2, 14))] == [
        "torch.__version__ < '2.13'"
    ]


def test_partial_conditions_and_nightly_markers_are_not_overclaimed():
    src = textwrap.dedent(
        """
        # COMPAT(< 2026-08-04 torch nightly): upstream pytorch#191980 made it generic.
        # CAN REMOVE else branch when MIN_SUPPORTED >= the 2026-08-04 nightly.
        if enable_fold and version.parse(torch.__version__) >= version.parse("2.9.0"):
            FOLD = 1
        else:
            NO_FOLD = 1
        """
    )
    gates = gates_in(ast.parse(src), "y.py", src)
    marker = next(g for g in gates if g.kind == "compat_comment")
    assert (marker.min_version, marker.max_version, marker.upstream_pr) == (None, None, 191980)
    cond = next(g for g in gates if g.kind == "version_compare")
    assert (cond.min_version, cond.note) == ((2, 9, 0), "partial")
    assert len([g for g in gates if g.kind == "version_compare"]) == 1  # no else gate
    assert compat_debt(gates, (2, 13), (2, 14)) == []


@pytest.mark.parametrize(
    "source",
    [
        "VERSION = 1",
        "x = 1",
        "# ＣＯＭＰＡＴ",
        "import_error = 1",
        "except ImportError: pass",
        "torch_GE(2, 1)",
        "verſion = 1",  # the long s is an s to an ignore-case search, not to lower()
        "x = 'İmportError'",
        "get_source = 1",
    ],
)
def test_the_gate_prefilter_answers_as_an_ignore_case_search(source):
    from instep.impact.downstream.version_gates import may_gate

    words = r"version|hasattr|ImportError|COMPAT|torch_(?:ge|gt|lt|le)|getsource"
    assert may_gate(source) is bool(re.search(words, source, re.IGNORECASE))
