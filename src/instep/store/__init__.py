"""The result store: runs, cases and outcomes in SQLite (default) or PostgreSQL.

``Store(target)`` opens (and migrates) a store; ``schema`` declares the tables,
``database`` handles URLs, SQLite locking and alembic, ``queries`` reads and writes,
``merge`` copies runs between stores. Nothing here runs tests.
"""

from __future__ import annotations

from instep.store.queries import OUTCOME_FIELDS, Store, new_run_name, outcome_dict, run_dict
from instep.store.schema import Case, Outcome, Run, RunCase

__all__ = [
    "OUTCOME_FIELDS",
    "Case",
    "Outcome",
    "Run",
    "RunCase",
    "Store",
    "new_run_name",
    "outcome_dict",
    "run_dict",
]
