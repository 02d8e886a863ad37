"""What a release holds beyond its Python: its shared objects and its C++ headers.

:func:`shared_objects_of` gives the shared objects of a wheel or an installed (or built)
tree as :class:`~instep.elfindex.files.SharedObjectFiles`, and None for the sources that
have no built libraries: a git revision and a base plus patches. :class:`Headers` reads the
C++ headers a release installs (``<package>/include/**``) on demand, for the few symbols
a report names. Nothing here parses ELF or C++ (``instep.elfindex``; the join searches
the headers' text).
"""

from __future__ import annotations

import os
import zipfile
import zlib
from pathlib import Path

from instep.elfindex.files import SharedObjectFiles, WheelMembers
from instep.impact.upstream.sources.snapshot import TreeSnapshot
from instep.impact.upstream.sources.wheel import WheelSnapshot
from instep.pyindex.cache import ContentCache

HEADER_SUFFIXES = (".h", ".hpp", ".hh", ".cuh", ".hxx")
INCLUDE_DIR = "/include/"


def shared_objects_of(snapshot, cache: ContentCache | None) -> SharedObjectFiles | None:
    """The shared objects of ``snapshot``; None for a git revision or a patched tree."""
    if isinstance(snapshot, WheelSnapshot):
        return SharedObjectFiles(
            wheel=snapshot.wheel, entries=snapshot.entries(), label=snapshot.label, cache=cache
        )
    if isinstance(snapshot, TreeSnapshot):
        return SharedObjectFiles(root=snapshot.root, label=snapshot.label, cache=cache)
    return None


def is_header(path: str) -> bool:
    return INCLUDE_DIR in f"/{path}" and path.endswith(HEADER_SUFFIXES)


class Headers:
    """The installed C++ headers of a wheel or tree (``torch/include/ATen/...``), read
    lazily: listing them costs the zip's central directory or one walk of ``include``
    directories, and each header is read when first asked for."""

    def __init__(self, snapshot) -> None:
        self._zip: WheelMembers | None = None
        self._files: dict[str, Path] = {}
        self._members: dict[str, zipfile.ZipInfo] = {}
        if isinstance(snapshot, WheelSnapshot):
            self._zip = WheelMembers(snapshot.wheel)
            self._members = {i.filename: i for i in snapshot.entries() if is_header(i.filename)}
        elif isinstance(snapshot, TreeSnapshot):
            root = snapshot.root
            for dirpath, dirnames, filenames in os.walk(root):
                dirnames[:] = [d for d in dirnames if not d.startswith(".")]
                rel_dir = Path(dirpath).relative_to(root).as_posix()
                for name in filenames:
                    rel = f"{rel_dir}/{name}" if rel_dir != "." else name
                    if is_header(rel):
                        self._files[rel] = Path(dirpath) / name

    def paths(self) -> list[str]:
        return sorted(self._members or self._files)

    def read(self, path: str) -> str:
        try:
            if self._zip is not None:
                data = self._zip.read(self._members[path])
            else:
                data = self._files[path].read_bytes()
        except (OSError, KeyError, zipfile.BadZipFile, zlib.error):
            return ""
        return data.decode("utf-8", "replace")

    def close(self) -> None:
        if self._zip is not None:
            self._zip.close()
