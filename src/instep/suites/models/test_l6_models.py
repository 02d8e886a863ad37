"""L6: small models (MLP, CNN, transformer block, embedding + layernorm + loss), forward
and backward: correctness vs eager CPU, compile time, steady-state speedup vs eager and
peak memory, stored as outcome metrics (``instep show RUN --metrics``)."""

from __future__ import annotations

import pytest

from instep.suites.models.benchmark import check_model
from instep.suites.models.zoo import MODELS


@pytest.mark.parametrize("name", sorted(MODELS))
def test_model(name: str, suite) -> None:  # type: ignore[no-untyped-def]
    check_model(MODELS[name], suite.device, suite.backend, backward=True)
