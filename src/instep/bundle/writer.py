"""Writes an evidence bundle: a directory, then the same files as a ``.tar.gz``.

Every byte passes through the :class:`~instep.bundle.redaction.Redactor` on its way in:
text is redacted, JSON is redacted value by value, copied artifacts are read as text and
redacted (files holding NUL bytes, binaries, are left out with a note, as are files over
:data:`MAX_FILE_BYTES`). The archive is built from the finished directory with
``tarfile``, so the two hold the same files. This module knows files, not evidence.
"""

from __future__ import annotations

import json
import logging
import shutil
import tarfile
from pathlib import Path
from typing import Any

from instep.bundle.redaction import Redactor
from instep.errors import BadInput

log = logging.getLogger(__name__)

MAX_FILE_BYTES = 32 * 1024 * 1024
#: The file whose presence marks a directory as a bundle instep may replace.
MARKER = "bundle.json"


class BundleWriter:
    """Files of one bundle under ``root`` (created empty; an older bundle there is replaced)."""

    def __init__(self, root: Path, redactor: Redactor) -> None:
        self.root = root
        self.redactor = redactor
        self.skipped: list[str] = []  # "path: why" of artifacts left out
        if root.exists():
            if not root.is_dir() or (any(root.iterdir()) and not (root / MARKER).is_file()):
                raise BadInput(
                    f"--out: {root} exists and is not an instep bundle: pick another directory"
                )
            shutil.rmtree(root)
        root.mkdir(parents=True)

    def _target(self, rel: str) -> Path:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

    def text(self, rel: str, content: str) -> str:
        self._target(rel).write_text(self.redactor.text(content), encoding="utf-8")
        return rel

    def json(self, rel: str, data: Any) -> str:
        body = json.dumps(self.redactor.data(data), indent=2, ensure_ascii=False, default=str)
        self._target(rel).write_text(body + "\n", encoding="utf-8")
        return rel

    def copy(self, source: Path, rel: str) -> bool:
        """Copy a text file redacted; ``False`` (and a note) when it was left out."""
        try:
            size = source.stat().st_size
        except OSError as exc:
            self.skipped.append(f"{rel}: unreadable ({exc})")
            return False
        if size > MAX_FILE_BYTES:
            self.skipped.append(f"{rel}: {size} bytes, over {MAX_FILE_BYTES}")
            return False
        raw = source.read_bytes()
        if b"\x00" in raw:
            self.skipped.append(f"{rel}: binary")
            return False
        self.text(rel, raw.decode("utf-8", errors="replace"))
        return True

    def copy_tree(self, source: Path, prefix: str) -> dict[str, str]:
        """Copy every file under ``source`` to ``prefix/...``; source rel -> bundle rel."""
        copied: dict[str, str] = {}
        for path in sorted(source.rglob("*")):
            if path.is_file():
                rel = str(path.relative_to(source))
                target = f"{prefix}/{rel}" if prefix else rel
                if self.copy(path, target):
                    copied[rel] = target
        return copied

    def files(self) -> list[str]:
        """Every file of the bundle, relative to its root, sorted."""
        return sorted(str(p.relative_to(self.root)) for p in self.root.rglob("*") if p.is_file())

    def archive(self) -> Path:
        """``<root>.tar.gz`` next to the directory, holding ``<root name>/...``."""
        target = self.root.with_name(self.root.name + ".tar.gz")
        with tarfile.open(target, "w:gz") as tar:
            for rel in self.files():
                tar.add(self.root / rel, arcname=f"{self.root.name}/{rel}", recursive=False)
        return target
