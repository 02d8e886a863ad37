"""Fixtures for the doctor tests: a shared Inductor cache, and skips when torch is absent."""

from __future__ import annotations

import importlib.util

import pytest

needs_torch = pytest.mark.skipif(
    importlib.util.find_spec("torch") is None, reason="torch is not installed"
)


@pytest.fixture(scope="session")
def inductor_cache(tmp_path_factory) -> str:
    """One TORCHINDUCTOR_CACHE_DIR for every compiling test of the session."""
    return str(tmp_path_factory.mktemp("inductor_cache"))
