"""One version of a tree of Python files, read-only, and the diff of two such versions.

A :class:`Snapshot` answers three questions about one version: which source files it
holds (``*.py``, and the upstream C shim headers of ``c_shims``; sorted relative posix
paths), a content identity for each (``digest``) and the
bytes of each (``read``). :class:`TreeSnapshot` reads a directory; wheels, git revisions
and patched snapshots live in their own modules. :func:`diff_snapshots` compares two
snapshots by digest first, so unchanged files are never read when both sides use the
same digest scheme.

Digests carry their scheme as a prefix: ``sha256=<urlsafe b64>`` (the wheel RECORD
form, also computed for trees and patched files) or ``git:<blob id>``. Two digests of
the same scheme are equal exactly when the contents are; digests of different schemes
say nothing, and the diff then compares bytes.

Nothing here parses Python, imports analysed code or follows anything outside the tree
except symlinks that point out of it.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import os
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

from instep.errors import BadInput, MissingInput
from instep.impact.upstream.c_shims import is_shim_header
from instep.impact.upstream.op_schemas import is_schema_file

log = logging.getLogger(__name__)

#: Files larger than this are skipped (with a warning naming them) unless a caller says
#: otherwise. The largest hand-written torch file is well under 1 MiB.
DEFAULT_MAX_BYTES = 8 * 1024 * 1024
#: A NUL byte in this many leading bytes marks a file as binary.
BINARY_PROBE_BYTES = 8192
#: Directories a tree walk never enters (version control, byte-code caches).
SKIPPED_DIR_NAMES = frozenset({"__pycache__", ".git", ".hg", ".svn", ".tox", ".nox"})


@runtime_checkable
class Snapshot(Protocol):
    """One version of a tree of Python files, read-only."""

    label: str

    def paths(self) -> list[str]:
        """Sorted relative posix paths of the source files (``*.py``, C shim headers)."""
        ...

    def digest(self, path: str) -> str:
        """Content identity of ``path``, prefixed by its scheme; cheap where possible."""
        ...

    def read(self, path: str) -> bytes:
        """The bytes of ``path`` (a ``KeyError`` for a path not in :meth:`paths`)."""
        ...


@dataclass
class FileChange:
    """One changed Python file between two versions."""

    path: str
    old: bytes | None  # None: added
    new: bytes | None  # None: removed
    old_path: str | None = None  # set when git reports a rename (or a patch renames)

    @property
    def has_old(self) -> bool:
        return self.old is not None

    @property
    def has_new(self) -> bool:
        return self.new is not None

    @property
    def status(self) -> str:
        if not self.has_old:
            return "added"
        if not self.has_new:
            return "removed"
        return "renamed" if self.old_path and self.old_path != self.path else "modified"


class SnapshotFileChange(FileChange):
    """A changed file whose bytes stay in its two snapshots: ``old`` and ``new`` read
    them on each access (through the snapshot's own bounded memo). A release diff of
    two torch wheels changes ~1,800 files, 73 MiB of text: held here, every process
    forked while the analysis ran (the indexing pools, the join's children) carried
    them (issue #32)."""

    def __init__(self, path: str, old: Snapshot | None, new: Snapshot | None) -> None:
        self.path = path
        self.old_path = None
        self._sides = (old, new)

    @property  # type: ignore[override]
    def old(self) -> bytes | None:
        side = self._sides[0]
        return None if side is None else side.read(self.path)

    @property  # type: ignore[override]
    def new(self) -> bytes | None:
        side = self._sides[1]
        return None if side is None else side.read(self.path)

    @property
    def has_old(self) -> bool:  # without reading
        return self._sides[0] is not None

    @property
    def has_new(self) -> bool:
        return self._sides[1] is not None


def sha256_digest(data: bytes) -> str:
    """The wheel RECORD form of a content hash: ``sha256=<urlsafe b64, no padding>``."""
    raw = hashlib.sha256(data).digest()
    return "sha256=" + base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def digest_scheme(digest: str) -> str:
    return digest.split("=", 1)[0] if digest.startswith("sha256=") else digest.split(":", 1)[0]


def is_binary(data: bytes) -> bool:
    """True when a NUL byte occurs in the first :data:`BINARY_PROBE_BYTES` bytes."""
    return b"\0" in data[:BINARY_PROBE_BYTES]


def is_source_path(path: str) -> bool:
    """A file instep reads from a snapshot: Python, an upstream C shim header, or the ATen
    operator schema file (``native_functions.yaml``)."""
    return path.endswith(".py") or is_shim_header(path) or is_schema_file(path)


class TreeSnapshot:
    """The source files (``*.py``, C shim headers) under a directory.

    Symlinked files are read through. Symlinked directories are followed unless they
    lead to a directory already in the walk (a loop pointing up the tree, or a second
    name for a sibling): those are skipped with a warning, so nothing hangs and no file
    is listed twice. Binary files and files over ``max_bytes`` are skipped with a
    warning naming them. Hidden directories, ``__pycache__`` and VCS folders are not
    entered. Contents are returned as bytes (any encoding is fine here).
    """

    def __init__(
        self,
        root: Path,
        label: str | None = None,
        *,
        max_bytes: int = DEFAULT_MAX_BYTES,
        also: Callable[[str], bool] | None = None,
    ) -> None:
        root = Path(root).expanduser()
        if not root.exists():
            raise MissingInput(f"source tree does not exist: {root}")
        if not root.is_dir():
            raise BadInput(f"source tree is not a directory: {root}")
        self.root = root
        self.label = label if label is not None else str(root)
        self.max_bytes = max_bytes
        self.also = also  # further paths to list (a downstream's yaml and C++ files)
        self._files: dict[str, Path] | None = None
        self._digests: dict[str, str] = {}

    def __repr__(self) -> str:
        return f"TreeSnapshot({self.label!r})"

    # -- Snapshot ------------------------------------------------------------------
    def paths(self) -> list[str]:
        return sorted(self._scan())

    def digest(self, path: str) -> str:
        found = self._digests.get(path)
        if found is None:
            found = self._digests[path] = sha256_digest(self.read(path))
        return found

    def read(self, path: str) -> bytes:
        file = self._scan()[path]
        try:
            return file.read_bytes()
        except OSError as exc:
            raise MissingInput(f"cannot read {file}: {exc.strerror or exc}") from None

    def close(self) -> None:
        """Nothing to release; here so every snapshot can be closed the same way."""

    def __enter__(self) -> TreeSnapshot:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the walk ------------------------------------------------------------------
    def _scan(self) -> dict[str, Path]:
        if self._files is None:
            self._files = self._walk()
        return self._files

    def _walk(self) -> dict[str, Path]:
        files: dict[str, Path] = {}
        root_stat = self.root.stat()
        visited = {(root_stat.st_dev, root_stat.st_ino)}
        # Real directories are walked first and symlinked ones afterwards, so that a
        # directory reachable both ways is listed under its real name.
        real_dirs: list[tuple[Path, str]] = [(self.root, "")]
        linked_dirs: list[tuple[Path, str]] = []
        while real_dirs or linked_dirs:
            if real_dirs:
                directory, rel = real_dirs.pop()
            else:
                directory, rel = linked_dirs.pop(0)
                try:
                    st = directory.stat()
                except OSError as exc:
                    log.warning("skipping symlinked directory %s: %s", directory, exc)
                    continue
                key = (st.st_dev, st.st_ino)
                if key in visited:
                    log.warning(
                        "skipping symlinked directory %s: it leads to %s, already in the tree "
                        "(a loop or a second name)",
                        directory,
                        os.path.realpath(directory),
                    )
                    continue
                visited.add(key)
            try:
                entries = sorted(os.scandir(directory), key=lambda e: e.name)
            except OSError as exc:
                log.warning("skipping unreadable directory %s: %s", directory, exc)
                continue
            for entry in entries:
                child_rel = f"{rel}{entry.name}"
                try:
                    if entry.is_dir(follow_symlinks=False):
                        if entry.name in SKIPPED_DIR_NAMES or entry.name.startswith("."):
                            continue
                        st = entry.stat(follow_symlinks=False)
                        visited.add((st.st_dev, st.st_ino))
                        real_dirs.append((Path(entry.path), child_rel + "/"))
                        continue
                    if entry.is_symlink() and entry.is_dir(follow_symlinks=True):
                        if not (entry.name in SKIPPED_DIR_NAMES or entry.name.startswith(".")):
                            linked_dirs.append((Path(entry.path), child_rel + "/"))
                        continue
                except OSError as exc:
                    log.warning("skipping %s: %s", entry.path, exc)
                    continue
                if not (is_source_path(child_rel) or (self.also and self.also(child_rel))):
                    continue
                if self._accept_file(Path(entry.path)):
                    files[child_rel] = Path(entry.path)
        return files

    def _accept_file(self, file: Path) -> bool:
        try:
            st = file.stat()  # follows a symlinked file
        except OSError as exc:
            log.warning("skipping %s: %s", file, exc.strerror or exc)
            return False
        if not stat.S_ISREG(st.st_mode):
            return False
        if st.st_size > self.max_bytes:
            log.warning(
                "skipping %s: %d bytes is over the %d-byte limit", file, st.st_size, self.max_bytes
            )
            return False
        try:
            with open(file, "rb") as fh:
                head = fh.read(BINARY_PROBE_BYTES)
        except OSError as exc:
            log.warning("skipping %s: %s", file, exc.strerror or exc)
            return False
        if is_binary(head):
            log.warning("skipping %s: binary content (NUL byte) in a source file", file)
            return False
        return True


def read_texts(paths: Iterable[str], read: Callable[[str], bytes | None]) -> dict[str, bytes]:
    """``path -> bytes`` of the files that can be read and are not empty (a file gone
    from the snapshot, or unreadable, is left out rather than raising)."""
    texts: dict[str, bytes] = {}
    for p in paths:
        try:
            data = read(p)
        except (OSError, KeyError):
            data = None
        if data:
            texts[p] = data
    return texts


def same_content(old: Snapshot, new: Snapshot, path: str, old_path: str | None = None) -> bool:
    """Whether ``old[old_path or path]`` and ``new[path]`` hold the same bytes.

    Digests decide when both use one scheme; otherwise the bytes are compared.
    """
    a, b = old.digest(old_path or path), new.digest(path)
    if digest_scheme(a) == digest_scheme(b):
        return a == b
    return old.read(old_path or path) == new.read(path)


def diff_snapshots(
    old: Snapshot,
    new: Snapshot,
    *,
    keep: Callable[[str], bool] | None = None,
    lazy: bool = False,
) -> list[FileChange]:
    """The source files added, removed or modified from ``old`` to ``new``, by path
    (``keep``: only the paths it accepts, those it refuses never read).

    Unchanged files are recognised by digest and not read when both snapshots share a
    digest scheme (two wheels with RECORDs, two git revisions, two trees). Files whose
    content turns out binary are skipped with a warning. No rename detection: a moved
    file is one removal and one addition. ``lazy``: the changes hold no bytes
    (:class:`SnapshotFileChange`); only the head of each file is read, for the binary test.
    """
    old_paths = set(old.paths())
    new_paths = set(new.paths())
    changes: list[FileChange] = []
    for path in sorted(old_paths | new_paths):
        if keep is not None and not keep(path):
            continue
        if path in old_paths and path in new_paths:
            if same_content(old, new, path):
                continue
            sides: tuple[Snapshot | None, Snapshot | None] = (old, new)
        elif path in new_paths:
            sides = (None, new)
        else:
            sides = (old, None)
        if lazy:
            change: FileChange = SnapshotFileChange(path, *sides)
            binary = any(s is not None and is_binary(_head(s, path)) for s in sides)
        else:
            change = FileChange(path, *(s.read(path) if s is not None else None for s in sides))
            binary = binary_side(change)
        if binary:
            log.warning(
                "skipping %s (%s -> %s): binary content in a source file",
                path,
                old.label,
                new.label,
            )
            continue
        changes.append(change)
    return changes


def _head(snapshot: Snapshot, path: str) -> bytes:
    """The first :data:`BINARY_PROBE_BYTES` bytes of ``path`` (a wheel decompresses no
    more of the member than that)."""
    head = getattr(snapshot, "read_head", None)
    return head(path) if head is not None else snapshot.read(path)[:BINARY_PROBE_BYTES]


def binary_side(change: FileChange) -> bool:
    return any(data is not None and is_binary(data) for data in (change.old, change.new))
