"""The shared objects of a wheel or a directory, each read once into a
:class:`~.model.SharedObject` and remembered in the content cache.

:class:`SharedObjectFiles` lists the files whose name says shared object (``*.so``,
``*.so.N``; extension modules included) by their installed path, gives each an identity
that costs nothing to compute — a wheel member's CRC-32 and size from the zip's central
directory, a file's path, size, modification time and inode (as git's index trusts a
file's stat: hashing the 434 MB of ``libtorch_cpu.so`` would read all of it, the reader
reads 8 MB) — and reads a file on demand. A wheel member is inflated once, straight from
the wheel file, keeping only the parts the reader needs (:class:`KeptRanges`: about
33 MB at most, whatever the library's size, nothing written to disk); the reader then
seeks in those. pyelftools over a ``zipfile`` member would seek backwards, and each
backward seek decompresses the member again from its start (30 s to locate the sections
of ``libtorch_cpu.so``). A file laid out otherwise (its tables past the first 32 MB) is
inflated a second time into a temporary file. What a read yields (or why it failed) is
cached under the identity, so a warm run reads no shared object at all.

Nothing here decides which files matter (the caller asks for the ones it needs) or
compares symbols.
"""

from __future__ import annotations

import hashlib
import io
import logging
import os
import re
import struct
import tempfile
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path

try:  # ISA-L's inflate: 0.84 s against zlib's 1.8 s for libtorch_cpu.so (115 -> 434 MB)
    from isal import isal_zlib as _inflate
except ImportError:  # a platform without its wheels: the standard zlib does the same job
    _inflate = zlib  # type: ignore[assignment]

from instep.elfindex.model import ELF_MAGIC, SharedObject, Unreadable
from instep.elfindex.reader import UnreadableObject, read_shared_object
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
    ISA-L's zlib-compatible inflate (``isal``; the standard ``zlib`` where it is missing)
    in bounded steps and its CRC-32 checked at the end, as ``zipfile`` does, without its
    per-read bookkeeping. Safe in a forked child: the file is opened again in
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
            inflate = _inflate.decompressobj(-15)
            while left or inflate.unconsumed_tail:
                data = inflate.unconsumed_tail
                if not data:
                    data = fh.read(min(CHUNK, left))
                    if not data:
                        raise zipfile.BadZipFile(f"{info.filename} is cut off")
                    left -= len(data)
                out = inflate.decompress(data, MAX_OUT)
                crc = _inflate.crc32(out, crc)
                write(out)
            out = inflate.flush()
            crc = _inflate.crc32(out, crc)
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


HEAD_KEPT = 32 << 20  # a file's first bytes, kept: the dynamic symbol and string tables
TAIL_KEPT = 64 << 10  # bytes kept before the section header table (the section names)
# bytes kept from there to the end: patchelf (auditwheel) moves the tables it grows there
# (torch 2.14.1's libtorch_cpu.so has .gnu.hash and .dynstr, 5.6 MB, after the table)
END_KEPT = 64 << 20


class NotKept(Exception):
    """The reader asked for bytes :class:`KeptRanges` did not keep."""


class KeptRanges:
    """The parts of an ELF file streamed through :meth:`write` that the reader needs,
    and nothing else: the first :data:`HEAD_KEPT` bytes (ELF and program headers, and
    where linkers put ``.dynsym``, ``.dynstr`` and the hash and version tables: the first
    8 MB of ``libtorch_cpu.so``), the dynamic segment (``PT_DYNAMIC``: 344 MB in) and the
    section header table with the bytes just before it (``.shstrtab``) and everything
    after it (where patchelf appends the tables it grows). Memory stays within about
    100 MB whatever the file's size (33 MB for torch's libraries, 39 MB for a patched
    one), and nothing is written to disk; :meth:`file` serves the kept bytes and raises
    :class:`NotKept` for others."""

    def __init__(self) -> None:
        self.head = bytearray()
        self.size = 0
        self._wanted: list[tuple[int, int]] | None = None
        self._parts: list[tuple[int, bytearray]] = []

    def write(self, data: bytes) -> None:
        start = self.size
        end = start + len(data)
        if start < HEAD_KEPT:
            self.head += data[: HEAD_KEPT - start]
        if self._wanted is None:
            self._wanted = _wanted_ranges(bytes(self.head[:4096]), len(self.head) >= HEAD_KEPT)
            self._parts = [(lo, bytearray()) for lo, _ in self._wanted or ()]
        for (lo, hi), (_, buf) in zip(self._wanted or (), self._parts, strict=True):
            a, b = max(lo, start), min(hi, end)
            if a < b and len(buf) < END_KEPT:
                buf += data[a - start : b - start]
        self.size = end

    def file(self) -> _KeptFile:
        return _KeptFile(self)

    def slice(self, a: int, b: int) -> bytes:
        if b <= len(self.head):
            return bytes(self.head[a:b])
        for lo, buf in self._parts:
            if lo <= a and b <= lo + len(buf):
                return bytes(buf[a - lo : b - lo])
        raise NotKept(f"bytes {a}..{b}")


