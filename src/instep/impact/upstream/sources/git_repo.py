"""A local git clone as a source of change units: one unit per commit of a range.

:class:`GitRepo` wraps the ``git`` CLI (no library dependency): revision resolution,
one ``git log`` call for a whole range (metadata plus raw name-status with blob ids)
and one long-lived ``git cat-file --batch`` process for every blob read, closed
deterministically by :meth:`GitRepo.close` / ``with``. :class:`GitSnapshot` is one
revision's tree as a :class:`~instep.impact.upstream.sources.snapshot.Snapshot` (blob ids as
digests). :func:`iter_commits` yields :class:`CommitUnit` oldest first, with PR numbers
and revert references read from the messages; :func:`mark_reverts` links reverts to the
commits they revert. Nothing here writes to the repository or checks anything out.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from instep.errors import BadInput, InstepError, MissingDependency, MissingInput
from instep.impact.upstream.sources.commit_message import read_message
from instep.impact.upstream.sources.snapshot import (
    DEFAULT_MAX_BYTES,
    FileChange,
    binary_side,
    is_source_path,
)

log = logging.getLogger(__name__)

# Settings that make git's output parseable whatever the user's configuration says.
_GIT_CONFIG = (
    "-c", "color.ui=false",
    "-c", "core.quotepath=false",
    "-c", "log.showSignature=false",
    "-c", "diff.noprefix=false",
)  # fmt: skip
_RECORD_START = re.compile(rb"\x1e(?=[0-9a-f]{40,64}\x1f)")
# One record per commit: sha, parents, author, author date, subject, body; then raw diff.
_LOG_FORMAT = "%x1e%H%x1f%P%x1f%an <%ae>%x1f%aI%x1f%s%x1f%b%x1f"


def _git_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update({"LC_ALL": "C", "LANG": "C", "GIT_TERMINAL_PROMPT": "0", "GIT_PAGER": "cat"})
    return env


def _last_line(text: bytes | str) -> str:
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


def _no_git() -> MissingDependency:
    return MissingDependency("git", "reading a git repository", "install the git CLI")


def _check_rev(rev: str) -> str:
    rev = rev.strip()
    if not rev or rev.startswith("-") or any(c in rev for c in "\0\n\r"):
        raise BadInput(f"not a git revision: {rev!r}")
    return rev


class _CatFile:
    """One ``git cat-file --batch`` process; blobs by id, in order, until closed."""

    def __init__(self, repo_path: Path) -> None:
        try:
            self.proc = subprocess.Popen(
                ["git", *_GIT_CONFIG, "-C", str(repo_path), "cat-file", "--batch"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env=_git_env(),
            )
        except FileNotFoundError:
            raise _no_git() from None
        self.pid = os.getpid()  # the process that talks to it
        self._finalizer = weakref.finalize(self, _stop_process, self.proc)

    def read(self, object_id: str) -> tuple[str, bytes]:
        stdin, stdout = self.proc.stdin, self.proc.stdout
        assert stdin is not None and stdout is not None
        try:
            stdin.write(object_id.encode("ascii") + b"\n")
            stdin.flush()
            header = stdout.readline()
        except (BrokenPipeError, OSError):
            header = b""
        if not header:
            raise InstepError(f"git cat-file stopped while reading object {object_id}")
        parts = header.split()
        if len(parts) != 3:
            raise MissingInput(f"git object {object_id} is missing from the repository")
        _, kind, size_text = parts
        size = int(size_text)
        data = stdout.read(size)
        stdout.read(1)  # the newline after the content
        if len(data) != size:
            raise InstepError(f"git cat-file returned a short read for object {object_id}")
        return kind.decode("ascii"), data

    def close(self) -> None:
        self._finalizer()

    def forget(self) -> None:
        """Drop it without stopping it (a forked child leaves its parent's process be)."""
        self._finalizer.detach()


def _stop_process(proc: subprocess.Popen) -> None:
    try:
        if proc.stdin is not None:
            proc.stdin.close()
        proc.wait(timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        proc.kill()
        proc.wait()
    finally:
        if proc.stdout is not None:
            proc.stdout.close()


class GitRepo:
    """A local git repository (work tree top level or bare), read through the git CLI."""

    def __init__(self, path: Path) -> None:
        path = Path(path).expanduser()
        if not path.exists():
            raise MissingInput(f"git repository path does not exist: {path}")
        if not path.is_dir():
            raise BadInput(f"git repository path is not a directory: {path}")
        self.path = path
        self._cat: _CatFile | None = None
        proc = self.git("rev-parse", "--is-bare-repository", check=False)
        if proc.returncode != 0:
            raise BadInput(
                f"{path} is not a git repository (expected a local clone): "
                f"{_last_line(proc.stderr)}"
            )
        bare = proc.stdout.decode("utf-8", "replace").strip() == "true"
        # (asked apart: git fails --show-toplevel in a bare repository)
        proc = self.git("rev-parse", "--show-toplevel", check=False) if not bare else proc
        lines = ["", *proc.stdout.decode("utf-8", "replace").splitlines()]
        if not bare and len(lines) > 1:
            top = Path(lines[1].strip())
            if top.resolve() != path.resolve():
                raise BadInput(
                    f"{path} is inside the git repository {top}, not its top level; "
                    f"pass {top} instead"
                )

    def __repr__(self) -> str:
        return f"GitRepo({str(self.path)!r})"

    # -- plumbing ------------------------------------------------------------------
    def git(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[bytes]:
        """Run ``git ARGS`` here; with ``check``, a failure is a BadInput with git's reason."""
        try:
            proc = subprocess.run(
                ["git", *_GIT_CONFIG, "-C", str(self.path), *args],
                capture_output=True,
                env=_git_env(),
            )
        except FileNotFoundError:
            raise _no_git() from None
        if check and proc.returncode != 0:
            raise BadInput(f"git {args[0]} failed in {self.path}: {_last_line(proc.stderr)}")
        return proc

    def resolve(self, rev: str) -> str:
        """The full commit sha that ``rev`` names; MissingInput naming ``rev`` otherwise."""
        rev = _check_rev(rev)
        proc = self.git("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}", check=False)
        sha = proc.stdout.decode("ascii", "replace").strip()
        if proc.returncode != 0 or not re.fullmatch(r"[0-9a-f]{40,64}", sha):
            raise MissingInput(f"unknown revision '{rev}' in git repository {self.path}")
        return sha

    def is_ancestor(self, ancestor: str, descendant: str) -> bool:
        proc = self.git("merge-base", "--is-ancestor", ancestor, descendant, check=False)
        return proc.returncode == 0

    def read_object(self, object_id: str) -> bytes:
        """Content of a blob (or any object) through the one cat-file process (one per
        process: a forked child, such as a join pass, starts its own)."""
        if self._cat is not None and self._cat.pid != os.getpid():
            self._cat.forget()
            self._cat = None
        if self._cat is None:
            self._cat = _CatFile(self.path)
        return self._cat.read(object_id)[1]

    def close(self) -> None:
        """Stop the cat-file process; the repository stays usable (it restarts on demand)."""
        if self._cat is not None:
            self._cat.close()
            self._cat = None

    def __enter__(self) -> GitRepo:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- trees ---------------------------------------------------------------------
    def ls_tree(self, sha: str) -> list[tuple[str, str, int]]:
        """``(path, blob id, size)`` of the regular files in commit ``sha``'s tree."""
        out = self.git("ls-tree", "-r", "-l", "-z", "--full-tree", sha).stdout
        entries: list[tuple[str, str, int]] = []
        for record in out.split(b"\0"):
            if not record:
                continue
            meta, _, path = record.partition(b"\t")
            mode, kind, object_id, size = meta.split()
            if kind != b"blob" or mode == b"120000":  # symlinks are not files
                continue
            entries.append((path.decode("utf-8", "surrogateescape"), object_id.decode(), int(size)))
        return entries


class GitSnapshot:
    """The source files (``*.py``, C shim headers) of one revision; digests are git blob
    ids (``git:<id>``)."""

    def __init__(
        self,
        repo: GitRepo,
        rev: str,
        *,
        label: str | None = None,
        max_bytes: int = DEFAULT_MAX_BYTES,
        owns_repo: bool = False,
        also: Callable[[str], bool] | None = None,
    ) -> None:
        self.repo = repo
        self.rev = rev
        self.sha = repo.resolve(rev)
        self.label = label if label is not None else f"{repo.path.name}@{rev}"
        self.max_bytes = max_bytes
        self._owns_repo = owns_repo
        self.also = also  # further paths to list (a downstream's yaml and C++ files)
        self._blobs: dict[str, str] | None = None

    def __repr__(self) -> str:
        return f"GitSnapshot({self.label!r})"

    def _tree(self) -> dict[str, str]:
        if self._blobs is None:
            blobs: dict[str, str] = {}
            for path, object_id, size in self.repo.ls_tree(self.sha):
                if not (is_source_path(path) or (self.also and self.also(path))):
                    continue
                if size > self.max_bytes:
                    log.warning(
                        "skipping %s at %s: %d bytes is over the %d-byte limit",
                        path,
                        self.label,
                        size,
                        self.max_bytes,
                    )
                    continue
                blobs[path] = object_id
            self._blobs = blobs
        return self._blobs

    def paths(self) -> list[str]:
        return sorted(self._tree())

    def digest(self, path: str) -> str:
        return "git:" + self._tree()[path]

    def read(self, path: str) -> bytes:
        return self.repo.read_object(self._tree()[path])

    def close(self) -> None:
        if self._owns_repo:
            self.repo.close()

    def __enter__(self) -> GitSnapshot:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# -- commits -----------------------------------------------------------------------


@dataclass
class CommitUnit:
    """One commit of a range: metadata, PR, revert links and its changed Python files."""

    sha: str
    subject: str
    body: str
    author: str
    date: str  # author date, ISO 8601
    pr: int | None  # 'Pull Request resolved: .../pull/N' or '(#N)'
    reverts_sha: str | None  # this commit reverts ... (full sha once mark_reverts found it)
    reverts_pr: int | None
    reverted_by: str | None  # filled by mark_reverts: sha of a later revert
    files: list[FileChange]  # source files only (*.py, C shim headers)
    test_files: list[str]  # changed paths under test/ or named test_*.py
    parents: list[str] = field(default_factory=list)
    reverts_subject: str | None = None  # the quoted subject of 'Revert "..."'

    @property
    def is_revert(self) -> bool:
        return bool(self.reverts_sha or self.reverts_pr or self.reverts_subject)


@dataclass
class _RawChange:
    status: str  # 'A', 'M', 'D', 'R', 'C', 'T'
    old_blob: str
    new_blob: str
    path: str
    old_path: str | None


@dataclass
class _RawCommit:
    sha: str
    parents: list[str]
    author: str
    date: str
    subject: str
    body: str
    changes: list[_RawChange]


def is_test_path(path: str) -> bool:
    """Under a ``test/`` (or ``tests/``) directory, or named ``test_*.py``."""
    parts = path.split("/")
    name = parts[-1]
    return bool({"test", "tests"} & set(parts[:-1])) or (
        name.startswith("test_") and name.endswith(".py")
    )


def parse_range(repo: GitRepo, rev_range: str) -> tuple[str, str, str, str]:
    """``A..B`` -> (A, B, sha of A, sha of B); one-line errors for anything else."""
    text = rev_range.strip()
    if "..." in text or text.count("..") != 1:
        raise BadInput(f"range must have the form A..B (two revisions), got {rev_range!r}")
    start, end = (part.strip() for part in text.split(".."))
    if not start:
        raise BadInput(f"range {rev_range!r} has no start revision; expected A..B")
    end = end or "HEAD"
    return start, end, repo.resolve(start), repo.resolve(end)


def _parse_log(out: bytes) -> list[_RawCommit]:
    commits: list[_RawCommit] = []
    for record in _RECORD_START.split(out):
        if not record.strip(b"\0\n"):
            continue
        fields = record.split(b"\x1f", 5)
        if len(fields) < 6:
            continue
        sha, parents, author, date, subject = (f.decode("utf-8", "replace") for f in fields[:5])
        body, _, raw = fields[5].rpartition(b"\x1f")
        commits.append(
            _RawCommit(
                sha=sha,
                parents=parents.split(),
                author=author,
                date=date,
                subject=subject,
                body=body.decode("utf-8", "replace").strip("\n"),
                changes=_parse_raw(raw),
            )
        )
    return commits


def _parse_raw(raw: bytes) -> list[_RawChange]:
    tokens = raw.split(b"\0")
    changes: list[_RawChange] = []
    i = 0
    while i < len(tokens):
        token = tokens[i].strip(b"\n")
        i += 1
        if not token.startswith(b":"):
            continue
        meta = token[1:].split()
        if len(meta) < 5:
            continue
        old_blob, new_blob, status = meta[2].decode(), meta[3].decode(), meta[4].decode()
        if status[0] in "RC":
            old_path, path = tokens[i], tokens[i + 1]
            i += 2
            changes.append(_RawChange(status[0], old_blob, new_blob, _path(path), _path(old_path)))
        else:
            path = tokens[i]
            i += 1
            changes.append(_RawChange(status[0], old_blob, new_blob, _path(path), None))
    return changes


def _path(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")


def iter_commits(
    repo: GitRepo,
    rev_range: str,
    *,
    first_parent: bool = False,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> Iterator[CommitUnit]:
    """The commits of ``A..B``, oldest first, each with its changed source files.

    The range is validated now (unknown revisions, reversed or empty ranges raise a
    one-line error at call time); file contents are read lazily, commit by commit,
    through the repository's one ``cat-file`` process. ``first_parent`` follows only
    first parents and diffs merges against their first parent (one unit per merge);
    otherwise merge commits carry no files. Renames are reported with ``old_path``.
    """
    start, end, start_sha, end_sha = parse_range(repo, rev_range)
    args = [
        "log", "--reverse", "-z", "--raw", "--no-abbrev", "-M", "--no-color",
        "--no-ext-diff", "--no-textconv", f"--format={_LOG_FORMAT}",
    ]  # fmt: skip
    if first_parent:
        args += ["--first-parent", "--diff-merges=first-parent"]
    proc = repo.git(*args, f"{start_sha}..{end_sha}", "--", check=False)
    if proc.returncode != 0:
        raise BadInput(f"git log {rev_range} failed in {repo.path}: {_last_line(proc.stderr)}")
    raw_commits = _parse_log(proc.stdout)
    if not raw_commits:
        if start_sha != end_sha and repo.is_ancestor(end_sha, start_sha):
            raise BadInput(
                f"range {rev_range} is reversed: {end} is an ancestor of {start}; "
                f"did you mean {end}..{start}?"
            )
        raise BadInput(f"range {rev_range} holds no commits in {repo.path}")
    at_start = None
    if first_parent and any(len(raw.parents) > 1 for raw in raw_commits):
        at_start = {path: blob for path, blob, _ in repo.ls_tree(start_sha)}
    return _commit_units(repo, raw_commits, max_bytes, at_start)


def _commit_units(
    repo: GitRepo,
    raw_commits: list[_RawCommit],
    max_bytes: int,
    at_start: dict[str, str] | None = None,
) -> Iterator[CommitUnit]:
    """``at_start``: the range start's blobs (first-parent mode). A merge of a maintenance
    branch that the start was tagged on (werkzeug's "Merge branch '2.0.x'" after 2.0.3)
    brings files the start already had: such a file, equal after the merge to the start's,
    is no change of the range and is left out of the merge's unit."""
    for raw in raw_commits:
        facts = read_message(raw.subject, raw.body)
        files: list[FileChange] = []
        tests: list[str] = []
        for change in raw.changes:
            merged_in = at_start is not None and len(raw.parents) > 1
            if merged_in and at_start.get(change.path) == change.new_blob:  # type: ignore[union-attr]
                continue
            if is_test_path(change.path):
                tests.append(change.path)
            file_change = _file_change(repo, raw.sha, change, max_bytes)
            if file_change is not None:
                files.append(file_change)
        yield CommitUnit(
            sha=raw.sha,
            subject=raw.subject,
            body=raw.body,
            author=raw.author,
            date=raw.date,
            pr=facts.pr,
            reverts_sha=facts.reverts_sha,
            reverts_pr=facts.reverts_pr,
            reverted_by=None,
            files=files,
            test_files=tests,
            parents=raw.parents,
            reverts_subject=facts.reverts_subject,
        )


def _is_object(object_id: str) -> bool:
    return object_id.strip("0") != ""  # all zeros: the side that does not exist


def _file_change(repo: GitRepo, sha: str, change: _RawChange, max_bytes: int) -> FileChange | None:
    old_py = is_source_path(change.old_path or change.path)
    new_py = is_source_path(change.path)
    if change.status == "A":
        old_py = False
    if change.status == "D":
        new_py = False
    if not (old_py or new_py):
        return None
    old = repo.read_object(change.old_blob) if old_py and _is_object(change.old_blob) else None
    new = repo.read_object(change.new_blob) if new_py and _is_object(change.new_blob) else None
    if new_py:
        result = FileChange(change.path, old, new, change.old_path if old_py else None)
    else:  # a .py file renamed to a non-Python name: for Python, it is gone
        result = FileChange(change.old_path or change.path, old, None)
    if result.old is None and result.new is None:
        return None
    if result.old == result.new and result.old_path is None:
        return None  # mode-only change
    too_big = max(len(result.old or b""), len(result.new or b"")) > max_bytes
    if too_big or binary_side(result):
        reason = f"over the {max_bytes}-byte limit" if too_big else "binary content"
        log.warning("skipping %s in commit %s: %s", result.path, sha[:12], reason)
        return None
    return result


def mark_reverts(units: list[CommitUnit]) -> None:
    """Link each revert to the commit it reverts, both ways, within ``units``.

    The original is found by the sha in ``This reverts commit <sha>.``, else by the
    reverted PR number (the latest earlier, not yet reverted commit of that PR: PyTorch
    relands under the same number), else by the quoted subject. The revert gets the
    original's full sha (and PR when its message did not name one); the original gets
    ``reverted_by``. Reverts of commits outside ``units`` keep what their message said.
    """
    for index, unit in enumerate(units):
        if not unit.is_revert:
            continue
        earlier = units[:index]
        original = None
        if unit.reverts_sha:
            original = next((u for u in earlier if u.sha.startswith(unit.reverts_sha)), None)
        if original is None and unit.reverts_pr is not None:
            original = next(
                (
                    u
                    for u in reversed(earlier)
                    if u.pr == unit.reverts_pr and u.reverted_by is None and not u.is_revert
                ),
                None,
            )
        if original is None and unit.reverts_subject:
            original = next(
                (
                    u
                    for u in reversed(earlier)
                    if u.subject == unit.reverts_subject and u.reverted_by is None
                ),
                None,
            )
        if original is None:
            continue
        original.reverted_by = unit.sha
        unit.reverts_sha = original.sha
        if unit.reverts_pr is None:
            unit.reverts_pr = original.pr
