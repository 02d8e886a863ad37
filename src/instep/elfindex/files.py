"""The shared objects of a wheel or a directory, each read once into a
:class:`~.model.SharedObject` and remembered in the content cache.

:class:`SharedObjectFiles` lists the files whose name says shared object (``*.so``,
``*.so.N``; extension modules included) by their installed path, gives each an identity
that costs nothing to compute — a wheel member's CRC-32 and size from the zip's central
directory, a file's path, size, modification time and inode (as git's index trusts a
file's stat: hashing the 434 MB of ``libtorch_cpu.so`` would read all of it, the reader
reads 8 MB) — and reads a file on demand. A wheel member is streamed once, in 1 MiB
chunks, into a temporary file that the reader then seeks in: pyelftools over a
``zipfile`` member seeks backwards, and each backward seek decompresses the member again
from its start (30 s to locate the sections of ``libtorch_cpu.so``); a temporary file
keeps memory flat whatever the library's size. What a read yields (or why it failed) is
cached under the identity, so a warm run reads no shared object at all.

Nothing here decides which files matter (the caller asks for the ones it needs) or
compares symbols.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import struct
import tempfile
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path

from instep.elfindex.model import SharedObject, Unreadable
from instep.elfindex.reader import ELF_MAGIC, UnreadableObject, read_shared_object
from instep.pyindex.cache import ContentCache

log = logging.getLogger(__name__)

CACHE_NAMESPACE = "elf-objects-v1"
CHUNK = 1 << 20  # compressed bytes read at a time when a member is streamed out
MAX_OUT = 8 << 20  # decompressed bytes held at a time (deflate can expand 1000-fold)
_SHARED_OBJECT = re.compile(r"\.so(?:\.\d+)*$")
_DATA_LIB = re.compile(r"^[^/]+\.data/(?:purelib|platlib)/")
_SKIPPED_DIRS = frozenset({"__pycache__", ".git", ".hg", ".svn", ".tox", ".nox"})


def is_shared_object(path: str) -> bool:
    """``libfoo.so``, ``libfoo.so.1.2``, ``_C.cpython-311-x86_64-linux-gnu.so``."""
    return bool(_SHARED_OBJECT.search(path.rsplit("/", 1)[-1]))


class WheelMembers:
    """Members of a wheel read straight from its file, given the central directory's
    entries (``zipfile.ZipInfo``, already parsed by whoever opened the wheel: a torch
    wheel's directory of 15,000 entries is not parsed again). A member is inflated with
    ``zlib`` in bounded steps and its CRC-32 checked at the end, like ``zipfile`` does
    without its per-read bookkeeping. Safe in a forked child: the file is opened again in
    each process."""

    def __init__(self, wheel: Path) -> None:
        self.wheel = Path(wheel)
        self._fh = None
        self._pid = -1

    def _file(self):
        if self._fh is None or self._pid != os.getpid():
            self._fh = open(self.wheel, "rb")  # noqa: SIM115 - kept open, closed by close()
            self._pid = os.getpid()
        return self._fh

    def stream(self, info: zipfile.ZipInfo, write: Callable[[bytes], object]) -> None:
        """Inflate ``info`` into ``write``; ``zipfile.BadZipFile`` when the member is
        corrupt or cut off."""
        fh = self._file()
        fh.seek(info.header_offset)
        header = fh.read(30)
        if len(header) != 30 or header[:4] != b"PK\x03\x04":
            raise zipfile.BadZipFile(f"no local header for {info.filename}")
        name_len, extra_len = struct.unpack("<HH", header[26:30])
        fh.seek(info.header_offset + 30 + name_len + extra_len)
        left = info.compress_size
        crc = 0
        if info.compress_type == zipfile.ZIP_STORED:
            while left:
                data = fh.read(min(CHUNK, left))
                if not data:
                    raise zipfile.BadZipFile(f"{info.filename} is cut off")
                left -= len(data)
                crc = zlib.crc32(data, crc)
                write(data)
        elif info.compress_type == zipfile.ZIP_DEFLATED:
            inflate = zlib.decompressobj(-15)
            while left or inflate.unconsumed_tail:
                data = inflate.unconsumed_tail
                if not data:
                    data = fh.read(min(CHUNK, left))
                    if not data:
                        raise zipfile.BadZipFile(f"{info.filename} is cut off")
                    left -= len(data)
                out = inflate.decompress(data, MAX_OUT)
                crc = zlib.crc32(out, crc)
                write(out)
            out = inflate.flush()
            crc = zlib.crc32(out, crc)
            write(out)
        else:
            raise zipfile.BadZipFile(
                f"{info.filename}: compression method {info.compress_type} is not read"
            )
        if crc != info.CRC:
            raise zipfile.BadZipFile(f"bad CRC-32 for {info.filename}")

    def read(self, info: zipfile.ZipInfo) -> bytes:
        parts: list[bytes] = []
        self.stream(info, parts.append)
        return b"".join(parts)

    def close(self) -> None:
        if self._fh is not None and self._pid == os.getpid():
            self._fh.close()
        self._fh = None


def wheel_entries(wheel: Path) -> list[zipfile.ZipInfo]:
    with zipfile.ZipFile(wheel) as zf:
        return zf.infolist()


class SharedObjectFiles:
    """The shared objects of one wheel (``wheel``, with its ``entries`` when already
    read) or directory (``root``), by installed path."""

    def __init__(
        self,
        *,
        wheel: Path | None = None,
        entries: list[zipfile.ZipInfo] | None = None,
        root: Path | None = None,
        label: str = "",
        cache: ContentCache | None = None,
    ) -> None:
        if (wheel is None) == (root is None):
            raise ValueError("give a wheel or a root")
        self.label = label or str(wheel or root)
        self.cache = cache
        self.wheel = wheel
        self.root = root
        self._members: dict[str, zipfile.ZipInfo] = {}
        self._files: dict[str, Path] = {}
        self._read: dict[str, SharedObject | Unreadable] = {}
        self._zip = WheelMembers(wheel) if wheel is not None else None
        self.reads = 0  # files actually read (not from the cache): the tests check warm runs
        if wheel is not None:
            for info in entries if entries is not None else wheel_entries(wheel):
                name = info.filename
                if name.endswith("/") or ".." in name.split("/") or not is_shared_object(name):
                    continue
                self._members[_DATA_LIB.sub("", name, count=1)] = info
        else:
            assert root is not None
            self._files = _walk(root)

    def paths(self) -> list[str]:
        return sorted(self._members or self._files)

    def __contains__(self, path: object) -> bool:
        return path in self._members or path in self._files

    def size(self, path: str) -> int:
        if self._members:
            return self._members[path].file_size
        try:
            return self._files[path].stat().st_size
        except OSError:
            return 0

    def identity(self, path: str) -> str:
        """What names the content of ``path`` without reading it (see the module doc)."""
        if path in self._members:
            info = self._members[path]
            return f"zip:{info.CRC:08x}:{info.file_size}"
        file = self._files[path]
        st = file.stat()
        stat = f"{file.resolve()}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ino}"
        return "file:" + hashlib.blake2b(stat.encode(), digest_size=16).hexdigest()

    def read(self, path: str) -> SharedObject | Unreadable:
        """The facts of ``path`` (from memory, the cache, or read now)."""
        found = self._read.get(path)
        if found is not None:
            return found
        key = None
        if self.cache is not None:
            try:
                key = self.identity(path)
            except OSError as exc:
                return self._keep(path, Unreadable(f"cannot read: {exc.strerror or exc}"))
            hit = self.cache.get(key)
            if isinstance(hit, SharedObject | Unreadable):
                return self._keep(path, hit)
        found = self._read_now(path)
        if self.cache is not None and key is not None:
            self.cache.put(key, found)
        return self._keep(path, found)

    def _keep(self, path: str, found: SharedObject | Unreadable) -> SharedObject | Unreadable:
        self._read[path] = found
        return found

    def _read_now(self, path: str) -> SharedObject | Unreadable:
        self.reads += 1
        try:
            if path in self._members:
                return self._read_member(self._members[path])
            with open(self._files[path], "rb") as fh:
                return read_shared_object(fh)
        except UnreadableObject as exc:
            return exc.record()
        except OSError as exc:
            return Unreadable(f"cannot read: {exc.strerror or exc}")

    def _read_member(self, info: zipfile.ZipInfo) -> SharedObject | Unreadable:
        assert self._zip is not None
        with tempfile.TemporaryFile(prefix="instep-elf-") as spool:
            head = bytearray()

            def write(data: bytes) -> None:
                if len(head) < len(ELF_MAGIC):
                    head.extend(data[: len(ELF_MAGIC) - len(head)])
                    if len(head) == len(ELF_MAGIC) and bytes(head) != ELF_MAGIC:
                        raise UnreadableObject("not an ELF file")
                spool.write(data)

            try:
                self._zip.stream(info, write)
            except (zipfile.BadZipFile, zlib.error) as exc:
                return Unreadable(f"corrupt wheel member ({exc})")
            if len(head) < len(ELF_MAGIC):
                return Unreadable("not an ELF file")
            return read_shared_object(spool)

    def close(self) -> None:
        if self._zip is not None:
            self._zip.close()


def _walk(root: Path) -> dict[str, Path]:
    """Relative posix path -> file, for the shared objects under ``root`` (a symlink to a
    file listed once: ``libfoo.so -> libfoo.so.1`` is one library)."""
    files: dict[str, Path] = {}
    seen: set[str] = set()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIPPED_DIRS and d[0] != ".")
        for name in sorted(filenames):
            if not is_shared_object(name):
                continue
            file = Path(dirpath) / name
            try:
                real = os.path.realpath(file)
                if real in seen or not os.path.isfile(real):
                    continue
            except OSError:
                continue
            seen.add(real)
            files[file.relative_to(root).as_posix()] = file
    return files
