"""The order of trust: ladder, then frames (upstream + downstream), then rules, then eager."""

from __future__ import annotations

from instep.layers import Layer
from instep.profiles import load_profile
from instep.triage.classifier import Classifier
from instep.triage.exception_layers import chain_layer, is_generated_code

CPU = load_profile("cpu")
NPU = load_profile("npu")
SITE = "/usr/lib/python3.11/site-packages"


def frame(module: str, function: str = "f", line: int = 1, file: str | None = None) -> dict:
    path = file or f"{SITE}/{module.replace('.', '/')}.py"
    return {"file": path, "module": module, "function": function, "line": line}


TEST = frame("test_ops", "test_case", file="/work/tests/test_ops.py")
EVAL = frame("torch._dynamo.eval_frame", "_fn")
AOT = frame("torch._functorch._aot_autograd.jit_compile_runtime_wrappers", "aot_dispatch")
GRAPH = frame("torch._inductor.graph", "call_function")
LOWER = frame("torch._inductor.lowering", "wrapped")
GENERATED = frame(
    "cxyzq", "call", file="/home/u/.cache/i/xy/cxyzqkl3jd7x5rrkdsqs4kxbbj4qqq3hd2adwkkwzzab.py"
)


def outcome(*chain: dict, status: str = "failed", **extra) -> dict:
    return {"status": status, "case": "t.py::test", "exception_chain": list(chain), **extra}


def exc(type_: str, message: str, *frames: dict, relation: str | None = None) -> dict:
    return {"type": type_, "message": message, "relation": relation, "frames": list(frames)}


def test_root_exception_decides_not_the_outer_wrapper():
    chain = [
        exc("torch._dynamo.exc.BackendCompilerFailed", "backend raised", TEST, EVAL),
        exc("IndexError", "list index out of range", GRAPH, LOWER, relation="inner"),
    ]
    found = Classifier(CPU).classify(outcome(*chain))
    assert found.layer is Layer.LOWERING
    assert found.evidence["frames"]["frame"] == "torch._inductor.lowering:wrapped:1"
    assert found.signature == "IndexError: list index out of range"


def test_downstream_table_of_the_profile_maps_backend_modules():
    codegen = frame("torch_npu._inductor.codegen.triton", "codegen_kernel")
    chain = [exc("ValueError", "bad mask", TEST, EVAL, AOT, GRAPH, codegen)]
    assert Classifier(NPU).classify(outcome(*chain)).layer is Layer.CODEGEN
    # the cpu profile knows nothing of torch_npu: the innermost frame it knows is lowering
    assert Classifier(CPU).classify(outcome(*chain)).layer is Layer.LOWERING


def test_generated_code_and_wrappers_below_it_are_runtime():
    dispatch = frame("torch._functorch._aot_autograd.runtime_wrappers", "__torch_dispatch__")
    chain = [exc("RuntimeError", "kernel rejected", TEST, EVAL, GENERATED, dispatch)]
    found = Classifier(CPU).classify(outcome(*chain))
    assert found.layer is Layer.RUNTIME
    assert is_generated_code(GENERATED["file"])
    assert not is_generated_code(f"{SITE}/torch/_inductor/lowering.py")


def test_upstream_inductor_test_files_are_not_generated_code():
    # upstream's own test files are named test_torchinductor*.py; the cache is a directory
    assert not is_generated_code("/src/pytorch/test/inductor/test_torchinductor_opinfo.py")
    assert not is_generated_code("/src/pytorch/test/inductor/test_torchinductor.py")
    assert is_generated_code("/tmp/torchinductor_ci/ab/kernel_helpers.py")
    custom = "/data/ci-cache/inductor"  # a run's own TORCHINDUCTOR_CACHE_DIR
    assert not is_generated_code(f"{custom}/ab/wrapper.py")
    assert is_generated_code(f"{custom}/ab/wrapper.py", (custom,))
    test_frame = frame("test_torchinductor_opinfo", "test_comprehensive")
    test_frame["file"] = "/src/pytorch/test/inductor/test_torchinductor_opinfo.py"
    chain = [exc("AssertionError", "Tensor-likes are not close!", test_frame)]
    found = Classifier(CPU).classify(outcome(*chain))
    assert found.layer is not Layer.RUNTIME


def test_decomposition_call_site_files_a_user_decomposition_under_decomposition():
    site = frame("torch.fx.experimental.proxy_tensor", "maybe_handle_decomp")
    proxy = frame("torch.fx.experimental.proxy_tensor", "proxy_call")
    user = frame("my_backend.decomps", "my_decomp", file="/src/my_backend/decomps.py")
    chain = [exc("RuntimeError", "broken", TEST, EVAL, AOT, proxy, site, user)]
    assert chain_layer(chain, CPU).layer is Layer.DECOMPOSITION
    # without the call site, AOT tracing is AOT
    chain = [exc("RuntimeError", "broken", TEST, EVAL, AOT, proxy, user)]
    assert chain_layer(chain, CPU).layer is Layer.AOT


def test_a_rule_moves_the_layer_earlier_never_later():
    # MissingOperatorWithDecomp is raised in lowering but is a decomposition-table problem
    chain = [exc("torch._inductor.exc.MissingOperatorWithDecomp", "missing decomp", GRAPH)]
    found = Classifier(CPU).classify(outcome(*chain))
    assert found.layer is Layer.DECOMPOSITION
    assert found.category == "decomposition.not_selected"
    assert found.evidence["decided_by"] == "rule_earlier_than_frames"
    # a runtime rule cannot drag a Dynamo failure later
    dyn = frame("torch._dynamo.symbolic_convert", "step")
    chain = [exc("RuntimeError", "aclrtLaunchKernelWithHostArgs failed: 507035", TEST, dyn)]
    found = Classifier(NPU).classify(outcome(*chain))
    assert found.layer is Layer.DYNAMO
    assert found.category == "dynamo.unclassified"


