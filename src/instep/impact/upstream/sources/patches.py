"""A directory of patches as change units, applied in memory to a base snapshot.

``*.patch`` and ``*.diff`` files are taken in name order and applied cumulatively to the
base :class:`~instep.impact.upstream.sources.snapshot.Snapshot`; each ``git format-patch``
message (a file may hold several, as ``--stdout`` writes them) or plain unified diff
(``diff -u``/``diff -ruN``) is one :class:`PatchUnit`. Hunks must match exactly, at the
stated line or shifted (no fuzz); a hunk that does not apply is a one-line BadInput
naming the patch file and the target ``file:line``. The strip level (``-p0``/``-p1``)
is detected from the paths. Only source targets (``*.py``, C shim headers) are tracked;
hunks for other files are parsed and skipped. Nothing is written to disk and no
``patch`` program is run.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from email.header import decode_header, make_header
from pathlib import Path

from instep.errors import BadInput, MissingInput
from instep.impact.upstream.sources.commit_message import read_message
from instep.impact.upstream.sources.snapshot import (
    FileChange,
    Snapshot,
    is_source_path,
    sha256_digest,
)

log = logging.getLogger(__name__)

PATCH_SUFFIXES = (".patch", ".diff")
_MBOX_FROM = re.compile(rb"^From [0-9a-f]{40} ", re.MULTILINE)
_HUNK = re.compile(rb"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_SUBJECT_PREFIX = re.compile(r"^\s*\[[^\]]*PATCH[^\]]*\]\s*", re.IGNORECASE)
_EPOCH = re.compile(rb"\t19(69-12-31|70-01-01)")


@dataclass
class PatchUnit:
    """One patch (a format-patch message or a plain diff) and the files it changes."""

    id: str  # the patch file's name, '#k' appended for the k-th message of an mbox
    title: str
    pr: int | None
    files: list[FileChange]  # source files only, before -> after this patch
    body: str = ""
    source: Path | None = None


@dataclass
class _Hunk:
    number: int
    old_start: int
    new_start: int
    old: list[bytes]  # lines with their terminators
    new: list[bytes]


@dataclass
class _FilePatch:
    old_path: bytes | None  # header path as written (None: /dev/null)
    new_path: bytes | None
    git: bool = False
    added: bool = False
    removed: bool = False
    rename: bool = False
    copy: bool = False
    binary: bool = False
    hunks: list[_Hunk] = field(default_factory=list)


@dataclass
class _Message:
    id: str
    title: str
    body: str
    patches: list[_FilePatch]


# -- reading patch files -------------------------------------------------------------


def _split_lines(data: bytes) -> list[bytes]:
    """Lines with their ``\\n`` kept (the last one may lack it)."""
    parts = data.split(b"\n")
    lines = [p + b"\n" for p in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def _header_path(value: bytes) -> bytes | None:
    value = value.rstrip(b"\r\n")
    value = value.split(b"\t", 1)[0]  # drop diff -u timestamps
    if value.startswith(b'"') and value.endswith(b'"'):
        value = value[1:-1]
    value = value.strip()
    return None if value == b"/dev/null" else value


def _decode_subject(raw: str) -> str:
    try:
        text = str(make_header(decode_header(raw)))
    except Exception:  # a malformed encoded-word: keep it as written
        text = raw
    return _SUBJECT_PREFIX.sub("", " ".join(text.split()))


def _read_messages(patch_file: Path) -> list[_Message]:
    try:
        data = patch_file.read_bytes()
    except OSError as exc:
        raise MissingInput(f"cannot read patch {patch_file}: {exc.strerror or exc}") from None
    starts = [m.start() for m in _MBOX_FROM.finditer(data)]
    if not starts:
        lines = _split_lines(data)
        first_diff = next(
            (i for i, ln in enumerate(lines) if ln.startswith((b"diff ", b"--- ", b"Index: "))),
            len(lines),
        )
        preamble = [ln.decode("utf-8", "replace").strip() for ln in lines[:first_diff]]
        preamble = [ln for ln in preamble if ln]
        title = preamble[0] if preamble else patch_file.stem
        body = "\n".join(preamble[1:])
        patches = _parse_diff(patch_file, lines[first_diff:])
        if not patches:
            raise BadInput(f"patch {patch_file} holds no unified diff")
        return [_Message(patch_file.name, title, body, patches)]
    messages = []
    for k, (begin, end) in enumerate(zip(starts, [*starts[1:], len(data)], strict=True), start=1):
        name = patch_file.name if len(starts) == 1 else f"{patch_file.name}#{k}"
        messages.append(_read_format_patch(patch_file, name, _split_lines(data[begin:end])))
    return messages


def _read_format_patch(patch_file: Path, name: str, lines: list[bytes]) -> _Message:
    headers: dict[str, str] = {}
    current = None
    i = 1  # line 0 is the mbox 'From <sha> <date>' line
    while i < len(lines) and lines[i].strip():
        text = lines[i].decode("utf-8", "replace").rstrip("\r\n")
        if text[:1] in " \t" and current:
            headers[current] += " " + text.strip()
        elif ":" in text:
            current, _, value = text.partition(":")
            current = current.strip().lower()
            headers[current] = value.strip()
        i += 1
    title = _decode_subject(headers.get("subject", "")) or name
    body_lines: list[str] = []
    i += 1
    while i < len(lines) and not lines[i].startswith((b"---\n", b"--- \n", b"diff --git ")):
        body_lines.append(lines[i].decode("utf-8", "replace").rstrip("\r\n"))
        i += 1
    patches = _parse_diff(patch_file, lines[i:])
    if not patches:
        log.info("patch %s (%s) changes no files", name, title)
    return _Message(name, title, "\n".join(body_lines).strip(), patches)


def _parse_diff(patch_file: Path, lines: list[bytes]) -> list[_FilePatch]:
    patches: list[_FilePatch] = []
    current: _FilePatch | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith(b"diff --git "):
            current = _FilePatch(None, None, git=True)
            match = re.match(rb"diff --git (\S+) (\S+)\s*$", line)
            if match:
                current.old_path, current.new_path = match.group(1), match.group(2)
            patches.append(current)
            i += 1
            continue
        if current is not None and current.git and not current.hunks:
            handled = _git_extended_header(current, line)
            if handled:
                i += 1
                continue
        if line.startswith(b"--- ") and i + 1 < len(lines) and lines[i + 1].startswith(b"+++ "):
            if current is None or not current.git or current.hunks:
                current = _FilePatch(None, None)
                patches.append(current)
            current.old_path = _header_path(line[4:])
            current.new_path = _header_path(lines[i + 1][4:])
            if current.old_path is None:
                current.added = True
            if current.new_path is None:
                current.removed = True
            if not current.git:
                current.added = current.added or bool(_EPOCH.search(line))
                current.removed = current.removed or bool(_EPOCH.search(lines[i + 1]))
            i += 2
            continue
        if line.startswith(b"@@ ") and current is not None:
            i = _read_hunk(patch_file, current, lines, i)
            continue
        i += 1
    return patches


def _git_extended_header(patch: _FilePatch, line: bytes) -> bool:
    text = line.rstrip(b"\r\n")
    if text.startswith(b"new file mode"):
        patch.added = True
    elif text.startswith(b"deleted file mode"):
        patch.removed = True
    elif text.startswith((b"rename from ", b"copy from ")):
        patch.rename = text.startswith(b"rename")
        patch.copy = not patch.rename
        patch.old_path = b"a/" + text.split(b" from ", 1)[1].strip().strip(b'"')
    elif text.startswith((b"rename to ", b"copy to ")):
        patch.new_path = b"b/" + text.split(b" to ", 1)[1].strip().strip(b'"')
    elif text.startswith((b"GIT binary patch", b"Binary files ")):
        patch.binary = True
    elif not text.startswith(
        (b"index ", b"old mode", b"new mode", b"similarity index", b"dissimilarity index")
    ):
        return False
    return True


def _read_hunk(patch_file: Path, patch: _FilePatch, lines: list[bytes], i: int) -> int:
    number = len(patch.hunks) + 1
    match = _HUNK.match(lines[i])
    if not match:
        raise BadInput(f"patch {patch_file.name}: malformed hunk header {lines[i].strip()!r}")
    old_start, new_start = int(match.group(1)), int(match.group(3))
    old_count = int(match.group(2)) if match.group(2) is not None else 1
    new_count = int(match.group(4)) if match.group(4) is not None else 1
    old: list[bytes] = []
    new: list[bytes] = []
    i += 1
    last: list[list[bytes]] = []
    while (
        len(old) < old_count
        or len(new) < new_count
        or (i < len(lines) and lines[i].startswith(b"\\"))
    ):
        if i >= len(lines):
            target = (patch.new_path or patch.old_path or b"?").decode("utf-8", "replace")
            raise BadInput(f"patch {patch_file.name}: hunk #{number} for {target} is truncated")
        line = lines[i]
        i += 1
        tag, text = line[:1], line[1:]
        if tag == b"\\":  # '\ No newline at end of file': the previous line has no '\n'
            for side in last:
                if side and side[-1].endswith(b"\n"):
                    side[-1] = side[-1][:-1]
            continue
        if line in (b"\n", b"\r\n"):  # a context line whose ' ' an editor stripped
            tag, text = b" ", line
        if not text.endswith(b"\n"):
            text += b"\n"
        if tag == b" ":
            old.append(text)
            new.append(text)
            last = [old, new]
        elif tag == b"-":
            old.append(text)
            last = [old]
        elif tag == b"+":
            new.append(text)
            last = [new]
        else:
            target = (patch.new_path or patch.old_path or b"?").decode("utf-8", "replace")
            raise BadInput(
                f"patch {patch_file.name}: hunk #{number} for {target} is malformed "
                f"(unexpected line {line.rstrip()[:60]!r})"
            )
    patch.hunks.append(_Hunk(number, old_start, new_start, old, new))
    return i


# -- applying ------------------------------------------------------------------------


class _HunkRejected(Exception):
    def __init__(self, number: int, line: int) -> None:
        super().__init__(number, line)
        self.number, self.line = number, line


def _apply_hunks(content: bytes, hunks: list[_Hunk]) -> bytes:
    """``content`` with ``hunks`` applied (exact match, shifted if need be)."""
    lines = _split_lines(content)
    result: list[bytes] = []
    cursor = 0  # next line of `lines` not yet copied
    offset = 0
    for hunk in hunks:
        stated = hunk.old_start - 1 if hunk.old else hunk.old_start
        at = _find(lines, hunk.old, max(stated + offset, cursor), cursor)
        if at is None:
            raise _HunkRejected(hunk.number, max(hunk.old_start, 1))
        offset = at - stated
        result.extend(lines[cursor:at])
        result.extend(hunk.new)
        cursor = at + len(hunk.old)
    result.extend(lines[cursor:])
    return b"".join(result)


def _find(lines: list[bytes], needle: list[bytes], expected: int, lowest: int) -> int | None:
    n = len(needle)
    highest = len(lines) - n
    if highest < lowest:
        return None
    expected = min(max(expected, lowest), highest)
    for distance in range(max(expected - lowest, highest - expected) + 1):
        for at in (expected - distance, expected + distance):
            if lowest <= at <= highest and lines[at : at + n] == needle:
                return at
    return None


class _PatchState:
    """The base snapshot plus every patch applied so far (path -> bytes, None: removed)."""

    def __init__(self, base: Snapshot) -> None:
        self.base = base
        self.base_paths = set(base.paths())
        self.overrides: dict[str, bytes | None] = {}

    def exists(self, path: str) -> bool:
        if path in self.overrides:
            return self.overrides[path] is not None
        return path in self.base_paths

    def get(self, path: str) -> bytes | None:
        if path in self.overrides:
            return self.overrides[path]
        return self.base.read(path) if path in self.base_paths else None


def _strip(path: bytes, level: int) -> str:
    parts = path.decode("utf-8", "surrogateescape").split("/")
    return "/".join(parts[level:]) if level < len(parts) else parts[-1]


def _git_prefixed(patch: _FilePatch) -> bool:
    return (
        patch.git
        and (patch.old_path is None or patch.old_path.startswith(b"a/"))
        and (patch.new_path is None or patch.new_path.startswith(b"b/"))
    )


def _strip_level(state: _PatchState, patches: list[_FilePatch]) -> int:
    """The ``-pN`` under which the patch's paths name files of the base."""
    if patches and all(_git_prefixed(p) for p in patches):
        return 1  # git's a/ and b/ prefixes
    for patch in patches:
        for path in (patch.old_path, patch.new_path):
            if path is None:
                continue
            depth = path.count(b"/")
            for level in range(depth + 1):
                if state.exists(_strip(path, level)):
                    return level
    for patch in patches:  # only new files: a/ b/ (or old/ new/) prefixes mean -p1
        if patch.git:
            return 1
        if patch.old_path and patch.new_path and patch.old_path != patch.new_path:
            return 1
    return 0


