"""Alembic environment: migrate the connection that ``instep.store.database`` hands over.

Run only through :func:`instep.store.database.upgrade` (never with a URL of its own), so
SQLite locking and PostgreSQL advisory locks are applied around it.
"""

from __future__ import annotations

from alembic import context

from instep.store.schema import Base

connection = context.config.attributes["connection"]
context.configure(
    connection=connection,
    target_metadata=Base.metadata,
    render_as_batch=connection.dialect.name == "sqlite",
)
with context.begin_transaction():
    context.run_migrations()