def test_ladder_beats_frames():
    chain = [exc("RuntimeError", "boom", TEST, EVAL, GENERATED)]
    data = outcome(*chain, evidence={"ladder": {"layer": "decomposition"}})
    found = Classifier(CPU).classify(data)
    assert (found.layer, found.evidence["decided_by"]) == (Layer.DECOMPOSITION, "ladder")


def test_a_failure_that_never_entered_the_compiler_is_eager():
    aten = frame("torch._tensor", "__repr__")
    chain = [exc("RuntimeError", "shape '[2, 3]' is invalid for input of size 8", TEST, aten)]
    found = Classifier(CPU).classify(outcome(*chain))
    assert (found.layer, found.category) == (Layer.EAGER, "eager.unclassified")


def test_numerics_are_sub_classified_from_assert_close():
    cmp_frame = frame("torch.testing._comparison", "assert_close")
    big = (
        "Tensor-likes are not close!\n\nMismatched elements: 50 / 100 (50.0%)\n"
        "Greatest absolute difference: 46.0 at index (3,) (up to 1e-05 allowed)\n"
        "Greatest relative difference: 2.5 at index (3,) (up to 1.3e-06 allowed)"
    )
    small = big.replace("50 / 100 (50.0%)", "1 / 100 (1.0%)").replace("46.0", "0.0001")
    small = small.replace("2.5 at", "0.00002 at")
    found = Classifier(CPU).classify(outcome(exc("AssertionError", big, TEST, cmp_frame)))
    assert (found.layer, found.category) == (Layer.NUMERICS, "numerics.index_alias")
    assert found.evidence["numerics"]["fraction"] == 0.5
    assert found.evidence["numerics"]["max_abs"] == 46.0
    found = Classifier(CPU).classify(outcome(exc("AssertionError", small, TEST, cmp_frame)))
    assert found.category == "numerics.precision"
    data = outcome(exc("AssertionError", big, TEST, cmp_frame))
    data["case"] = "test_torchinductor.py::test_dropout_cpu"
    assert Classifier(CPU).classify(data).category == "numerics.rng"


def test_collection_errors_keep_the_runners_env_verdict():
    data = {
        "status": "error",
        "layer": "env",
        "category": "env.collection_error",
        "message": "ImportError: cannot import name 'cpp_prefix_path'",
    }
    found = Classifier(NPU).classify(data)
    assert (found.layer, found.category) == (Layer.ENV, "env.collection_error")


def test_crash_takes_the_stack_layer_of_the_runner():
    data = {"status": "crashed", "signal": "SIGSEGV", "stage": "call"}
    data["evidence"] = {"stack_layer": "codegen", "stack_frame": "torch._inductor.codegen.cpp:1"}
    found = Classifier(CPU).classify(data)
    assert (found.layer, found.category) == (Layer.CODEGEN, "crash.signal")


def test_apply_writes_the_outcome_fields():
    data = outcome(exc("RuntimeError", "boom", TEST, LOWER))
    Classifier(CPU).classify(data).apply(data)
    assert data["layer"] == "lowering" and data["confidence"] == 0.8
    assert data["evidence"]["triage"]["decided_by"] == "frames"


def test_classification_is_cheap_next_to_a_test_case():
    import time

    deep = [TEST, EVAL, *[AOT] * 40, GRAPH, *[frame("torch._inductor.ir", "realize")] * 60, LOWER]
    chain = [
        exc("torch._dynamo.exc.BackendCompilerFailed", "backend raised", TEST, EVAL),
        exc("RuntimeError", "AclNN_Parameter_Error(EZ1001): 0x7f00 DT_FLOAT", *deep),
    ]
    classifier = Classifier(NPU)
    began = time.perf_counter()
    for _ in range(200):
        classifier.classify(outcome(*chain))
    per_outcome = (time.perf_counter() - began) / 200
    assert per_outcome < 0.02  # ~1-2 ms measured; a case takes seconds


def test_an_unregistered_backend_name_is_registration_not_dynamo():
    lookup = frame("torch._dynamo.backends.registry", "lookup_backend")
    chain = [
        exc(
            "torch._dynamo.exc.InvalidBackend",
            "Invalid backend: 'npu_inductor', see `torch._dynamo.list_backends()` for"
            " available backends.",
            TEST,
            EVAL,
            lookup,
        )
    ]
    found = Classifier(NPU).classify(outcome(*chain))
    assert (found.layer, found.category) == (Layer.REGISTRATION, "registration.unknown_backend")


def test_a_device_used_after_a_fork_is_env_whatever_the_frames_say():
    cuda = frame("torch.cuda", "_lazy_init")
    chain = [
        exc(
            "RuntimeError",
            "Cannot re-initialize CUDA in forked subprocess. To use CUDA with multiprocessing,"
            " you must use the 'spawn' start method",
            TEST,
            EVAL,
            AOT,
            GRAPH,
            cuda,
        )
    ]
    found = Classifier(load_profile("cuda")).classify(outcome(*chain))
    assert (found.layer, found.category) == (Layer.ENV, "env.device_used_after_fork")
    assert "before_init" in found.evidence["rule"]["hint"]
