"""A content-addressed cache for per-file analysis results (symbol and coupling indexes).

Entries live under ``root/namespace/generation/ab/abcdef...`` (a key that is no plain
file name, such as one holding a path, is filed under its digest): the namespace carries a
format version, and the generation is a digest of instep's version and its analysis code
and data (:func:`analysis_code_digest`), so neither a change of an index's shape nor an
upgrade of instep reads stale entries. Each namespace keeps the current generation and
the most recently used other one (switching between two installs does not start cold
every time); older ones are deleted the first time a process opens the namespace. An
entry is created once (``O_EXCL``: the key is the content's digest, so a second writer
has the same value) and ends with a marker written with it; an entry without its marker
(a killed writer, a full disk, a writer still at work) is a miss, and one left
incomplete for ten minutes is replaced. A temporary file renamed into place would also
never be seen half-written, but the rename cost 0.4 ms per entry here (ext4), about 2 s
of the ~4,700 entries a cold release analysis writes. A corrupt or unreadable entry is
treated as a miss. This module knows nothing about what it stores.
"""

from __future__ import annotations

import hashlib
import logging
import os
import pickle
import re
import shutil
import time
from functools import lru_cache
from pathlib import Path
from typing import Any

import instep

log = logging.getLogger(__name__)

GENERATION_CHARS = 16
KEEP_OTHER_GENERATIONS = 1
# the last bytes of every complete entry; a cut-off entry ends with them only by chance,
# and then its pickle lacks its final STOP opcode and does not load either
END = b"\n#instep-cache-entry-end\n"
STALE_WRITE_S = 600.0  # an entry still without its marker after this is a dead write


def content_hash(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=20).hexdigest()


_PLAIN_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:+-]{0,127}")


def entry_name(key: str) -> str:
    """The file name of ``key``'s entry: the key itself when it is a plain file name (a
    digest, ``digest:name``), else the digest of the key (``digest:torch/x.py`` holds a
    ``/``, and a path may be longer than a file name may be)."""
    if _PLAIN_KEY.fullmatch(key):
        return key
    return content_hash(key.encode("utf-8", "surrogatepass"))


@lru_cache(maxsize=1)
def analysis_code_digest() -> str:
    """Digest of instep's version and the analysis code and data (``instep/impact``,
    ``instep/pyindex``, ``instep/elfindex`` and the vocabularies in
    ``instep/impact_contract.py``): the cache generation, so results from other code are
    never reused."""
    h = hashlib.blake2b(digest_size=20)
    h.update(str(getattr(instep, "__version__", "")).encode())
    package = Path(instep.__file__).parent
    for root in (package / "impact", package / "pyindex", package / "elfindex"):
        for path in sorted(root.rglob("*")):
            if path.suffix in (".py", ".toml", ".json", ".j2") and path.is_file():
                h.update(str(path.relative_to(package)).encode() + b"\0" + path.read_bytes())
    contract = package / "impact_contract.py"
    h.update(b"impact_contract.py\0" + contract.read_bytes())
    return h.hexdigest()


_pruned: set[Path] = set()


def prune_generations(namespace_dir: Path, current: str) -> list[Path]:
    """Delete the generations of ``namespace_dir`` other than ``current`` and the most
    recently used other one, and entries of the layout before generations; once per
    process and directory. Returns what was deleted. Never raises."""
    if namespace_dir in _pruned:
        return []
    _pruned.add(namespace_dir)
    try:
        children = [p for p in namespace_dir.iterdir() if p.is_dir() and p.name != current]
    except OSError:
        return []
    generations = [p for p in children if len(p.name) == GENERATION_CHARS]
    legacy = [p for p in children if len(p.name) != GENERATION_CHARS]  # 'ab/' key dirs
    generations.sort(key=lambda p: _mtime(p), reverse=True)
    doomed = generations[KEEP_OTHER_GENERATIONS:] + legacy
    for path in doomed:
        shutil.rmtree(path, ignore_errors=True)
    if doomed:
        log.debug("analysis cache %s: removed %d stale generations", namespace_dir, len(doomed))
    return doomed


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


class ContentCache:
    """Pickled values under ``root/namespace/generation/ab/abcdef...``; ``root=None``
    disables it."""

    def __init__(self, root: Path | None, namespace: str) -> None:
        self.dir = None
        if root is not None:
            generation = analysis_code_digest()[:GENERATION_CHARS]
            prune_generations(root / namespace, generation)
            self.dir = root / namespace / generation
            _touch(self.dir)  # its mtime says when it was last used
        self.hits = 0
        self.misses = 0
        self._made: set[str] = set()  # key directories known to exist

    def _path(self, key: str) -> Path:
        assert self.dir is not None
        name = entry_name(key)
        return self.dir / name[:2] / name

    def get(self, key: str) -> Any | None:
        if self.dir is None:
            self.misses += 1
            return None
        try:
            with open(self._path(key), "rb") as fh:
                data = fh.read()
            if not data.endswith(END):
                raise ValueError("no end marker: an incomplete write")
            value = pickle.loads(memoryview(data)[: -len(END)])
        except FileNotFoundError:
            self.misses += 1
            return None
        except Exception as exc:  # corrupt entry: recompute
            log.debug("cache entry %s unreadable (%s); recomputing", key, exc)
            self.misses += 1
            return None
        self.hits += 1
        return value

    def put(self, key: str, value: Any) -> None:
        if self.dir is None:
            return
        path = self._path(key)
        try:
            if path.parent.name not in self._made:
                path.parent.mkdir(parents=True, exist_ok=True)
                self._made.add(path.parent.name)
            data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL) + END
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                if not _dead_write(path):
                    return  # written (the same value: the key is its digest), or being so
                path.unlink(missing_ok=True)
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            written = False
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                written = True
            finally:
                os.close(fd)
                if not written:  # a full disk, an interrupt: leave no entry behind
                    path.unlink(missing_ok=True)
        except OSError as exc:  # a full or read-only disk must not fail the analysis
            log.warning("cannot write analysis cache %s: %s", path.parent, exc)


def _dead_write(path: Path) -> bool:
    """An entry without its end marker whose writer stopped long ago."""
    try:
        with open(path, "rb") as fh:
            fh.seek(-len(END), os.SEEK_END)
            if fh.read() == END:
                return False
    except OSError:  # shorter than the marker: seek before the start
        pass
    try:
        return time.time() - path.stat().st_mtime > STALE_WRITE_S
    except OSError:
        return False


def _touch(directory: Path) -> None:
    try:
        directory.mkdir(parents=True, exist_ok=True)
        os.utime(directory)
    except OSError:
        pass
