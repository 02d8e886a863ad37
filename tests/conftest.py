"""Shared fixtures: run the real CLI in-process or as a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from instep.cli import run as cli_run


@dataclass
class Result:
    code: int
    out: str
    err: str


@pytest.fixture
def instep(capsys, monkeypatch, tmp_path):
    """Call the CLI in-process from a clean working directory; returns a Result."""
    monkeypatch.chdir(tmp_path)

    def call(*args: str) -> Result:
        code = cli_run(list(args))
        cap = capsys.readouterr()
        return Result(code, cap.out, cap.err)

    return call


@pytest.fixture
def instep_proc(tmp_path):
    """Call the installed console script as a real subprocess."""

    def call(*args: str, cwd: Path | None = None, env: dict | None = None) -> Result:
        proc = subprocess.run(
            [sys.executable, "-m", "instep", *args],
            cwd=cwd or tmp_path,
            capture_output=True,
            text=True,
            env={**os.environ, **(env or {})},
            timeout=300,
        )
        return Result(proc.returncode, proc.stdout, proc.stderr)

    return call


@pytest.fixture(scope="module")
def postgres_url():
    """A fresh database on the PostgreSQL server named by ``INSTEP_TEST_POSTGRES`` (CI starts
    one), dropped afterwards; the test is skipped when no server answers."""
    import uuid

    psycopg = pytest.importorskip("psycopg")
    server = os.environ.get(
        "INSTEP_TEST_POSTGRES", "postgresql://postgres:postgres@localhost:5432/postgres"
    )
    try:
        admin = psycopg.connect(server, autocommit=True, connect_timeout=3)
    except psycopg.OperationalError as exc:
        why = f"no PostgreSQL server reachable at {server}: {str(exc).splitlines()[0]}"
        if os.environ.get("INSTEP_REQUIRE_POSTGRES") == "1":  # CI: a failure, not a skip
            pytest.fail(why)
        pytest.skip(why)
    name = f"instep_test_{uuid.uuid4().hex[:8]}"
    admin.execute(f"CREATE DATABASE {name}")
    yield server.rsplit("/", 1)[0] + "/" + name
    admin.execute(f"DROP DATABASE {name} WITH (FORCE)")
    admin.close()
