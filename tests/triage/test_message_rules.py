"""Seed 000's messages: each lands in its category and layer (npu profile, rules only)."""

from __future__ import annotations

import pytest

from instep.profiles import load_profile
from instep.triage.classifier import Classifier
from instep.triage.message_rules import match_profile, names_in_text

NPU = load_profile("npu")

# (message as the seed quotes it, category, layer); layer None: a manifestation
SEED_000 = [
    ("ModuleNotFoundError: No module named 'expecttest'", "env.missing_test_dependency", "env"),
    (
        "ImportError: cannot import name '_C' from partially initialized module 'torch_npu'",
        "env.circular_import_autoload",
        "env",
    ),
    (
        "ImportError: cannot import name 'cpp_prefix_path' from 'torch._inductor.codecache'",
        "env.test_torch_mismatch",
        "env",
    ),
    ("NameError: name 'npu_inductor' is not defined", "env.bootstrap_name_error", "env"),
    (
        "KeyError: 'cpu'\n    return device_op_overrides_dict[device]",
        "registration.device_op_overrides_cpu",
        "registration",
    ),
    (
        "torch._inductor.exc.MissingOperatorWithoutDecomp: missing lowering\n"
        "  target: npu._npu_dropout.default",
        "lowering.missing_operator",
        "lowering",
    ),
    (
        "torch._inductor.exc.MissingOperatorWithDecomp: missing decomposition",
        "decomposition.not_selected",
        "decomposition",
    ),
    (
        "RuntimeError: aten::_assert_scalar() Expected a value of type 'number' for argument"
        " 'self' but instead found type 'SymBool'.\nValue: u0 >= 0\nCannot cast u0 >= 0 to number",
        "lowering.assert_scalar_cast",
        "lowering",
    ),
    (
        '    new_slice_sizes[-1] = "None"\nIndexError: list assignment index out of range',
        "codegen.zero_dim_slice",
        "codegen",
    ),
    (
        "RuntimeError: AclNN_Parameter_Error(EZ1001): Tensor selfRef expected dtype is DT_FLOAT"
        " but found DT_FLOAT16.",
        "runtime.acl_param_dtype",
        "runtime",
    ),
    (
        "RuntimeError: launch failed for triton_unk_fused_new_ones_0: coreDim == 0",
        "codegen.grid_launch",
        "codegen",
    ),
    ("ValueError: y grid exceeds supported range", "codegen.grid_launch", "codegen"),
    (
        "triton.compiler.errors.CompilationError: UB overflow, requires 262144 bytes",
        "kernel_compile.ub_overflow",
        "kernel_compile",
    ),
    (
        "RuntimeError: aclrtLaunchKernelWithHostArgs failed: 507035",
        "runtime.device_exception_507035",
        "runtime",
    ),
    (
        "RuntimeError: The error from device: vector core exception",
        "runtime.device_exception_507035",
        "runtime",
    ),
    (
        "RuntimeError: MTE instruction address out of range",
        "runtime.device_exception_507035",
        "runtime",
    ),
    (
        "RuntimeError: npuSynchronizeDevice: error code is 507035",
        "runtime.device_exception_507035",
        "runtime",
    ),
    (
        "RuntimeError: view size is not compatible with input tensor's size and stride",
        "aot.view_stride",
        "aot",
    ),
    (
        "RuntimeError: NPU only support format is contiguous_format or preserve_format",
        "runtime.acl_format",
        "runtime",
    ),
    ("AssertionError: False is not true", "codegen.structural_assert", "codegen"),
    (
        "AssertionError: 'in_out_ptr' not found in 'def call(args):'",
        "codegen.structural_assert",
        "codegen",
    ),
]


def _outcome(text: str, status: str = "failed") -> dict:
    exc_type = text.rpartition("\n")[2].partition(": ")[0]
    names = sorted(names_in_text(text))
    return {
        "status": status,
        "case": "test_seed.py::test_case",
        "exception_type": names[0] if names else exc_type,
        "message": text,
        "exception_chain": [],
    }


@pytest.mark.parametrize(("text", "category", "layer"), SEED_000)
def test_seed_messages_land_in_their_category(text, category, layer):
    found = Classifier(NPU).classify(_outcome(text))
    assert found is not None
    assert (found.category, str(found.layer)) == (category, layer)
    assert found.evidence["decided_by"] == "rule"
    assert found.evidence["rule"]["category"] == category


def test_segfault_in_the_generated_wrapper_is_read_from_stderr():
    dump = (
        "Fatal Python error: Segmentation fault\n\nCurrent thread 0x00007f (most recent call"
        ' first):\n  File "/tmp/x/inductor_cache/ab/cabc.py", line 74 in call\n'
    )
    data = {"status": "crashed", "signal": "SIGSEGV", "stderr_tail": dump, "stage": "call"}
    found = Classifier(NPU).classify(data)
    assert found.category == "runtime.segfault_wrapper_call"
    assert found.signature == "Crash[SIGSEGV]: during call"


def test_timeout_is_a_manifestation_with_the_running_layer():
    data = {
        "status": "timeout",
        "message": "test_sizehint_issue1_npu Timed out after 630s",
        "evidence": {"stack_layer": "kernel_compile", "stack_frame": "triton.compiler:compile:9"},
    }
    found = Classifier(NPU).classify(data)
    assert found.category == "timeout.case"
    assert found.layer.value == "kernel_compile"


def test_every_rule_example_of_every_profile_matches_its_rule():
    for name in ("base", "cpu", "cuda", "npu"):
        profile = load_profile(name)
        for rule in profile.rules:
            for example in rule.examples:
                names = names_in_text(example)
                assert rule.exception is None or rule.exception in names, (name, example)
                hit = match_profile(profile, example, names)
                assert hit is not None, (name, example)
                # a more specific rule of the device profile may win, never another layer
                assert hit.rule.category == rule.category or hit.rule.layer == rule.layer, (
                    name,
                    example,
                    hit.rule.category,
                )


def test_passing_outcomes_are_not_classified():
    assert Classifier(NPU).classify({"status": "passed"}) is None
    assert Classifier(NPU).classify({"status": "skipped", "message": "KeyError: 'cpu'"}) is None
