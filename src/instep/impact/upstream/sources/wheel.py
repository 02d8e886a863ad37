"""A wheel file read as a :class:`~instep.impact.upstream.sources.snapshot.Snapshot`.

Members are read straight out of the zip archive: the wheel is never extracted,
installed or imported. Digests come from the wheel's ``*.dist-info/RECORD`` (sha256)
when it lists the member, so diffing two wheels reads only the members that changed;
members RECORD does not cover are hashed on first use. Files under
``<name>.data/purelib/`` or ``platlib/`` are listed under their installed paths.
This module does not download wheels (see ``pip_spec``).
"""

from __future__ import annotations

import csv
import io
import logging
import os
import re
import threading
import zipfile
import zlib
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path

from instep.errors import BadInput, MissingInput
from instep.impact.upstream.sources.snapshot import (
    BINARY_PROBE_BYTES,
    DEFAULT_MAX_BYTES,
    is_source_path,
    sha256_digest,
)

log = logging.getLogger(__name__)

#: Bytes of decompressed members a snapshot keeps (the latest read), per process.
READ_BUDGET = 8 << 20
_DATA_LIB = re.compile(r"^[^/]+\.data/(?:purelib|platlib)/")


class WheelSnapshot:
    """The source members (``*.py``, C shim headers) of a wheel, by installed path."""

    def __init__(
        self,
        wheel: Path,
        label: str | None = None,
        *,
        max_bytes: int = DEFAULT_MAX_BYTES,
        also: Callable[[str], bool] | None = None,
    ) -> None:
        wheel = Path(wheel).expanduser()
        if not wheel.exists():
            raise MissingInput(f"wheel file does not exist: {wheel}")
        if not wheel.is_file():
            raise BadInput(f"wheel is not a file: {wheel}")
        try:
            self._zip = zipfile.ZipFile(wheel)
        except (zipfile.BadZipFile, OSError) as exc:
            raise BadInput(f"{wheel} is not a readable wheel (zip archive): {exc}") from None
        self._pid = os.getpid()  # the process the handle is for (see read)
        self.wheel = wheel
        self.label = label if label is not None else wheel.name
        self.max_bytes = max_bytes
        self._members: dict[str, zipfile.ZipInfo] = {}
        # members already decompressed, the latest READ_BUDGET bytes of them: a release
        # analysis reads 6,500 members 11,100 times (the diff, the dataclass pass, the
        # join's passes), 128 of its 238 MB again, mostly soon after the first read;
        # keeping them all held 120+ MiB in every process of the run (issue #32)
        self._read: OrderedDict[str, bytes] = OrderedDict()
        self._read_bytes = 0
        self._lock = threading.Lock()
        record_name: str | None = None
        for info in self._zip.infolist():
            name = info.filename
            if name.endswith("/") or name.startswith("/") or ".." in name.split("/"):
                continue
            if name.endswith(".dist-info/RECORD") and name.count("/") == 1:
                record_name = name
            if not (is_source_path(name) or (also is not None and also(name))):
                continue
            path = _DATA_LIB.sub("", name, count=1)
            if info.file_size > max_bytes:
                log.warning(
                    "skipping %s in %s: %d bytes is over the %d-byte limit",
                    name,
                    wheel.name,
                    info.file_size,
                    max_bytes,
                )
                continue
            self._members[path] = info
        self._record = self._read_record(record_name) if record_name else {}
        self._digests: dict[str, str] = {}

    def __repr__(self) -> str:
        return f"WheelSnapshot({self.label!r})"

    def _read_record(self, record_name: str) -> dict[str, str]:
        """Member name -> ``sha256=...`` for the members RECORD lists with a sha256."""
        try:
            text = self._zip.read(record_name).decode("utf-8")
        except (UnicodeDecodeError, zipfile.BadZipFile, OSError) as exc:
            log.warning("ignoring unreadable %s in %s: %s", record_name, self.wheel.name, exc)
            return {}
        record: dict[str, str] = {}
        for row in csv.reader(io.StringIO(text)):
            if len(row) >= 2 and row[1].startswith("sha256="):
                record[row[0]] = row[1]
        return record

    def entries(self) -> list[zipfile.ZipInfo]:
        """Every member of the wheel, from the central directory read when it was opened:
        for the readers of what is not source (shared objects, C++ headers), so that the
        directory of a 15,000-member torch wheel is parsed once."""
        return self._zip.infolist()

    @property
    def has_record(self) -> bool:
        return bool(self._record)

    # -- Snapshot ------------------------------------------------------------------
    def paths(self) -> list[str]:
        return sorted(self._members)

    def digest(self, path: str) -> str:
        found = self._digests.get(path)
        if found is None:
            info = self._members[path]
            found = self._record.get(info.filename) or sha256_digest(self.read(path))
            self._digests[path] = found
        return found

    def read(self, path: str) -> bytes:
        if self._pid != os.getpid():
            self._forked()
        memo = self._read
        with self._lock:  # the indexing threads read at the same time
            data = memo.get(path)
            if data is not None:
                memo.move_to_end(path)
                return data
        info = self._members[path]
        try:
            data = self._handle().read(info)
        except (zipfile.BadZipFile, OSError, EOFError, zlib.error) as exc:
            raise BadInput(f"cannot read {info.filename} from {self.wheel}: {exc}") from None
        with self._lock:
            if path not in memo:
                memo[path] = data
                self._read_bytes += len(data)
            while self._read_bytes > READ_BUDGET and len(memo) > 1:
                self._read_bytes -= len(memo.popitem(last=False)[1])
        return data

    def read_head(self, path: str, size: int = BINARY_PROBE_BYTES) -> bytes:
        """The first ``size`` bytes of ``path``, decompressing no more than those."""
        info = self._members[path]
        try:
            with self._handle().open(info) as member:
                return member.read(size)
        except (zipfile.BadZipFile, OSError, EOFError, zlib.error) as exc:
            raise BadInput(f"cannot read {info.filename} from {self.wheel}: {exc}") from None

    def _handle(self) -> zipfile.ZipFile:
        if self._pid != os.getpid():
            self._forked()
        return self._zip

    def _forked(self) -> None:
        """In a forked child (a join pass, an indexing worker): a handle of its own, for
        the parent's file offset is shared and moves under reads done at the same time,
        and a lock of its own (another thread of the parent may have held it at the fork)."""
        self._zip = zipfile.ZipFile(self.wheel)
        self._lock = threading.Lock()
        self._pid = os.getpid()

    def close(self) -> None:
        self._zip.close()

    def __enter__(self) -> WheelSnapshot:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
