"""Options and fixtures of the L6 model suite (device and backend under test)."""

from __future__ import annotations

import pytest

from instep.suites.suite_options import SuiteSettings, add_options, settings


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


@pytest.fixture(scope="session")
def suite(pytestconfig: pytest.Config) -> SuiteSettings:
    return settings(pytestconfig)
