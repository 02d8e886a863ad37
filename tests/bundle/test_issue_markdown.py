"""Issue titles ``[Layer][Operator] description`` from real-shaped outcomes."""

from __future__ import annotations

from instep.bundle.issue_markdown import (
    IssueFacts,
    issue_title,
    layer_label,
    operator_of,
    render_issue,
)

LOWERING_CHAIN = [
    {
        "type": "torch._dynamo.exc.BackendCompilerFailed",
        "message": "backend='inductor' raised:\nLoweringException: ...",
    },
    {
        "type": "torch._inductor.exc.InductorError",
        "relation": "cause",
        "message": "LoweringException: NotImplementedError: broken\n  target: aten.sin.default",
    },
    {"type": "NotImplementedError", "relation": "cause", "message": "broken lowering of sin"},
]


def test_layer_labels():
    assert layer_label("kernel_compile") == "KernelCompile"
    assert layer_label("lowering") == "Lowering"
    assert layer_label(None) == "Unclassified"


def test_title_of_a_compiler_error_names_the_target_and_the_inner_error():
    outcome = {"status": "failed", "layer": "lowering", "exception_chain": LOWERING_CHAIN}
    assert issue_title("t.py::test_sin", outcome) == (
        "[Lowering][aten.sin] NotImplementedError: broken lowering of sin"
    )


def test_title_of_a_mismatch_keeps_the_outer_message():
    chain = [
        {"type": "instep.suites.triad.CompiledMismatch", "message": "compiled differs: not close"},
        {"type": "AssertionError", "relation": "cause", "message": "Tensor-likes are not close!"},
    ]
    outcome = {"status": "failed", "layer": "numerics", "exception_chain": chain}
    case = "src/instep/suites/opinfo/test_l5_opinfo.py::test_opinfo[nn.functional.gelu-float16]"
    assert operator_of(case, outcome) == "nn.functional.gelu"
    assert issue_title(case, outcome) == (
        "[Numerics][nn.functional.gelu] CompiledMismatch: compiled differs: not close"
    )


def test_title_of_a_crash_and_a_long_message():
    crash = {"status": "crashed", "layer": None, "message": "worker process killed by SIGSEGV"}
    assert issue_title("t.py::test_smoke[zero_dim]", crash) == (
        "[Unclassified][zero_dim] worker process killed by SIGSEGV"
    )
    long = {"status": "failed", "layer": "eager", "message": "x" * 300}
    title = issue_title("t.py::test_long", long)
    assert title.startswith("[Eager][long] ") and len(title) < 120 and title.endswith("…")


def test_render_in_both_languages_has_every_template_section():
    outcome = {"status": "failed", "layer": "lowering", "exception_chain": LOWERING_CHAIN}
    facts = IssueFacts(
        run={"name": "r", "profile": "npu", "version_matrix": {"torch": "2.13.0"}},
        device_type="npu",
        backend="inductor",
        case="t.py::test_sin",
        outcome=outcome,
        pytest_line="python -m pytest t.py::test_sin",
        workaround={"reason": "fallback to eager for sin", "case": "test_sin", "source": "L5.toml"},
    )
    en = render_issue(facts, "en")
    assert en.startswith("# [Lowering][aten.sin] ")
    assert "- torch: `2.13.0`" in en
    assert "NPU eager" in en and "NPU compiled (inductor)" in en
    assert "fallback to eager for sin" in en
    assert "the backend's lowerings" in en and "target overload, input metadata, IR" in en
    zh = render_issue(facts, "zh")
    assert "## 最早失败阶段" in zh and "后端 lowering" in zh
