"""Fixtures of the bundle tests: real runs of real test files in a tmp project.

``project`` runs a handful of plain pytest cases (no torch) once per module through the
real ``instep run`` with the secrets :data:`API_TOKEN` and :data:`DB_PASSWORD` in its
environment (a case prints them, another puts them in its error message). ``bundle``
calls the real CLI in that project.
"""

from __future__ import annotations

import io
import json
import tarfile
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

import pytest

from instep.cli import run as cli_run

API_TOKEN = "abc123"
DB_PASSWORD = "hunter2pw"
DATABASE_URL = f"postgresql://u:{DB_PASSWORD}@h/db"
SECRETS = (API_TOKEN, DB_PASSWORD)

PLAIN_CASES = """
import ctypes
import os
import signal


def test_leaks_credentials():
    print("token is", os.environ["API_TOKEN"], "API_TOKEN=" + os.environ["API_TOKEN"])
    raise ConnectionError("cannot reach " + os.environ["DATABASE_URL"])


def test_same_cause_again():
    raise ConnectionError("cannot reach " + os.environ["DATABASE_URL"])


def test_segfault():
    ctypes.string_at(0)


def test_hangs():
    signal.pause()


def test_passes():
    pass
"""


@dataclass
class Result:
    code: int
    out: str
    err: str


@dataclass
class Project:
    root: Path
    db: Path

    def instep(self, *args: str) -> Result:
        out, err = io.StringIO(), io.StringIO()
        with pytest.MonkeyPatch.context() as mp:
            mp.chdir(self.root)
            with redirect_stdout(out), redirect_stderr(err):
                code = cli_run(list(args))
        return Result(code, out.getvalue(), err.getvalue())

    def bundle(self, target: str, *args: str, run: str = "plain") -> Result:
        return self.instep("bundle", target, "--run", run, "--db", str(self.db), *args)


@pytest.fixture(scope="module")
def secret_env():
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("API_TOKEN", API_TOKEN)
        mp.setenv("DATABASE_URL", DATABASE_URL)
        yield


@pytest.fixture(scope="module")
def project(tmp_path_factory, secret_env) -> Project:
    root = tmp_path_factory.mktemp("bundle-project")
    (root / "test_plain.py").write_text(PLAIN_CASES)
    proj = Project(root, root / "instep.db")
    result = proj.instep(
        "run", "test_plain.py", "--preimport", "none", "--timeout", "3", "--run", "plain",
        "--db", str(proj.db), "--workers", "2",
    )  # fmt: skip
    assert result.code == 1, result.err
    return proj


def bundle_files(directory: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(directory)): p.read_bytes()
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


def tar_files(archive: Path) -> dict[str, bytes]:
    with tarfile.open(archive, "r:gz") as tar:
        out = {}
        for member in tar.getmembers():
            if member.isfile():
                name = member.name.split("/", 1)[1]
                out[name] = tar.extractfile(member).read()  # type: ignore[union-attr]
        return out


def paths_of(result: Result) -> tuple[Path, Path]:
    """The bundle directory and archive the CLI printed (stdout: two lines)."""
    lines = result.out.strip().splitlines()
    assert len(lines) == 2, result.out + result.err
    return Path(lines[0]), Path(lines[1])


def index(directory: Path) -> dict:
    return json.loads((directory / "bundle.json").read_text())


def no_secret_in(files: dict[str, bytes]) -> list[str]:
    """``path: secret`` for every file holding a secret (an empty list is the goal)."""
    return [
        f"{name}: {secret}"
        for name, body in files.items()
        for secret in SECRETS
        if secret.encode() in body
    ]
