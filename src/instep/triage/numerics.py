"""Numerics: how a compiled result differs from eager, and what kind of error that is.

:func:`mismatch_from_message` reads the statistics ``torch.testing.assert_close`` prints
(mismatched elements, greatest absolute / relative difference, NaN/inf notes);
:func:`mismatch_from_tensors` computes the same from two tensors (the self-test and the
backend ladder use it). :func:`subcategory` files a mismatch (seed 000, 6.11):

* ``numerics.nan_inf``: NaN/inf appear on one side only;
* ``numerics.index_alias``: a large fraction of elements is wrong (>= 10 %) or the error
  is large relative to the values (max relative error >= 1): an index, stride, alias or
  mutation bug, never a tolerance question;
* ``numerics.reduction``: the case names a reduction or scan (cumsum, max/min, sum,
  mean, var, norm, logsumexp, softmax...): accumulator dtype, reduction order and NaN
  semantics first, whatever the fraction (a scan's wrong accumulator spoils every later
  element);
* ``numerics.precision``: few elements, small errors: math intrinsics, accumulation order
  or dtype promotion;
* ``numerics.rng``: a random op, which must be compared statistically
  (:func:`rng_statistics_agree`), not element by element.

Tolerances are never loosened here: the test's verdict stands; this only explains it.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass
from typing import Any

#: Above this fraction of mismatched elements a mismatch is structural, not precision.
INDEX_FRACTION = 0.10
#: At or above this max relative error a mismatch is structural.
INDEX_RELATIVE = 1.0
_RNG_WORDS = re.compile(
    r"(?<![a-z])(rand[a-z]*|dropout|bernoulli|multinomial|normal|uniform|randperm)(?![a-z])"
)

_REDUCTION_WORDS = re.compile(
    r"(?<![a-z])(cum(?:sum|prod|max|min)|logcumsumexp|sum|nansum|prod|mean|nanmean|var|std"
    r"|var_mean|std_mean|norm|(?:vector_|matrix_)?norm|logsumexp|a?max|a?min|argmax|argmin"
    r"|max_min|aminmax|softmax|log_softmax|reduction|reduce|scan)(?![a-z])"
)
_MISMATCHED = re.compile(r"Mismatched elements: (\d+) / (\d+)")
_ABS = re.compile(r"Greatest absolute difference: (\S+)")
_REL = re.compile(r"Greatest relative difference: (\S+)")


@dataclass
class MismatchStats:
    mismatched: int | None = None
    total: int | None = None
    max_abs: float | None = None
    max_rel: float | None = None
    nan_inf: str | None = None  # e.g. "nan in actual only"

    @property
    def fraction(self) -> float | None:
        if self.mismatched is None or not self.total:
            return None
        return self.mismatched / self.total

    def as_evidence(self) -> dict[str, Any]:
        data = {k: v for k, v in asdict(self).items() if v is not None}
        if self.fraction is not None:
            data["fraction"] = round(self.fraction, 6)
        return data


def _number(text: str) -> float | None:
    try:
        return float(text.rstrip(".,"))
    except ValueError:
        return None


def mismatch_from_message(message: str) -> MismatchStats | None:
    """The statistics of an ``assert_close`` message; ``None`` when it holds none."""
    stats = MismatchStats()
    found = False
    if m := _MISMATCHED.search(message):
        stats.mismatched, stats.total = int(m[1]), int(m[2])
        found = True
    if m := _ABS.search(message):
        stats.max_abs = _number(m[1])
        found = True
    if m := _REL.search(message):
        stats.max_rel = _number(m[1])
        found = True
    lowered = message.lower()
    if "nan" in lowered.replace("nanoseconds", "") and re.search(r"\bnan\b", lowered):
        stats.nan_inf = "nan"
        found = True
    elif re.search(r"\binf\b", lowered):
        stats.nan_inf = "inf"
        found = True
    return stats if found else None


def mismatch_from_tensors(actual: Any, expected: Any, rtol: float, atol: float) -> MismatchStats:
    """Statistics of ``actual`` vs ``expected`` (torch tensors of one shape)."""
    # torch is the user's: only in the process that runs the case
    import torch

    a = actual.detach().to(torch.float64).flatten()
    e = expected.detach().to(torch.float64).flatten()
    a_bad, e_bad = ~torch.isfinite(a), ~torch.isfinite(e)
    nan_inf = None
    if bool((a_bad != e_bad).any()):
        nan_inf = (
            "nan/inf in actual only" if bool((a_bad & ~e_bad).any()) else "nan/inf in expected only"
        )
    both = ~a_bad & ~e_bad
    diff = (a - e).abs()
    close = (diff <= atol + rtol * e.abs()) | (a_bad & e_bad & (a.isnan() == e.isnan()))
    mismatched = int((~close).sum())
    finite_diff = diff[both]
    max_abs = float(finite_diff.max()) if finite_diff.numel() else 0.0
    rel = finite_diff / e[both].abs().clamp_min(1e-12)
    max_rel = float(rel.max()) if rel.numel() else 0.0
    return MismatchStats(mismatched, int(a.numel()), max_abs, max_rel, nan_inf)


def is_random_case(text: str) -> bool:
    """Whether a case name or message names a random op (dropout, rand, bernoulli...)."""
    return bool(_RNG_WORDS.search(text.lower()))


def is_reduction_case(text: str) -> bool:
    """Whether a case name names a reduction or scan (seed 000 6.11: cumsum, max_min)."""
    return bool(_REDUCTION_WORDS.search(text.lower()))


def subcategory(stats: MismatchStats | None, case_text: str = "") -> str:
    """The ``numerics.*`` category of a mismatch (see the module doc)."""
    if is_random_case(case_text):
        return "numerics.rng"
    if stats is None:
        return "numerics.mismatch"
    if stats.nan_inf:
        return "numerics.nan_inf"
    if is_reduction_case(case_text):
        return "numerics.reduction"
    fraction = stats.fraction
    if (fraction is not None and fraction >= INDEX_FRACTION) or (
        stats.max_rel is not None and (math.isinf(stats.max_rel) or stats.max_rel >= INDEX_RELATIVE)
    ):
        return "numerics.index_alias"
    return "numerics.precision"


def rng_statistics_agree(actual: Any, expected: Any, sigmas: float = 6.0) -> bool:
    """Whether two samples of one random op agree in distribution (mean, std, range).

    Compares the means within ``sigmas`` standard errors, the standard deviations within
    25 %, and the value ranges; element-wise equality is not required (seed 000, 6.11).
    """
    # torch is the user's: only in the process that runs the case
    import torch

    a = actual.detach().to(torch.float64).flatten()
    e = expected.detach().to(torch.float64).flatten()
    if a.numel() < 2 or e.numel() < 2:
        return bool(torch.equal(a, e))
    std_a, std_e = float(a.std()), float(e.std())
    err = math.sqrt(std_a**2 / a.numel() + std_e**2 / e.numel()) or 1e-12
    if abs(float(a.mean()) - float(e.mean())) > sigmas * err:
        return False
    if max(std_a, std_e) > 0 and abs(std_a - std_e) > 0.25 * max(std_a, std_e):
        return False
    span = max(float(e.max() - e.min()), 1e-12)
    return (
        float(a.min()) >= float(e.min()) - 0.1 * span
        and float(a.max()) <= float(e.max()) + 0.1 * span
    )
