"""The error policy's vocabulary.

An :class:`InstepError` is an *expected* failure: bad input, a missing file, a missing
optional dependency. The CLI prints its message as one line on stderr and exits 2.
Anything else that escapes is a bug: the CLI prints the traceback and asks for a report.
Library code raises these; it never prints or exits.
"""

from __future__ import annotations

import importlib
from typing import Any


class InstepError(Exception):
    """An expected error whose message is one line naming the input and what was expected."""

    exit_code = 2

    def __init__(self, message: str) -> None:
        # Collapse to one line: the message is what the user sees, verbatim.
        super().__init__(" ".join(str(message).split()))


class BadInput(InstepError):
    """An argument, file or configuration value is malformed."""


class MissingInput(InstepError):
    """A path, revision, run or package named by the user does not exist."""


class MissingDependency(InstepError):
    """An optional dependency (torch, ray, psycopg, ...) that this command needs is absent."""

    def __init__(self, package: str, needed_for: str, hint: str | None = None) -> None:
        extra = f"; {hint}" if hint else ""
        super().__init__(f"{needed_for} needs '{package}', which is not installed{extra}")
        self.package = package


def require_module(name: str, needed_for: str, hint: str | None = None) -> Any:
    """``import name``, or a one-line :class:`MissingDependency` naming what needs it."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise MissingDependency(name.split(".", 1)[0], needed_for, hint) from exc
