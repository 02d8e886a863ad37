"""The triad and the L5 harness, on real torch ops compiled through Dynamo (fullgraph).

The ``eager``/``aot_eager`` backends keep this fast while going through Dynamo, where a
naive OpInfo loop invents failures (seeded wrappers, random and undefined outputs); a
backend that corrupts its outputs must still be caught, at the compiled leg.
"""

from __future__ import annotations

import importlib.util

import pytest

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch not installed"),
]


@pytest.fixture
def counters():
    from torch._dynamo.utils import counters

    counters.clear()
    return counters


def _legs(counters) -> dict[str, str]:
    from instep.suites.case_record import read_case_figures

    flat = {f"instep.{k}": v for k, v in counters["instep"].items()}
    return read_case_figures({"counters": flat})["triad"]


def _corrupting_backend(gm, example_inputs):  # type: ignore[no-untyped-def]
    import torch

    def run(*args):  # type: ignore[no-untyped-def]
        return [
            o + 1 if isinstance(o, torch.Tensor) and o.is_floating_point() else o for o in gm(*args)
        ]

    return run


def _raising_backend(gm, example_inputs):  # type: ignore[no-untyped-def]
    raise NotImplementedError("no lowering for aten.add on this device")


def test_triad_records_every_leg_and_blames_the_right_one(counters):
    import torch

    from instep.suites.triad import CompiledMismatch, DeviceEagerMismatch, check_triad

    check_triad(lambda x: x * 2, [torch.ones(3)], "cpu", "eager")
    assert _legs(counters) == {"eager_cpu": "ok", "eager_device": "ok", "compiled_device": "ok"}

    counters.clear()
    with pytest.raises(CompiledMismatch, match="differs from eager cpu"):
        check_triad(lambda x: x * 2, [torch.ones(3)], "cpu", _corrupting_backend)
    assert _legs(counters)["compiled_device"] == "mismatch"

    counters.clear()
    with pytest.raises(Exception, match=r"no lowering for aten\.add") as info:
        check_triad(lambda x: x + 1, [torch.ones(3)], "cpu", _raising_backend)
    assert not isinstance(info.value, AssertionError)  # the compiler's own error, unwrapped
    assert _legs(counters)["compiled_device"] == "fail"

    calls = []

    def differs_on_second_call(x):  # type: ignore[no-untyped-def]
        calls.append(1)
        return x + len(calls)

    counters.clear()
    with pytest.raises(DeviceEagerMismatch):
        check_triad(differs_on_second_call, [torch.ones(2)], "cpu", "eager")
    assert _legs(counters) == {"eager_cpu": "ok", "eager_device": "mismatch"}


def test_enumerate_cases_limits_ops_and_filters_names():
    from instep.suites.opinfo.harness import enumerate_cases

    cases = enumerate_cases("cpu", ("float32", "int64"), limit=3)
    assert len({c.op_name for c in cases}) == 3
    assert {c.dtype for c in cases} == {"float32", "int64"}
    only = enumerate_cases("cpu", ("float32",), only=("nn.functional.dropout*",))
    assert [c.id for c in only][:1] == ["nn.functional.dropout-float32"]
    assert all(c.op_name.startswith("nn.functional.dropout") for c in only)


@pytest.mark.parametrize(
    "name",
    [
        "empty_like",
        "new_empty",
        "bernoulli",
        "nn.functional.dropout",
        "normal",
        "rand_like",
        "randint",
        "multinomial",
        "nonzero",
        "add",
    ],
)
def test_harness_invents_no_failure_on_random_undefined_and_dynamic_ops(name, counters):
    from instep.suites.opinfo.harness import OpCase, run_case

    assert run_case(OpCase(name, "float32"), "cpu", "eager") == 1
    assert _legs(counters)["compiled_device"] == "ok"


def test_harness_still_catches_a_wrong_backend(counters):
    from instep.suites.opinfo.harness import OpCase, run_case
    from instep.suites.triad import CompiledMismatch

    with pytest.raises(CompiledMismatch, match="add float32"):
        run_case(OpCase("add", "float32"), "cpu", _corrupting_backend)
    assert _legs(counters)["compiled_device"] == "mismatch"