def _apply_message(state: _PatchState, patch_file: Path, message: _Message) -> list[FileChange]:
    level = _strip_level(state, message.patches)
    before: dict[str, bytes | None] = {}
    renamed_from: dict[str, str] = {}
    for patch in message.patches:
        old_path = _strip(patch.old_path, level) if patch.old_path else None
        new_path = _strip(patch.new_path, level) if patch.new_path else None
        if not patch.git and old_path and new_path and old_path != new_path:
            # Plain diffs do not rename: 'diff -u a.py.orig a.py' patches whichever exists.
            old_path = new_path = old_path if state.exists(old_path) else new_path
        target = new_path or old_path
        assert target is not None
        source = old_path or target
        if not (is_source_path(target) or is_source_path(source)):
            log.debug("patch %s: skipping non-Python file %s", message.id, target)
            continue
        where = f"patch {message.id}: {source}"
        if patch.binary:
            raise BadInput(f"{where}: a binary patch cannot be applied to a Python file")
        added = patch.added and not state.exists(source)
        if added:
            current = b""
        else:
            if not state.exists(source):
                raise BadInput(
                    f"{where}: the file to patch does not exist in {state.base.label}"
                    + (" (or an earlier patch removed it)" if source in state.overrides else "")
                )
            current = state.get(source) or b""
        for path in {source, target}:
            before.setdefault(path, state.get(path))
        try:
            updated = _apply_hunks(current, patch.hunks)
        except _HunkRejected as exc:
            raise BadInput(
                f"patch {patch_file.name}: hunk #{exc.number} does not apply to "
                f"{source}:{exc.line} ({state.base.label} plus the patches before it)"
            ) from None
        if patch.removed:
            if updated.strip():
                log.warning("%s: file deleted although the patch leaves content", where)
            state.overrides[source] = None
            continue
        if patch.rename and source != target:
            state.overrides[source] = None
            renamed_from[target] = source
        state.overrides[target] = updated
    changes: list[FileChange] = []
    for path in sorted(before):
        if path in renamed_from.values():
            continue  # reported under its new name
        old_path = renamed_from.get(path)
        old = before[old_path] if old_path else before[path]
        new = state.get(path) if state.exists(path) else None
        if old == new and old_path is None:
            continue
        if not is_source_path(path):
            new = None  # renamed to a non-Python name: for Python, it is gone
        changes.append(FileChange(path, old, new, old_path))
    return changes


