"""The warnings logged under ``instep.impact`` during one analysis, collected so that the
report can list them (files skipped, workers that could not start). Logging only.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager


class _WarningCollector(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@contextmanager
def collect_warnings() -> Iterator[list[str]]:
    handler = _WarningCollector()
    logger = logging.getLogger("instep.impact")
    logger.addHandler(handler)
    try:
        yield handler.messages
    finally:
        logger.removeHandler(handler)