def test_statistical_comparison_rejects_a_shifted_distribution():
    import torch

    from instep.suites.opinfo.harness import assert_statistically_close

    g = torch.Generator().manual_seed(0)
    a, b = torch.rand(4000, generator=g), torch.rand(4000, generator=g)
    assert_statistically_close(a, b)
    with pytest.raises(AssertionError, match="mean"):
        assert_statistically_close(a + 0.1, b)
    with pytest.raises(AssertionError, match="shape"):
        assert_statistically_close(a[:10], b)


def test_l5_marks_listed_cases_xfail_and_skips_cuda_only_ops(tmp_path):
    """The shipped L5 list turns upstream Dynamo limits into xfails (reason shown)."""
    import subprocess
    import sys

    from instep.suites.tiers import SUITES_DIR

    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-rxX",
            "-p",
            "no:cacheprovider",
            str(SUITES_DIR / "opinfo" / "test_l5_opinfo.py"),
            "--instep-opinfo-ops=allclose,add,jiterator_unary",
            "--instep-backend=eager",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "1 passed, 1 xfailed" in proc.stdout
    assert "XFAIL" in proc.stdout and "allclose" in proc.stdout and "dynamo" in proc.stdout
    assert "jiterator" not in proc.stdout.split("short test summary")[0]


def test_enumeration_for_a_device_runs_in_a_child_process():
    # importing op_db evaluates device capabilities; for a device that must not happen in
    # the fork server, so enumeration for any device but the CPU runs in a child
    import sys

    from instep.suites.opinfo.harness import enumerate_cases

    before = "torch.testing._internal.common_methods_invocations" in sys.modules
    cases = enumerate_cases("meta", ("float32",), ("abs", "add"), 0)
    assert [c.id for c in cases] == ["abs-float32", "add-float32"]
    assert ("torch.testing._internal.common_methods_invocations" in sys.modules) == before


def test_an_op_without_a_cpu_kernel_is_a_missing_reference_not_a_failure():
    """Found on the H200: _efficient_attention_forward has no CPU kernel, so the eager CPU
    reference cannot run; the case is skipped with why, never filed as a compiler error."""
    import torch

    from instep.suites.opinfo.harness import no_cpu_kernel

    q = torch.randn(1, 4, 1, 8)
    with pytest.raises(NotImplementedError) as real:
        torch.ops.aten._efficient_attention_forward(
            q, q, q, None, None, None, None, None, 0.0, 0, False
        )
    assert no_cpu_kernel(real.value)
    assert not no_cpu_kernel(NotImplementedError("aten::foo: not implemented for 'Half'"))


def test_arguments_the_op_needs_on_the_cpu_stay_there():
    """Found on the H200: tensor_split's tensor_indices_or_sections must stay on the CPU."""
    import torch

    from instep.suites.opinfo.harness import harness_data, to_device_except

    assert harness_data()["keep_on_cpu"]["tensor_split"] == [1]
    x, sections = torch.arange(6.0), torch.tensor([2, 4])
    args, kwargs = to_device_except([x, sections], {"dim": 0}, "meta", [1])
    assert args[0].device.type == "meta" and args[1].device.type == "cpu"
    assert kwargs == {"dim": 0}


def test_eigenvectors_compare_up_to_the_sign_of_each_column():
    """Found on the H200: linalg.eigh's eigenvectors differ in sign between CPU and CUDA."""
    import torch

    from instep.suites.opinfo.harness import assert_values_close, normalise_signs

    a = torch.randn(5, 5, generator=torch.Generator().manual_seed(0))
    values, vectors = torch.linalg.eigh(a @ a.T)
    flipped = vectors * torch.tensor([1.0, -1.0, 1.0, -1.0, -1.0])
    with pytest.raises(AssertionError):
        assert_values_close((values, flipped), (values, vectors))
    assert_values_close(
        normalise_signs((values, flipped), [1]), normalise_signs((values, vectors), [1])
    )
    # a real difference is still one
    wrong = vectors.clone()
    wrong[0, 0] += 0.5
    with pytest.raises(AssertionError):
        assert_values_close(
            normalise_signs((values, wrong), [1]), normalise_signs((values, vectors), [1])
        )