def _patch_files(patch_dir: Path) -> list[Path]:
    patch_dir = Path(patch_dir).expanduser()
    if not patch_dir.exists():
        raise MissingInput(f"patch directory does not exist: {patch_dir}")
    if patch_dir.is_file():
        if patch_dir.suffix in PATCH_SUFFIXES:
            return [patch_dir]
        raise BadInput(f"{patch_dir} is not a patch directory (or a .patch/.diff file)")
    files = sorted(
        (p for p in patch_dir.iterdir() if p.suffix in PATCH_SUFFIXES and p.is_file()),
        key=lambda p: p.name,
    )
    if not files:
        raise BadInput(f"patch directory {patch_dir} holds no *.patch or *.diff files")
    return files


def iter_patch_units(base: Snapshot, patch_dir: Path) -> Iterator[PatchUnit]:
    """One :class:`PatchUnit` per patch, applied cumulatively in memory to ``base``.

    The directory is checked now; patches are read and applied as the iterator runs,
    and the first that does not apply raises a one-line BadInput.
    """
    return _units(_PatchState(base), _patch_files(patch_dir))


def _units(state: _PatchState, files: list[Path]) -> Iterator[PatchUnit]:
    for patch_file in files:
        for message in _read_messages(patch_file):
            changes = _apply_message(state, patch_file, message)
            facts = read_message(message.title, message.body)
            yield PatchUnit(
                id=message.id,
                title=message.title,
                pr=facts.pr,
                files=changes,
                body=message.body,
                source=patch_file,
            )


