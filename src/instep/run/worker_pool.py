"""The runner's side of the worker hosts: start them, feed them cases, collect outcomes.

Each worker slot is one ``instep.run.worker_host`` process (a pre-imported fork server)
pinned to one device through the profile's visibility variable (devices are dealt round
robin). :class:`WorkerPool` hands chunks of cases to idle hosts, yields every event they
send, and replaces a host that dies (recording the case it was running as ``crashed``).
A host that stays silent past the case's time limit plus a grace period is killed too.
It knows nothing of the store, reruns or the progress bar: :mod:`instep.run.runner` does.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

from instep.run.host_protocol import ENV_FDS
from instep.run.output_capture import read_tail

log = logging.getLogger(__name__)

HOST_GRACE_S = 60.0
MAX_HOST_FAILURES = 3
MAX_CHUNK = 32  # cases a host is sent at once with --isolate worker
#: Set in every fork server unless the user set them: keep device runtimes uninitialised
#: in the server so forked cases may initialise them. torch.cuda.is_available() (which
#: test modules call at import) otherwise calls cudaGetDeviceCount and poisons every fork
#: ("Cannot re-initialize CUDA in forked subprocess"); with this it asks NVML instead.
FORK_SAFE_ENV = {"PYTORCH_NVML_BASED_CUDA_CHECK": "1"}


@dataclass
class WorkItem:
    nodeid: str
    file: str
    timeout: float | None = None
    attempt: int = 1
    #: set in the case's process for this case only (the backend ladder's rung)
    env: dict[str, str] | None = None
    #: seconds it took last time (the store's durations), for chunk sizes; None: unknown
    estimate: float | None = None


@dataclass
class HostConfig:
    """What every host of a run gets: paths, -k, isolation, time limits, environment."""

    paths: list[str]
    k: str | None
    isolate: str
    timeout: float
    preimport: list[str]
    env: dict[str, str] = field(default_factory=dict)
    visible_devices_env: str | None = None
    devices: list[str] = field(default_factory=list)
    memory_limit_mb: int | None = None
    pytest_args: list[str] = field(default_factory=list)
    collect_only: bool = False
    cwd: Path | None = None
    #: :class:`~instep.run.process_model.ProcessModel` value: who imports the test modules
    model: str = "shared"
    #: the profile's ``[runtime] initialized`` probes, checked by hosts before they fork
    device_probe: list[str] = field(default_factory=list)
    #: pytest's rootdir, as the first collection found it: case processes that collect
    #: for themselves resolve node ids against it
    rootdir: str | None = None
    #: modules the first collection imported before the device was initialised: what a
    #: ``fork`` host started later imports before it forks (``ImportWatch``)
    warm: list[str] = field(default_factory=list)
    #: prepared case processes each host keeps beside its active one (``fork``/``spawn``)
    standbys: int = 0
    #: the profile's ``[runtime] fatal_errors`` and ``healthy`` (``reuse_rule``)
    fatal_errors: list[str] = field(default_factory=list)
    device_healthy: list[str] = field(default_factory=list)


@dataclass
class PoolEvent:
    """Something a host reported: ``collected``, ``start``, ``outcome``, ``host_failed``."""

    kind: str
    worker: int
    device: str | None
    nodeid: str | None = None
    item: WorkItem | None = None
    data: dict[str, Any] = field(default_factory=dict)


class WorkerHost:
    """One host process and its pipes."""

    def __init__(
        self, index: int, config: HostConfig, scratch: Path, collect_first: bool = False
    ) -> None:
        self.index = index
        self.collect_only = config.collect_only
        #: it (``shared``) or its first case process (``fork``, ``spawn``) collects the run
        self.collects = config.collect_only or config.model == "shared" or collect_first
        self.device = config.devices[index % len(config.devices)] if config.devices else None
        self.workdir = scratch / f"w{index}-{time.monotonic_ns()}"
        self.workdir.mkdir(parents=True)
        self.log_path = self.workdir / "host.log"
        env = {**FORK_SAFE_ENV, **os.environ, **config.env}
        if config.visible_devices_env and self.device is not None:
            env[config.visible_devices_env] = self.device
        to_host_r, to_host_w = os.pipe()
        from_host_r, from_host_w = os.pipe()
        env[ENV_FDS] = f"{to_host_r},{from_host_w}"
        with open(self.log_path, "wb") as log_fh:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "instep.run.worker_host"],
                pass_fds=(to_host_r, from_host_w),
                env=env,
                cwd=config.cwd,
                stdin=subprocess.DEVNULL,
                stdout=log_fh,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        os.close(to_host_r)
        os.close(from_host_w)
        self.to_host = Connection(to_host_w, readable=False)
        self.from_host = Connection(from_host_r, writable=False)
        self.to_host.send(
            {
                "paths": config.paths,
                "k": config.k,
                "isolate": config.isolate,
                "timeout": config.timeout,
                "preimport": config.preimport,
                "memory_limit_mb": config.memory_limit_mb,
                "pytest_args": config.pytest_args,
                "collect_only": self.collect_only,
                "collect_first": collect_first and not self.collect_only,
                "workdir": str(self.workdir),
                "model": config.model,
                "device_probe": config.device_probe,
                "rootdir": config.rootdir,
                "warm": config.warm,
                "standbys": config.standbys,
                "fatal_errors": config.fatal_errors,
                "device_healthy": config.device_healthy,
            }
        )
        self.state = "starting"  # -> ready -> idle <-> busy; dead
        self.affinity: str | None = None  # the file its standbys are prepared for
        self.chunk: deque[WorkItem] = deque()
        self.current: WorkItem | None = None
        self.last_heard = time.monotonic()

    def log_tail(self, limit: int = 8000) -> str:
        return read_tail(self.log_path, limit)[0]

    def send_chunk(self, items: list[WorkItem], rootdir: str | None = None, left: int = 0) -> None:
        """Run ``items``; ``left``: how many cases may still come to this host after them
        (its share of the queue), so that it prepares no standby nobody will use."""
        self.chunk = deque(items)
        self.current = None
        self.state = "busy"
        self.last_heard = time.monotonic()
        self.to_host.send(
            {
                "type": "run",
                "cases": [{"nodeid": i.nodeid, "timeout": i.timeout, "env": i.env} for i in items],
                "rootdir": rootdir,
                "left": left,
            }
        )

    def silent_too_long(self, default_timeout: float) -> bool:
        if self.state != "busy":
            return False
        item = self.current or (self.chunk[0] if self.chunk else None)
        limit = (item.timeout if item and item.timeout else default_timeout) + HOST_GRACE_S
        return time.monotonic() - self.last_heard > limit

    def stop(self) -> None:
        with contextlib.suppress(OSError):
            self.to_host.send({"type": "stop"})
        for conn in (self.to_host, self.from_host):
            with contextlib.suppress(OSError):
                conn.close()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(Exception):
            self.proc.wait(timeout=10)
        for conn in (self.to_host, self.from_host):
            with contextlib.suppress(OSError):
                conn.close()


def enqueue(queue: deque[WorkItem], items: list[WorkItem], front: bool = False) -> None:
    """Queue ``items`` in order, at the back, or at the front (work handed back)."""
    if front:
        queue.extendleft(reversed(items))
    else:
        queue.extend(items)


class WorkQueue:
    """The cases waiting for a host, in order, kept per test file.

    A host takes its next chunk from the file its standbys were prepared for when that
    file still has cases (its ``affinity``), else from the file of the oldest case. A
    chunk holds cases of one file: with durations known (``WorkItem.estimate``), as many
    as make up a share of the estimated time left (``1 / (4 x hosts)``, so chunks shrink
    towards the end and no host is left with a long tail), else a share of the count.
    """

    def __init__(self) -> None:
        self._files: dict[str, deque[WorkItem]] = {}
        self._order: deque[str] = deque()  # files, oldest first (a file may repeat)
        self._count = 0
        self._estimated = 0.0

    def __len__(self) -> int:
        return self._count

    def __bool__(self) -> bool:
        return self._count > 0

    def __iter__(self) -> Iterator[WorkItem]:
        seen: set[str] = set()
        for file in self._order:
            if file not in seen:
                seen.add(file)
                yield from self._files.get(file, ())

    def clear(self) -> None:
        self._files.clear()
        self._order.clear()
        self._count = 0
        self._estimated = 0.0

    def push(self, items: list[WorkItem], front: bool = False) -> None:
        """Queue ``items`` in order, at the back, or at the front (work handed back)."""
        for item in reversed(items) if front else items:
            queue = self._files.setdefault(item.file, deque())
            if front:
                queue.appendleft(item)
                self._order.appendleft(item.file)
            else:
                queue.append(item)
                self._order.append(item.file)
            self._count += 1
            self._estimated += item.estimate or 0.0

    def _oldest_file(self) -> str | None:
        while self._order:
            file = self._order[0]
            if self._files.get(file):
                return file
            self._order.popleft()
        return None

    def pop_chunk(self, hosts: int, max_size: int, prefer: str | None = None) -> list[WorkItem]:
        """The next chunk for a host whose standbys are prepared for ``prefer``."""
        file = prefer if prefer and self._files.get(prefer) else self._oldest_file()
        if file is None:
            return []
        queue = self._files[file]
        share = max(1, hosts * 4)
        timed = self._estimated > 0 and queue[0].estimate is not None
        budget = self._estimated / share
        size = max(1, min(max_size, self._count // share))
        chunk: list[WorkItem] = []
        spent = 0.0
        while queue and len(chunk) < max_size:
            item = queue[0]
            if chunk and (spent + (item.estimate or 0.0) > budget if timed else len(chunk) >= size):
                break
            chunk.append(queue.popleft())
            spent += item.estimate or 0.0
        self._count -= len(chunk)
        self._estimated = max(0.0, self._estimated - spent)
        return chunk


class WorkerPool:
    """``workers`` hosts sharing one queue of :class:`WorkItem`.

    Every host collects the run (``shared``: the host itself; ``fork``/``spawn``: its first
    case process, as an xdist worker does); the first collection plans the run. Hosts
    started later (replacements, a resumed run: ``collect=False``) collect nothing.
    """

    def __init__(self, config: HostConfig, workers: int, collect: bool = True) -> None:
        self.config = config
        self.workers = max(1, workers)
        self.scratch = Path(tempfile.mkdtemp(prefix="instep-run-"))
        self.hosts: list[WorkerHost | None] = [None] * self.workers
        self.collect = collect
        self.queue = WorkQueue()
        self.failures = 0
        self.closed = False
        self.collected_once = False
        self.hosts_started = 0  # host processes started, replacements included

    def _new_host(self, index: int, collect_first: bool = False) -> WorkerHost:
        self.hosts_started += 1
        return WorkerHost(index, self.config, self.scratch, collect_first)

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        for i in range(self.workers):
            self.hosts[i] = self._new_host(i, collect_first=self.collect)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        for host in self.hosts:
            if host is not None:
                host.stop()
        shutil.rmtree(self.scratch, ignore_errors=True)

    def submit(self, items: list[WorkItem], front: bool = False) -> None:
        self.queue.push(items, front)

    @property
    def busy(self) -> bool:
        return any(h is not None and h.state == "busy" for h in self.hosts)

    def _dispatch(self) -> None:
        max_size = 1 if self.config.isolate == "case" else MAX_CHUNK
        for host in self.hosts:
            if host is None or host.state != "idle" or not self.queue:
                continue
            chunk = self.queue.pop_chunk(self.workers, max_size, prefer=host.affinity)
            left = math.ceil(len(self.queue) / max(1, len(self._live())))
            host.send_chunk(chunk, self.config.rootdir, left)

    def _live(self) -> list[WorkerHost]:
        return [h for h in self.hosts if h is not None and h.state != "dead"]

    def events(self, poll_s: float = 0.2) -> Iterator[PoolEvent]:
        """Run until the queue is empty and no host is busy, yielding what happens.

        Before hosts have collected, ``collected`` events come first; the caller submits
        work once it has the case list. Iteration also yields ``tick`` events every
        ``poll_s`` so a progress display can refresh.
        """
        while True:
            self._dispatch()
            live = self._live()
            if not live:
                return
            waiting = not self.collected_once and any(
                h.state in ("starting", "ready") for h in live
            )
            if not waiting and not self.queue and not self.busy:
                return
            conns = {h.from_host: h for h in live}
            ready = wait(list(conns), timeout=poll_s)
            for conn in ready:
                host = conns[conn]
                try:
                    msg = conn.recv()
                except (EOFError, OSError):
                    yield from self._host_died(host)
                    continue
                host.last_heard = time.monotonic()
                yield from self._handle(host, msg)
            for host in live:
                if host.state == "dead":
                    continue
                if host.silent_too_long(self.config.timeout):
                    log.warning("worker %d silent past its time limit; killing it", host.index)
                    host.kill()
                    yield from self._host_died(host, reason="the worker host stopped answering")
            yield PoolEvent("tick", -1, None)

    def _handle(self, host: WorkerHost, msg: dict[str, Any]) -> Iterator[PoolEvent]:
        kind = msg["type"]
        if kind == "ready":
            # a host that does not collect serves at once; one that collects says so next
            host.state = "ready" if host.collects else "idle"
            if msg.get("warning"):
                log.warning("worker %d: %s", host.index, msg["warning"])
        elif kind == "note":
            (log.warning if msg.get("warning") else log.info)(
                "worker %d: %s", host.index, msg["message"]
            )
        elif kind == "collected":
            self.config.rootdir = msg.get("rootdir")
            if msg.get("warm"):
                self.config.warm = list(msg["warm"])  # what a replacement host imports
            if host.collect_only:
                host.state = "dead"
                host.stop()
            elif host.state in ("starting", "ready"):
                host.state = "idle"
            if not self.collected_once:
                self.collected_once = True
                yield PoolEvent("collected", host.index, host.device, data=msg)
        elif kind == "start":
            host.current = host.chunk[0] if host.chunk else None
            if host.current is not None:
                yield PoolEvent("start", host.index, host.device, host.current.nodeid, host.current)
        elif kind == "outcome":
            item = host.chunk.popleft() if host.chunk else None
            host.current = None
            if item is None or item.nodeid != msg["nodeid"]:
                log.warning("worker %d reported an unexpected case %s", host.index, msg["nodeid"])
                return
            yield PoolEvent("outcome", host.index, host.device, item.nodeid, item, msg["data"])
        elif kind == "done":
            host.state = "idle"
            host.affinity = msg.get("affinity")
            if host.chunk:  # the child retired after a failure: the rest goes back first
                self.submit(list(host.chunk), front=True)
                host.chunk.clear()
        elif kind in ("fatal", "collect_failed"):
            host.state = "dead"
            data = dict(msg)
            data["log"] = msg.get("log") or host.log_tail()
            host.stop()
            self.hosts[host.index] = None
            yield PoolEvent("host_failed", host.index, host.device, data=data)
            # every host would fail the same way: stop the others as well
            for other in self._live():
                if other.state in ("starting", "ready"):
                    other.kill()
                    other.state = "dead"

    def _host_died(self, host: WorkerHost, reason: str | None = None) -> Iterator[PoolEvent]:
        if host.state == "dead":
            return
        was = host.state
        host.kill()
        host.state = "dead"
        code = host.proc.returncode
        why = reason or f"the worker host exited (status {code})"
        item = host.current or (host.chunk[0] if host.chunk else None)
        if was == "busy" and item is not None:
            host.chunk.popleft()
            data = {
                "status": "crashed",
                "message": f"{why} while running the case",
                "stage": None,
                "evidence": {"host_log": host.log_tail()},
            }
            yield PoolEvent("outcome", host.index, host.device, item.nodeid, item, data)
            if host.chunk:
                self.submit(list(host.chunk), front=True)
        self.failures += 1
        if self.failures > MAX_HOST_FAILURES * self.workers or was in ("starting", "ready"):
            self.hosts[host.index] = None
            if was in ("starting", "ready"):
                yield PoolEvent(
                    "host_failed",
                    host.index,
                    host.device,
                    data={"type": "died", "message": why, "log": host.log_tail()},
                )
            return
        self.hosts[host.index] = self._new_host(host.index)


def check_python_module(name: str) -> bool:
    """Whether ``name`` is importable in this Python, without importing it."""
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False
