"""Numerics: mismatch statistics from messages and tensors; precision vs index/alias; RNG."""

from __future__ import annotations

import pytest

from instep.triage.numerics import (
    MismatchStats,
    is_random_case,
    is_reduction_case,
    mismatch_from_message,
    subcategory,
)

# what torch.testing.assert_close printed for as_strided_scatter in seed 000 6.11 (50 %, ~46)
SEED_AS_STRIDED = (
    "Tensor-likes are not close!\n\nMismatched elements: 32 / 64 (50.0%)\n"
    "Greatest absolute difference: 46.0 at index (5, 1) (up to 1e-05 allowed)\n"
    "Greatest relative difference: 1.0 at index (5, 1) (up to 1.3e-06 allowed)"
)


def test_statistics_are_read_from_the_message():
    stats = mismatch_from_message(SEED_AS_STRIDED)
    assert (stats.mismatched, stats.total, stats.max_abs, stats.max_rel) == (32, 64, 46.0, 1.0)
    assert stats.fraction == 0.5
    assert subcategory(stats) == "numerics.index_alias"
    assert mismatch_from_message("KeyError: 'cpu'") is None


def test_precision_nan_and_rng():
    few = MismatchStats(mismatched=2, total=1000, max_abs=3e-4, max_rel=2e-3)
    assert subcategory(few) == "numerics.precision"
    assert subcategory(MismatchStats(1, 10, None, None, "nan")) == "numerics.nan_inf"
    assert subcategory(few, "test_torchinductor.py::CpuTests::test_dropout2_cpu") == "numerics.rng"
    assert is_random_case("test_randint_distribution") and not is_random_case("test_tan_cpu")


def test_reductions_are_their_own_sub_class():
    """Seed 000 6.11: cumsum / max_min are checked for accumulator dtype, order, NaN."""
    scan = MismatchStats(mismatched=40, total=64, max_abs=3.0, max_rel=0.5)  # every later element
    assert subcategory(scan, "test_torchinductor.py::CpuTests::test_cumsum_cpu") == (
        "numerics.reduction"
    )
    assert subcategory(scan, "opinfo::max.reduction_with_dim::float16::0") == "numerics.reduction"
    assert subcategory(scan, "opinfo::as_strided_scatter::float32::0") == "numerics.index_alias"
    assert subcategory(scan, "test_maximum_cpu") == "numerics.index_alias"  # elementwise
    assert is_reduction_case("test_var_mean") and not is_reduction_case("test_summary")


torch = pytest.importorskip("torch")


def test_statistics_from_tensors_and_rng_agreement():
    from instep.triage.numerics import mismatch_from_tensors, rng_statistics_agree

    expected = torch.arange(64, dtype=torch.float32)
    wrong_index = expected.clone()
    wrong_index[::2] = expected.flip(0)[::2]  # half the elements read from the wrong place
    stats = mismatch_from_tensors(wrong_index, expected, rtol=1.3e-6, atol=1e-5)
    assert stats.fraction == 0.5 and subcategory(stats) == "numerics.index_alias"
    close = expected + torch.where(expected == 7, 1e-3, 0.0)
    stats = mismatch_from_tensors(close, expected, rtol=1.3e-6, atol=1e-5)
    assert stats.mismatched == 1 and subcategory(stats) == "numerics.precision"
    nan = expected.clone()
    nan[3] = float("nan")
    assert mismatch_from_tensors(nan, expected, 1e-6, 1e-5).nan_inf == "nan/inf in actual only"

    gen = torch.Generator().manual_seed(0)
    a = torch.rand(20_000, generator=gen)
    b = torch.rand(20_000, generator=gen)
    assert not torch.equal(a, b) and rng_statistics_agree(a, b)
    assert not rng_statistics_agree(a * 2, b)  # a wrong scale is caught
    assert not rng_statistics_agree(a + 0.05, b)  # a shifted mean is caught
