"""Open a result store: a SQLite file (the default) or a PostgreSQL URL, migrated to head.

``open_engine(target)`` accepts a path (``.instep/instep.db``), a ``sqlite:///`` URL or a
``postgresql://`` URL (driven by psycopg 3, the ``postgres`` extra). SQLite is put in WAL
mode with a long busy timeout and ``BEGIN IMMEDIATE`` transactions, so several runners can
write one file at once: writers queue instead of failing. The schema is created and
upgraded by the alembic migrations shipped in ``instep.store.migrations``, under a lock
(SQLite's write lock, PostgreSQL's advisory lock) so concurrent first opens are safe.
This module knows connections and migrations; queries live in ``queries.py``.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from pathlib import Path

from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DatabaseError, OperationalError, ProgrammingError

from instep.errors import BadInput, require_module

log = logging.getLogger(__name__)

#: The newest migration; a store at this revision needs no alembic run.
HEAD = "0001"
_PG_LOCK_ID = 7_420_170_001
SQLITE_BUSY_MS = 120_000


def store_url(target: str | Path) -> str:
    """The SQLAlchemy URL of ``target``: a path, a ``sqlite:`` URL or a PostgreSQL URL."""
    raw = str(target)
    if raw.startswith(("postgresql://", "postgres://")):
        return "postgresql+psycopg://" + raw.split("://", 1)[1]
    if "://" in raw:
        try:
            make_url(raw)
        except ArgumentError as exc:
            raise BadInput(f"--db {raw!r}: not a database URL or path ({exc})") from exc
        return raw
    path = Path(raw).expanduser().resolve()
    if path.is_dir():
        raise BadInput(f"--db {raw}: is a directory, expected a SQLite file or a URL")
    path.parent.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{path}"


def describe(target: str | Path) -> str:
    """A printable form of ``target`` with any password hidden."""
    url = make_url(store_url(target))
    return url.render_as_string(hide_password=True)


def open_engine(target: str | Path) -> Engine:
    """An engine on ``target`` whose schema is at :data:`HEAD`."""
    url = store_url(target)
    if url.startswith("postgresql"):
        require_module("psycopg", "a PostgreSQL store", "pip install 'instep[postgres]'")
    engine = create_engine(url, future=True)
    if engine.dialect.name == "sqlite":
        _configure_sqlite(engine)
    try:
        if current_revision(engine) != HEAD:
            upgrade(engine)
    except DatabaseError as exc:  # OperationalError too; "file is not a database" is neither
        engine.dispose()
        reason = str(exc.orig).splitlines()[0] if exc.orig else str(exc)
        expected = "a SQLite store" if engine.dialect.name == "sqlite" else "a reachable store"
        shown = describe(target) if "://" in str(target) else str(target)  # no password shown
        raise BadInput(
            f"--db {shown}: cannot open the store: {reason} (expected {expected})"
        ) from exc
    return engine


def _configure_sqlite(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn, _record) -> None:  # type: ignore[no-untyped-def]
        dbapi_conn.isolation_level = None  # we issue BEGIN ourselves
        cur = dbapi_conn.cursor()
        cur.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_MS}")
        _switch_to_wal(cur)
        cur.execute("PRAGMA synchronous = NORMAL")
        cur.execute("PRAGMA foreign_keys = ON")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn) -> None:  # type: ignore[no-untyped-def]
        # Take the write lock up front: a deferred transaction that upgrades to a writer
        # fails at once with SQLITE_BUSY instead of waiting for the other writer.
        conn.exec_driver_sql("BEGIN IMMEDIATE")


def _switch_to_wal(cur: sqlite3.Cursor) -> None:
    """Put the file in WAL mode, waiting out other writers however long the busy timeout says.

    Leaving the rollback journal needs the exclusive lock. A connection that holds a read
    lock while another holds the write lock is refused at once (SQLite would deadlock
    otherwise), without calling the busy handler: two runners opening a new store at the
    same moment meet exactly this. So the refusal is retried here, with a growing pause.
    """
    deadline = time.monotonic() + SQLITE_BUSY_MS / 1000
    pause = 0.005
    while True:
        try:
            cur.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            busy = "locked" in str(exc) or "busy" in str(exc)
            if not busy or time.monotonic() + pause > deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.25)


def current_revision(engine: Engine) -> str | None:
    """The alembic revision the store is at, ``None`` for an empty database."""
    with engine.connect() as conn:
        try:
            return conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
        except (OperationalError, ProgrammingError):
            return None


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Run the shipped alembic migrations up to ``revision``, under a store-wide lock."""
    # alembic only when a migration runs: a current store opens without it
    from alembic import command
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(Path(__file__).with_name("migrations")))
    with engine.connect() as conn:
        if engine.dialect.name == "postgresql":
            conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": _PG_LOCK_ID})
            conn.commit()
        try:
            cfg.attributes["connection"] = conn
            log.debug("migrating %s to %s", engine.url, revision)
            command.upgrade(cfg, revision)
            conn.commit()
        finally:
            if engine.dialect.name == "postgresql":
                conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": _PG_LOCK_ID})
                conn.commit()
