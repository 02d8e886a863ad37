"""The self-test matrix: each fault-injection case and the layer it must be filed under."""

from __future__ import annotations

from instep.layers import Layer

#: test function of ``fault_suite.py`` -> (expected layer, what is injected).
EXPECTED: dict[str, tuple[Layer, str]] = {
    "test_graph_break_under_fullgraph": (Layer.DYNAMO, "graph break under fullgraph=True"),
    "test_backward_formula": (Layer.AOT, "autograd formula AOT cannot trace (NumPy)"),
    "test_decomposition": (Layer.DECOMPOSITION, "Inductor decomposition that raises"),
    "test_lowering": (Layer.LOWERING, "register_lowering that raises"),
    "test_missing_lowering": (Layer.LOWERING, "custom op, no lowering, implicit_fallbacks off"),
    "test_scheduler_pass": (Layer.SCHEDULER, "config._pre_fusion_custom_pass that raises"),
    "test_codegen": (Layer.CODEGEN, "lowering emitting an op the C++ codegen lacks"),
    "test_kernel_compile": (Layer.KERNEL_COMPILE, "config.cpp.cxx set to a missing compiler"),
    "test_runtime": (Layer.RUNTIME, "fallback op whose kernel raises at run time"),
    "test_wrong_numerics": (Layer.NUMERICS, "lowering computing wrong values"),
    "test_crash": (Layer.RUNTIME, "fallback op whose kernel segfaults (crash)"),
    "test_hang": (Layer.RUNTIME, "fallback op whose kernel never returns (hang)"),
    "test_eager_reference": (Layer.EAGER, "the test's eager reference itself fails"),
}