class PatchedSnapshot:
    """``base`` with every patch of ``patch_dir`` applied (eagerly, at construction)."""

    def __init__(self, base: Snapshot, patch_dir: Path, label: str | None = None) -> None:
        self.base = base
        state = _PatchState(base)
        self.units = list(_units(state, _patch_files(patch_dir)))
        self._overrides = state.overrides
        self._paths = sorted(
            (state.base_paths - set(self._overrides))
            | {p for p, data in self._overrides.items() if data is not None and is_source_path(p)}
        )
        self._known = set(self._paths)
        self.label = label if label is not None else f"{base.label}+{Path(patch_dir).name}"

    def __repr__(self) -> str:
        return f"PatchedSnapshot({self.label!r})"

    def paths(self) -> list[str]:
        return list(self._paths)

    def digest(self, path: str) -> str:
        if path not in self._known:
            raise KeyError(path)
        data = self._overrides.get(path)
        return sha256_digest(data) if data is not None else self.base.digest(path)

    def read(self, path: str) -> bytes:
        if path not in self._known:
            raise KeyError(path)
        data = self._overrides.get(path)
        return data if data is not None else self.base.read(path)

    def close(self) -> None:
        close = getattr(self.base, "close", None)
        if close is not None:
            close()

    def __enter__(self) -> PatchedSnapshot:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