def _wanted_ranges(head: bytes, full: bool) -> list[tuple[int, int]] | None:
    """The ranges past the head to keep, read from the ELF and program headers; None
    while too little of the head is in (and ``full`` is false)."""
    if len(head) < 64 or head[:4] != ELF_MAGIC:
        return None if not full and len(head) < 64 else []
    elf_class, order = head[4], "<" if head[5] == 1 else ">"
    if elf_class == 2:
        phoff, shoff = struct.unpack_from(order + "QQ", head, 32)
        phentsize, phnum = struct.unpack_from(order + "HH", head, 54)
        ph_fmt, ph_off, ph_size = order + "IIQQQQQQ", 2, 5
    else:
        phoff, shoff = struct.unpack_from(order + "II", head, 28)
        phentsize, phnum = struct.unpack_from(order + "HH", head, 42)
        ph_fmt, ph_off, ph_size = order + "IIIIIIII", 1, 4
    wanted = []
    if shoff:  # from just before the section header table to the end (see END_KEPT)
        wanted.append((max(0, shoff - TAIL_KEPT), 1 << 62))
    if phoff + phentsize * phnum > len(head):
        return None if not full else wanted
    for i in range(phnum):
        entry = struct.unpack_from(ph_fmt, head, phoff + i * phentsize)
        if entry[0] == 2:  # PT_DYNAMIC
            wanted.append((entry[ph_off], entry[ph_off] + entry[ph_size]))
    return wanted


class _KeptFile(io.RawIOBase):
    """A read-only, seekable view of :class:`KeptRanges` (for pyelftools)."""

    def __init__(self, kept: KeptRanges) -> None:
        self._kept = kept
        self._pos = 0
        self.missed = False  # a read asked for bytes that were not kept

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._kept.size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def tell(self) -> int:
        return self._pos

    def read(self, size: int | None = -1) -> bytes:
        end = (
            self._kept.size if size is None or size < 0 else min(self._pos + size, self._kept.size)
        )
        if end <= self._pos:
            return b""
        data = self._kept.slice(self._pos, end)
        self._pos = end
        return data


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
        """Inflate the member once, keeping only what the reader needs (the head, the
        dynamic segment, the section header table and the bytes before it); a file laid
        out otherwise is inflated again into a temporary file."""
        assert self._zip is not None
        kept = KeptRanges()
        try:
            self._zip.stream(info, kept.write)
        except (zipfile.BadZipFile, zlib.error) as exc:
            return Unreadable(f"corrupt wheel member ({exc})")
        except OSError as exc:
            return Unreadable(f"cannot read: {exc.strerror or exc}")
        if bytes(kept.head[: len(ELF_MAGIC)]) != ELF_MAGIC:
            return Unreadable("not an ELF file")
        view = kept.file()
        try:
            found = read_shared_object(view)
            if not view.missed:
                return found
        except (NotKept, UnreadableObject):
            if not view.missed:
                raise
        log.debug("%s: a part the reader needs was not kept; inflating it again", info.filename)
        with tempfile.TemporaryFile(prefix="instep-elf-") as spool:
            try:
                self._zip.stream(info, spool.write)
            except (zipfile.BadZipFile, zlib.error) as exc:
                return Unreadable(f"corrupt wheel member ({exc})")
            return read_shared_object(spool)

    def close(self) -> None:
        if self._zip is not None:
            self._zip.close()


def _walk(root: Path) -> dict[str, Path]:
    """Relative posix path -> file, for the shared objects under ``root`` (a symlink to a
    file listed once: ``libfoo.so -> libfoo.so.1`` is one library)."""
    files: dict[str, Path] = {}
    seen: set[str] = set()
    dirs_seen: set[str] = set()
    # symlinked directories are followed (an installed torch linked into a folder, as
    # ``triage --upstream-old`` lays it out), each real directory once
    for dirpath, dirnames, filenames in os.walk(root, followlinks=True):
        real_dir = os.path.realpath(dirpath)
        if real_dir in dirs_seen:
            dirnames[:] = []
            continue
        dirs_seen.add(real_dir)
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
