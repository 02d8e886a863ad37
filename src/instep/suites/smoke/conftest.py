"""Options and fixtures of the L0/L1 smoke suites (device and backend under test)."""

from __future__ import annotations

import pytest

from instep.suites.suite_options import SuiteSettings, add_options, settings


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


@pytest.fixture(scope="session")
def suite(pytestconfig: pytest.Config) -> SuiteSettings:
    return settings(pytestconfig)


@pytest.fixture(scope="session")
def device(suite: SuiteSettings) -> str:
    return suite.device


@pytest.fixture(scope="session")
def backend(suite: SuiteSettings) -> str:
    return suite.backend
