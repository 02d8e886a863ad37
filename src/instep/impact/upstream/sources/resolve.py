"""From a command-line word to a :class:`~instep.impact.upstream.sources.snapshot.Snapshot`.

:func:`open_snapshot` accepts the forms ``--upstream-old/--upstream-new/--downstream``
take: a directory (source tree), a ``.whl`` file, ``PATH@REV`` of a git repository, or
a pip requirement (``torch==2.13.0``) that is downloaded once into the cache. Anything
else is a one-line error that lists the forms. It only dispatches: reading each form
is the job of its own module.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from instep.errors import BadInput, MissingInput
from instep.impact.upstream.sources.git_repo import GitRepo, GitSnapshot
from instep.impact.upstream.sources.pip_spec import download_wheel, is_pip_requirement
from instep.impact.upstream.sources.snapshot import DEFAULT_MAX_BYTES, Snapshot, TreeSnapshot
from instep.impact.upstream.sources.wheel import WheelSnapshot

FORMS = (
    "a source directory, a .whl file, PATH@REV of a git repository, "
    "or a pip requirement such as torch==2.13.0"
)


def _looks_like_path(text: str) -> bool:
    return text.startswith(("/", ".", "~")) or "/" in text or "\\" in text


def open_snapshot(
    spec: str,
    cache_dir: Path,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    also: Callable[[str], bool] | None = None,
) -> Snapshot:
    """The snapshot ``spec`` names; close it with ``close()`` (or ``with``) when done.
    ``also``: further paths to list beside the source files (a downstream's native files)."""
    text = spec.strip()
    if not text:
        raise BadInput(f"empty source: expected {FORMS}")
    path = Path(text).expanduser()
    if path.exists():
        if path.is_dir():
            return TreeSnapshot(path, label=text, max_bytes=max_bytes, also=also)
        if path.suffix == ".whl":
            return WheelSnapshot(path, label=path.name, max_bytes=max_bytes, also=also)
        raise BadInput(f"{text} is a file but not a .whl wheel: expected {FORMS}")
    if "@" in text:
        repo_text, _, rev = text.rpartition("@")
        repo_path = Path(repo_text).expanduser()
        if repo_path.is_dir():
            if not rev:
                raise BadInput(f"{text} names no revision after '@': expected PATH@REV")
            repo = GitRepo(repo_path)
            return GitSnapshot(
                repo,
                rev,
                label=f"{repo_path.name}@{rev}",
                max_bytes=max_bytes,
                owns_repo=True,
                also=also,
            )
        if repo_text and _looks_like_path(repo_text):
            raise MissingInput(f"git repository path does not exist: {repo_path} (from {text})")
    if is_pip_requirement(text):
        wheel = download_wheel(text, cache_dir)
        return WheelSnapshot(wheel, label=text, max_bytes=max_bytes, also=also)
    if _looks_like_path(text) or text.endswith(".whl"):
        raise MissingInput(f"path does not exist: {text}")
    raise BadInput(f"cannot read {text!r} as a source: expected {FORMS}")
