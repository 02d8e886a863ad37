"""Build small, real git repositories in temporary folders for tests.

``RepoBuilder(path)`` runs the real ``git`` CLI with a fixed identity and dates, so
shas are deterministic given the same operations. Tests of any impact step may reuse it.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

_ENV = {
    "GIT_AUTHOR_NAME": "Test Author",
    "GIT_AUTHOR_EMAIL": "author@example.invalid",
    "GIT_COMMITTER_NAME": "Test Committer",
    "GIT_COMMITTER_EMAIL": "committer@example.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
    "LC_ALL": "C",
}


class RepoBuilder:
    """A git work tree at ``path``; write files, commit, tag, revert."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        self._tick = 0
        self.git("init", "-q", "-b", "main")

    def git(self, *args: str) -> str:
        self._tick += 1
        stamp = f"2026-01-01T00:{self._tick // 60:02d}:{self._tick % 60:02d}+00:00"
        env = {**os.environ, **_ENV, "GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp}
        proc = subprocess.run(
            ["git", "-c", "commit.gpgsign=false", "-c", "core.autocrlf=false", *args],
            cwd=self.path,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"git {' '.join(args)} failed: {proc.stderr.strip()}")
        return proc.stdout.strip()

    def write(self, rel: str, content: str | bytes) -> Path:
        file = self.path / rel
        file.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, str):
            content = content.encode()
        file.write_bytes(content)
        return file

    def remove(self, rel: str) -> None:
        self.git("rm", "-q", rel)

    def move(self, old: str, new: str) -> None:
        (self.path / new).parent.mkdir(parents=True, exist_ok=True)
        self.git("mv", old, new)

    def commit(self, message: str, *, allow_empty: bool = False) -> str:
        self.git("add", "-A")
        extra = ["--allow-empty"] if allow_empty else []
        self.git("commit", "-q", *extra, "-m", message)
        return self.git("rev-parse", "HEAD")

    def tag(self, name: str, rev: str = "HEAD") -> None:
        self.git("tag", name, rev)

    def revert(self, sha: str, message: str | None = None) -> str:
        """``git revert`` (its message, or ``message`` as the whole message)."""
        self.git("revert", "--no-edit", "--no-commit", sha)
        if message is None:
            self.git("commit", "-q", "--no-edit")
        else:
            self.git("commit", "-q", "-m", message)
        return self.git("rev-parse", "HEAD")


def impact_of_one_commit(
    root: Path,
    path: str,
    before: str,
    after: str,
    message: str,
    downstream: dict[str, str],
) -> dict:
    """`instep impact --format json` of one upstream commit (``path``: ``before`` ->
    ``after``, tags v1..v2) on a downstream tree of ``downstream`` files (a ``torch_npu``
    package; its ``__init__.py`` files are added)."""
    return impact_of_commit(root, {path: before}, {path: after}, message, downstream)


def impact_of_commit(
    root: Path,
    before: dict[str, str],
    after: dict[str, str],
    message: str,
    downstream: dict[str, str],
    fmt: str = "json",
    extra_args: tuple[str, ...] = (),
) -> Any:
    """As :func:`impact_of_one_commit`, for an upstream of several files: ``before``
    holds the files at v1, ``after`` the files the commit writes. Another ``fmt`` (md,
    html) returns the report's text; ``extra_args`` go to ``instep impact`` as well."""
    import json

    from instep.cli import run as cli_run

    up = RepoBuilder(root / "pytorch")
    for package in ("torch/__init__.py", "torch/_inductor/__init__.py"):
        up.write(package, "")
    for path, text in before.items():
        up.write(path, text)
    up.commit("base")
    up.tag("v1")
    for path, text in after.items():
        up.write(path, text)
    up.commit(message)
    up.tag("v2")
    down = root / "torch_npu"
    files = {"torch_npu/__init__.py": "", "torch_npu/_inductor/__init__.py": "", **downstream}
    for rel, text in files.items():
        (down / rel).parent.mkdir(parents=True, exist_ok=True)
        (down / rel).write_text(text, encoding="utf-8")
    out = root / f"impact.{fmt}"
    args = ["impact", "--upstream-git", str(up.path), "--range", "v1..v2"]
    args += ["--downstream", str(down), "--format", fmt, "--out", str(out), "--no-cache"]
    assert cli_run([*args, *extra_args]) == 0
    text = out.read_text(encoding="utf-8")
    return json.loads(text) if fmt == "json" else text
