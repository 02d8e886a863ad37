"""A content-addressed cache for per-file analysis results (symbol and coupling indexes).

Entries are keyed by (namespace, content hash); the namespace carries a format version,
and the keys of the analysis caches include :func:`analysis_code_digest` (instep's
version and its analysis code and data), so neither a change of an index's shape nor
an upgrade of instep reads stale entries. Writes are atomic (temp file
+ rename), so a killed process leaves no half-written entry. A corrupt or unreadable
entry is treated as a miss. This module knows nothing about what it stores.
"""

from __future__ import annotations

import hashlib
import logging
import os
import pickle
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


def content_hash(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=20).hexdigest()


@lru_cache(maxsize=1)
def analysis_code_digest() -> str:
    """Digest of instep's version and the analysis code and data (``instep/impact``):
    part of every analysis cache key, so results from other code are never reused."""
    import instep

    h = hashlib.blake2b(digest_size=20)
    h.update(str(getattr(instep, "__version__", "")).encode())
    root = Path(__file__).parent
    for path in sorted(root.rglob("*")):
        if path.suffix in (".py", ".toml", ".json", ".j2") and path.is_file():
            h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


class ContentCache:
    """Pickled values under ``root/namespace/ab/abcdef...``; ``root=None`` disables it."""

    def __init__(self, root: Path | None, namespace: str) -> None:
        self.dir = root / namespace if root is not None else None
        self.hits = 0
        self.misses = 0

    def _path(self, key: str) -> Path:
        assert self.dir is not None
        return self.dir / key[:2] / key

    def get(self, key: str) -> Any | None:
        if self.dir is None:
            self.misses += 1
            return None
        try:
            with open(self._path(key), "rb") as fh:
                value = pickle.load(fh)
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
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
            with os.fdopen(fd, "wb") as fh:
                pickle.dump(value, fh, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, path)
        except OSError as exc:  # a full or read-only disk must not fail the analysis
            log.warning("cannot write analysis cache %s: %s", path.parent, exc)
