"""Options of the L5 OpInfo suite (device, backend, limit, dtypes, samples, grad)."""

from __future__ import annotations

import pytest

from instep.suites.suite_options import add_options


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)
