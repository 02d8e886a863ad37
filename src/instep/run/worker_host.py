"""The worker host of one slot: ``python -m instep.run.worker_host``.

Started by the runner with two pipe fds (``INSTEP_HOST_FDS``) and its device already
pinned in the environment. It imports torch (and the backend package) *before any device
is initialised*, then serves the runner's requests: for each chunk of cases it hands the
cases to a case process (:mod:`instep.run.case_process`), forked from itself or spawned,
and watches it.

What the host imports depends on the process model (:mod:`instep.run.process_model`):
under ``shared`` it starts a pytest session over the run's paths, collects once and
reports the node ids, and its case processes inherit the collected items; under ``fork``
and ``spawn`` it never imports a test module: its first case process collects the whole
run and reports it (then serves cases of any file), later ones collect the file they
run, and the host imports, in its main thread between events and before its next fork,
what that collection found it could import without touching the device (Inductor's
compile entry point too, when the tests imported Dynamo). It then keeps ``standbys``
case processes prepared beside the active one (:class:`HostSession`), so that the next
process it needs has already imported its test file. With ``--isolate worker`` one case
process serves chunk after chunk until the reuse rule retires it
(:mod:`instep.run.reuse_rule`).

A death by a signal, an ``os._exit``, a time-out (faulthandler dump, then SIGKILL of the
case process's group) or memory exhaustion (``RLIMIT_AS`` in the case process) becomes a
``crashed``/``timeout`` outcome with the phase it was in and its output tail. Outcomes go
to the runner as pickled dicts; the host never writes the store.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import json
import mmap
import os
import shutil
import signal
import subprocess
import sys
import time
import traceback
from collections import deque
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

import pytest

from instep.run.case_process import (
    COLLECT_RUN,
    ENV_CASE_FDS,
    PREPARE,
    STAGES_FILE,
    CollectingPlugin,
    ServeContext,
    case_main,
    collected_cases,
    open_phase_board,
    pytest_base_args,
    read_phase,
)
from instep.run.exception_chain import faulthandler_frames
from instep.run.host_protocol import ENV_FDS, signal_name
from instep.run.output_capture import read_tail
from instep.run.process_model import ProcessModel, device_initialised, warm_imports

DUMP_GRACE_S = 0.5
#: Imported in the host (``shared``: after collection, when the suite imported Dynamo;
#: ``fork``: at start, checked by the device probes after): the first compile's lazy
#: imports (~5 s) are then paid once, not in every forked case.
WARM_AFTER_DYNAMO = ("torch._inductor.compile_fx",)
#: How long a case process that collects for itself may take before its first case starts
#: (importing an upstream test module and its OpInfo database takes seconds, not minutes).
COLLECT_LIMIT_S = 600.0
#: Standbys that died before serving (a broken import, memory): the host prepares no more.
MAX_STANDBY_DEATHS = 3


class HostSession(CollectingPlugin):
    """The host's state and its event loop; under ``shared`` also its pytest plugin
    (collect, then serve).

    One case process is *active* (it runs the current chunk); under ``fork`` and
    ``spawn`` up to ``standbys`` more are *prepared* beside it: forked (or spawned) from
    the host, they import and collect the file of the host's last chunk while the active
    one runs cases, then wait. The next case process the host needs (``--isolate case``:
    for every case; ``worker``: when the reuse rule retires one) is a prepared standby of
    that file when there is one. Between events the host does its background work one
    step at a time: the device-free imports the first collection found (before its next
    fork, so every later case process inherits them), then forking standbys.
    """

    def __init__(self, runner_in: Connection, runner_out: Connection, settings: dict[str, Any]):
        super().__init__()
        self.runner_in = runner_in
        self.runner_out = runner_out
        self.settings = settings
        self.model = ProcessModel(settings.get("model", "shared"))
        self.workdir = Path(settings["workdir"])
        self.ctx = ServeContext(settings, open_phase_board(self.workdir, create=True))
        self.recorder = self.ctx.recorder
        self.collected_sent = False
        self.items: dict[str, Any] | None = None  # collected here (``shared`` only)
        self.active: _Child | None = None  # the case process running the current chunk
        self.standbys: list[_Child] = []  # prepared (or preparing) for ``affinity``
        self.want_standbys = int(settings.get("standbys") or 0)
        self.standby_deaths = 0  # standbys that died before serving: stop after a few
        self.affinity: str | None = None  # the file of the last chunk: what standbys collect
        self.left = 0  # cases the runner may still send after the current chunk (a share)
        self.collected_once = False  # the first collection was passed on (or not needed)
        self.pending_warm: list[str] = []  # imported before the next fork
        self.warm_eagerly = False  # in background steps (standbys or --isolate case)
        self.warm_note: dict[str, Any] | None = None
        self.warm_done: list[str] = []
        self.warm_failed: list[str] = []
        self.warm_s = 0.0
        self.child_seq = 0
        # the chunk in progress: cases not yet reported, the one running, its start
        self.chunk: deque[dict[str, Any]] = deque()
        self.chunk_open = False
        self.current: dict[str, Any] | None = None
        self.started = 0.0

    # -- collection (``shared``, and ``--collect-only``) --------------------------------

    def pytest_runtestloop(self, session) -> bool:  # type: ignore[no-untyped-def]
        self.items = {item.nodeid: item for item in session.items}
        self.runner_out.send(
            {
                "type": "collected",
                "cases": collected_cases(session.items),
                "errors": self.collect_errors,
                "rootdir": str(session.config.rootpath),
            }
        )
        self.collected_sent = True
        self.collected_once = True
        if not self.settings.get("collect_only"):
            self._warm_compiler()
            gc.freeze()  # forked children do not copy pages just to run the collector
            self.serve()
        return True

    def _warm_compiler(self) -> None:
        if "torch._dynamo" in sys.modules:
            warm_imports(list(WARM_AFTER_DYNAMO))

    # -- the event loop ------------------------------------------------------------------

    def serve(self) -> None:
        """Serve the runner until it says stop or goes away."""
        try:
            while self._step():
                pass
        finally:
            for child in [self.active, *self.standbys]:
                if child is not None:
                    child.kill()
                    self._drop(child)
            self.active = None
            self.standbys = []

    def _step(self) -> bool:
        """Wait for the next event (or the current case's time limit) and handle it;
        with nothing to handle, do one step of background work. ``False``: stop."""
        conns: list[Any] = [self.runner_in]
        active = self.active
        if active is not None:
            conns += [active.events, active.sentinel]
        for standby in self.standbys:
            conns += [standby.events, standby.sentinel]
        background = self._background_due()
        ready = wait(conns, 0.0 if background else self._until_time_limit())
        if self.runner_in in ready:
            try:
                msg = self.runner_in.recv()
            except (EOFError, OSError):
                return False
            if msg["type"] == "stop":
                return False
            if msg["type"] == "run":
                if msg.get("rootdir"):  # where the collecting process found the node ids' root
                    self.settings["rootdir"] = msg["rootdir"]
                self.left = int(msg.get("left", 0))
                self._begin_chunk(msg["cases"])
        for standby in list(self.standbys):
            if standby.events in ready or standby.sentinel in ready:
                self._standby_spoke(standby)
        spoke = active is not None and (active.events in ready or active.sentinel in ready)
        if spoke and active is self.active and not self._active_spoke(active):
            return False
        self._check_time_limit()
        if not ready and background:
            self._background_step()
        return True

    def _until_time_limit(self) -> float | None:
        if not self.chunk_open or self.active is None or not self.chunk:
            return None
        case = self.current or self.chunk[0]
        limit = case.get("timeout") or self.settings["timeout"]
        return max(0.0, limit - (time.monotonic() - self.started))

    # -- chunks ----------------------------------------------------------------------------

    def _begin_chunk(self, cases: list[dict[str, Any]]) -> None:
        self.chunk = deque(cases)
        self.chunk_open = True
        self.current = None
        if cases:
            self.affinity = _file_of(cases[0])
        self._feed()
        self._trim_standbys()

    def _feed(self) -> None:
        """Hand what is left of the chunk to a case process able to run it."""
        if not self.chunk:
            self._finish_chunk()
            return
        file = _file_of(self.chunk[0])
        child = self.active
        if self.items is None and child is not None and child.file not in (None, file):
            child.stop()  # it imported another test file: the next one starts fresh
            self._drop(child)
            self.active = child = None
        if child is None:
            child = self._take_standby(file) or self._new_child(file)
            self.active = child
        child.send([(c["nodeid"], c.get("env")) for c in self.chunk])
        self.started = time.monotonic()
        if not child.collected:
            self.started += COLLECT_LIMIT_S  # its first case waits for it to collect

    def _finish_chunk(self) -> None:
        if self.chunk_open:
            self.chunk_open = False
            self.current = None
            self.runner_out.send({"type": "done", "affinity": self.affinity})

    def _active_spoke(self, child: _Child) -> bool:
        """The active case process sent an event, or died; ``False``: stop serving."""
        event = None
        with contextlib.suppress(EOFError, OSError):
            if child.events.poll():
                event = child.events.recv()
        if event is not None:
            kind = event["type"]
            if kind == "collected":
                self._on_collected(event)
            elif kind == "prepared":
                child.collected = True
            elif kind == "start" and self.chunk:
                child.collected = True
                self.current = self.chunk[0]
                self.started = child.case_started = time.monotonic()
                self.runner_out.send({"type": "start", "nodeid": self.current["nodeid"]})
            elif kind == "outcome" and self.chunk:
                data = event["data"]
                data["pid"] = child.pid
                nodeid = self.chunk.popleft()["nodeid"]
                self.runner_out.send({"type": "outcome", "nodeid": nodeid, "data": data})
                self.current = None
            elif kind == "retire":
                child.reap(block=True)
                self._drop(child)
                self.active = None
                if self.chunk_open:
                    self._feed()
            elif kind == "idle":
                self._finish_chunk()
            return True
        # it died without retiring
        status = child.reap(block=True)
        self.active = None
        if not self.collected_once and child.file is None:  # the first collection failed
            tail = _tails(child.dir)["stderr_tail"]
            self._drop(child)
            self.runner_out.send(
                {"type": "collect_failed", "exit_code": status, "log": tail or "no output"}
            )
            return False
        if self.chunk_open and self.chunk:
            case = self.current or self.chunk.popleft()
            if case is self.current:
                self.chunk.popleft()
            self._send_crash(case, status, read_phase(child.board), child)
            self.current = None
            self._drop(child)
            self._feed()
        else:
            self._drop(child)
            self._finish_chunk()
        return True

    def _check_time_limit(self) -> None:
        remaining = self._until_time_limit()
        if remaining is None or remaining > 0 or self.active is None:
            return
        child = self.active
        case = self.current or self.chunk[0]
        limit = case.get("timeout") or self.settings["timeout"]
        self._send_timeout(case, limit, read_phase(child.board), child)
        self.chunk.popleft()
        self.current = None
        self._drop(child)
        self.active = None
        self._feed()

    # -- the first case process collects the whole run (``fork``, ``spawn``) -------------

    def start_first_child(self) -> None:
        """Fork (or spawn) a case process that collects every path of the run, as an
        xdist worker does, reports the cases, and then serves any of them."""
        self.active = self._new_child(None)
        self.active.requests.send(COLLECT_RUN)

    def _on_collected(self, event: dict[str, Any]) -> None:
        """Pass the first case process's collection on, and keep what the tests import
        without touching the device: the host imports it before its next fork.

        Not in a thread while the case process runs: a module-level ``threading.local``
        (``torch.testing``'s precision) set at import belongs to the importing thread, and
        a process forked from the main thread would not see it. One module per background
        step instead, between events."""
        assert self.active is not None
        self.active.collected = True
        self.collected_once = True
        self.settings["rootdir"] = event.get("rootdir")
        self.runner_out.send(event)
        if self.model is ProcessModel.FORK:
            warm = list(event.get("warm") or [])
            if event.get("dynamo"):
                warm += [m for m in WARM_AFTER_DYNAMO if m not in warm]
            self.pending_warm = [m for m in warm if m not in sys.modules]
        self.warm_eagerly = self.want_standbys > 0 or self.settings["isolate"] == "case"

    # -- standbys and background work -------------------------------------------------------

    def _background_due(self) -> bool:
        if self.pending_warm:
            return self.warm_eagerly
        return self._standby_wanted()

    def _background_step(self) -> None:
        if self.pending_warm:
            self._warm_one()
        elif self._standby_wanted():
            assert self.affinity is not None
            self.standbys.append(self._new_child(self.affinity, standby=True))

    def _standby_wanted(self) -> bool:
        if self.model is ProcessModel.SHARED or not self.collected_once or not self.affinity:
            return False
        stale = [s for s in self.standbys if s.file != self.affinity]
        for standby in stale:  # prepared for a file the host no longer runs
            standby.kill()
            self._drop(standby)
            self.standbys.remove(standby)
        if (
            len(self.standbys) >= self._standbys_needed()
            or self.standby_deaths >= MAX_STANDBY_DEATHS
        ):
            return False
        return _memory_allows([c for c in [self.active, *self.standbys] if c is not None])

    def _standbys_needed(self) -> int:
        """``standbys``, but no more than the cases that may still need a fresh process:
        those after the one running in this chunk, and this host's share of the queue."""
        later = max(0, len(self.chunk) - 1) + self.left
        return min(self.want_standbys, later)

    def _trim_standbys(self) -> None:
        """Stop the standbys no case will need, those still preparing first."""
        surplus = len(self.standbys) - self._standbys_needed()
        for standby in sorted(self.standbys, key=lambda s: s.collected)[: max(0, surplus)]:
            standby.kill()
            self._drop(standby)
            self.standbys.remove(standby)

    def _take_standby(self, file: str) -> _Child | None:
        """The standby prepared for ``file`` that is furthest along, taken out of the list."""
        mine = [s for s in self.standbys if s.file == file]
        if not mine:
            return None
        chosen = next((s for s in mine if s.collected), mine[0])
        self.standbys.remove(chosen)
        return chosen

    def _standby_spoke(self, standby: _Child) -> None:
        event = None
        with contextlib.suppress(EOFError, OSError):
            if standby.events.poll():
                event = standby.events.recv()
        if event is not None:
            if event.get("type") == "prepared":
                standby.collected = True
            return
        standby.reap(block=True)  # died while preparing or waiting: not used
        self.standby_deaths += 1
        self._drop(standby)
        self.standbys.remove(standby)

    def _warm_one(self) -> None:
        """Import the next device-free module the tests use (one step of the warm-up)."""
        name = self.pending_warm.pop(0)
        started = time.monotonic()
        (self.warm_failed if warm_imports([name]) else self.warm_done).append(name)
        self.warm_s += time.monotonic() - started
        if not self.pending_warm:
            self._warm_finished()

    def warm(self, modules: list[str]) -> None:
        """Import all of ``modules`` now (a host started later, before its first fork)."""
        if self.model is not ProcessModel.FORK or not modules:
            return
        self.pending_warm = [m for m in modules if m not in sys.modules]
        while self.pending_warm:
            self._warm_one()

    def _warm_finished(self) -> None:
        """The note saying what the warm-up imported; a device it initialised turns the host
        to ``spawn``. Frozen for the children to share."""
        done = len(self.warm_done)
        note = f"imported {done} modules the tests use in {self.warm_s:.1f} s"
        warning = device_initialised(self.settings.get("device_probe"))
        if warning:
            self.model = ProcessModel.SPAWN
            note += (
                f", and that initialised the device ({self.settings.get('device_probe')}() is"
                " true): case processes are spawned, not forked"
            )
        gc.freeze()
        self.runner_out.send({"type": "note", "message": note, "warning": warning})

    def _new_child(self, file: str | None, standby: bool = False) -> _Child:
        while self.pending_warm:  # every fork from here on inherits them
            self._warm_one()
        if self.items is not None:  # ``shared``: one at a time, in the host's directory
            directory, board = self.workdir, self.ctx.board
        else:
            self.child_seq += 1
            directory = self.workdir / f"c{self.child_seq}"
            directory.mkdir()
            board = open_phase_board(directory, create=True)
        if self.model is ProcessModel.SPAWN:
            child = _Child.spawn(self, file, directory, board)
        else:
            child = _Child.fork(self, file, directory, board)
        if standby:
            child.requests.send({PREPARE: file})
        return child

    def _drop(self, child: _Child) -> None:
        """Forget a reaped case process: its board and directory (unless the host's)."""
        if child.dir != self.workdir:
            with contextlib.suppress(Exception):
                child.board.close()
            shutil.rmtree(child.dir, ignore_errors=True)

    def close_inherited(self) -> None:
        """In a forked case process: close the host's ends of the other case processes'
        pipes, so that a sibling sees its requests end when the host closes them."""
        for child in [self.active, *self.standbys]:
            if child is not None:
                child.close_fds()

    # -- outcomes the host writes itself ---------------------------------------------------

    def _send_crash(self, case: dict[str, Any], status: int, phase: str | None, child) -> None:  # type: ignore[no-untyped-def]
        tails = _tails(child.dir)
        evidence: dict[str, Any] = {"output_bytes": tails.pop("sizes")}
        if os.WIFSIGNALED(status):
            sig = signal_name(os.WTERMSIG(status))
            what, exit_code, signame = f"killed by {sig}", None, sig
            if sig == "SIGKILL" and self.settings.get("memory_limit_mb"):
                evidence["hint"] = "SIGKILL: possibly the out-of-memory killer"
        else:
            exit_code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else status
            what, signame = f"exited with status {exit_code}", None
        message = f"worker process {what} during {phase or 'startup'} of the case"
        self.runner_out.send(
            {
                "type": "outcome",
                "nodeid": case["nodeid"],
                "data": {
                    "status": "crashed",
                    "stage": phase,
                    "signal": signame,
                    "exit_code": exit_code,
                    "message": message,
                    "exception_type": None,
                    "exception_chain": _dump_chain("Crash", message, tails["stderr_tail"]),
                    "duration": round(time.monotonic() - child.case_started, 6),
                    "evidence": evidence,
                    "pid": child.pid,
                    **tails,
                },
            }
        )

    def _send_timeout(self, case: dict[str, Any], limit: float, phase: str | None, child) -> None:  # type: ignore[no-untyped-def]
        child.dump_and_kill()
        tails = _tails(child.dir)
        evidence = {"output_bytes": tails.pop("sizes"), "timeout_s": limit}
        stage = phase
        compiling = _compile_in_progress(child.dir / STAGES_FILE)
        if compiling:
            stage = compiling.get("stage") or phase
            evidence["pytest_phase"] = phase
            evidence["compile_stage"] = compiling.get("stage")
            if compiling.get("layer"):
                evidence["stack_layer"] = compiling["layer"]  # what torch says it was doing
            for key in ("event", "kernel", "name", "elapsed_s"):
                if compiling.get(key) is not None:
                    evidence[f"compile_{key}"] = compiling[key]
        where = f"{phase or 'startup'} of the case" + (
            f", in compile stage {stage}" if compiling else ""
        )
        message = f"Timed out after {limit:g}s during {where}"
        self.runner_out.send(
            {
                "type": "outcome",
                "nodeid": case["nodeid"],
                "data": {
                    "status": "timeout",
                    "stage": stage,
                    "signal": "SIGKILL",
                    "message": message,
                    "exception_chain": _dump_chain("Timeout", message, tails["stderr_tail"]),
                    "duration": round(time.monotonic() - child.case_started, 6),
                    "evidence": evidence,
                    "pid": child.pid,
                    **tails,
                },
            }
        )


def _file_of(case: dict[str, Any]) -> str:
    return str(case["nodeid"]).split("::", 1)[0]


def _tails(directory: Path) -> dict[str, Any]:
    out, out_size = read_tail(directory / "stdout.txt")
    err, err_size = read_tail(directory / "stderr.txt")
    return {"stdout_tail": out, "stderr_tail": err, "sizes": (out_size, err_size)}


#: Memory a host leaves free when it decides whether to prepare one more standby.
STANDBY_RESERVE_MB = 1024


def _memory_allows(children: list[_Child]) -> bool:
    """Whether one more standby fits: twice the largest private memory of this host's
    case processes, plus a reserve, is still available (Linux's ``MemAvailable``); where
    it cannot be read, yes."""
    available = _meminfo_mb("MemAvailable")
    if available is None:
        return True
    largest = max((_private_mb(c.pid) for c in children), default=0.0)
    return available > STANDBY_RESERVE_MB + 2 * largest


def _meminfo_mb(key: str) -> float | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _private_mb(pid: int) -> float:
    """Memory a process does not share with its host (private pages), in MiB; its whole
    resident size where the kernel does not say."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as fh:
            kib = sum(
                int(ln.split()[1])
                for ln in fh
                if ln.startswith(("Private_Clean:", "Private_Dirty:"))
            )
        return kib / 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0.0


def _compile_in_progress(path: Path) -> dict[str, Any] | None:
    """The innermost compile that was running at the last snapshot, if any."""
    try:
        snapshot = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    active = snapshot.get("active") or []
    return active[0] if active and isinstance(active[0], dict) else None


def _dump_chain(kind: str, message: str, stderr_tail: str) -> list[dict[str, Any]]:
    dump = faulthandler_frames(stderr_tail)
    frames = dump["frames"] if dump else []
    return [{"type": kind, "message": message, "relation": None, "frames": frames}]


class _Child:
    """One case process, the host's end of its pipes, its directory and phase board."""

    def __init__(
        self,
        pid: int,
        requests: Connection,
        events: Connection,
        file: str | None,
        collected: bool,
        directory: Path,
        board: mmap.mmap,
    ) -> None:
        self.pid = pid
        self.requests = requests
        self.events = events
        self.file = file  # the test file it collected (``fork``/``spawn``; None: all)
        self.collected = collected  # False until it has collected (said so, or started)
        self.dir = directory  # its output files and stage snapshots
        self.board = board  # the pytest phase it is in
        self.case_started = time.monotonic()
        self._pidfd: int | None = None
        with contextlib.suppress(AttributeError, OSError):
            self._pidfd = os.pidfd_open(pid)
        self.status: int | None = None
        self.proc: subprocess.Popen[bytes] | None = None  # a spawned one

    @property
    def sentinel(self) -> Any:
        return self._pidfd if self._pidfd is not None else self.events

    @classmethod
    def fork(cls, host: HostSession, file: str | None, directory: Path, board: mmap.mmap) -> _Child:
        req_r, req_w = os.pipe()
        ev_r, ev_w = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # the case process
            os.close(req_w)
            os.close(ev_r)
            code = 1
            try:
                host.runner_in.close()
                host.runner_out.close()
                host.close_inherited()
                ctx = host.ctx
                if host.items is None:  # it collects for itself, in its own directory
                    ctx = ServeContext({**host.settings, "workdir": str(directory)}, board)
                case_main(
                    ctx,
                    Connection(req_r, writable=False),
                    Connection(ev_w, readable=False),
                    host.items,
                )
                code = 0
            except BaseException:
                with contextlib.suppress(Exception):
                    traceback.print_exc()
            finally:
                os._exit(code)
        os.close(req_r)
        os.close(ev_w)
        requests = Connection(req_w, readable=False)
        events = Connection(ev_r, writable=False)
        return cls(pid, requests, events, file, host.items is not None, directory, board)

    @classmethod
    def spawn(
        cls, host: HostSession, file: str | None, directory: Path, board: mmap.mmap
    ) -> _Child:
        """A fresh interpreter (``python -m instep.run.case_process``) for ``file``."""
        req_r, req_w = os.pipe()
        ev_r, ev_w = os.pipe()
        env = {**os.environ, ENV_CASE_FDS: f"{req_r},{ev_w}"}
        env.pop(ENV_FDS, None)
        with open(directory / "stderr.txt", "ab") as log_fh:  # what fails before capture
            proc = subprocess.Popen(
                [sys.executable, "-m", "instep.run.case_process"],
                pass_fds=(req_r, ev_w),
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log_fh,
                stderr=log_fh,
                start_new_session=True,
            )
        os.close(req_r)
        os.close(ev_w)
        requests = Connection(req_w, readable=False)
        child = cls(
            proc.pid, requests, Connection(ev_r, writable=False), file, False, directory, board
        )
        child.proc = proc
        child.requests.send({**host.settings, "workdir": str(directory)})
        return child

    def close_fds(self) -> None:
        """Close this process's copies of the pipes (in a forked sibling)."""
        for conn in (self.requests, self.events):
            with contextlib.suppress(OSError):
                conn.close()
        if self._pidfd is not None:
            with contextlib.suppress(OSError):
                os.close(self._pidfd)

    def send(self, cases: list[tuple[str, dict[str, str] | None]]) -> None:
        """Ask the child to run ``(nodeid, env)`` cases (env: set for that case only)."""
        self.case_started = time.monotonic()
        with contextlib.suppress(OSError):
            self.requests.send(cases)

    def reap(self, block: bool = True) -> int:
        """Wait for the child (killing its group if it lingers 5 s); its wait status."""
        if self.status is None:
            deadline = time.monotonic() + 5.0
            while True:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
                if pid:
                    break
                if not block:
                    return -1
                if time.monotonic() > deadline:
                    self._kill_group(signal.SIGKILL)
                    pid, status = os.waitpid(self.pid, 0)
                    break
                time.sleep(0.002)
            self.status = status
            self._close()
        return self.status

    def stop(self) -> None:
        """Let it finish its pytest session and exit (closing its request pipe)."""
        with contextlib.suppress(OSError):
            self.requests.close()
        self.reap(block=True)

    def dump_and_kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGUSR1)  # faulthandler dumps every thread's stack
        time.sleep(DUMP_GRACE_S)
        self.kill()

    def kill(self) -> None:
        self._kill_group(signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            self.reap(block=True)

    def _kill_group(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, sig)
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, sig)

    def _close(self) -> None:
        for conn in (self.requests, self.events):
            with contextlib.suppress(OSError):
                conn.close()
        if self.proc is not None:
            self.proc.returncode = self.status  # reaped here: Popen must not wait again
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None


def _warm_torch() -> None:
    """Pay torch's first-call costs once, here, instead of in every forked case.

    ``torch.testing.assert_close`` lazily imports sympy and the symbolic-shape machinery
    (~1 s) on its first call; nearly every torch test calls it. Only CPU tensors of one
    element are touched: no device is initialised and no thread pool is started.
    """
    # torch only at the host's warm-up, never when instep is imported
    import torch

    with contextlib.suppress(Exception):
        torch.testing.assert_close(torch.ones(1), torch.ones(1))


def main() -> int:
    fd_in, fd_out = (int(x) for x in os.environ[ENV_FDS].split(","))
    runner_in = Connection(fd_in, writable=False)
    runner_out = Connection(fd_out, readable=False)
    settings: dict[str, Any] = runner_in.recv()
    workdir = Path(settings["workdir"])
    workdir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    for module in settings.get("preimport", []):
        try:
            importlib.import_module(module)
        except Exception as exc:  # reported, not raised: the runner decides
            runner_out.send(
                {
                    "type": "fatal",
                    "message": f"importing {module} failed: {type(exc).__name__}: {exc}",
                    "traceback": traceback.format_exc()[-10_000:],
                }
            )
            return 1
    if "torch" in sys.modules:
        _warm_torch()
    host = HostSession(runner_in, runner_out, settings)
    collects = host.model.hosts_collect or bool(settings.get("collect_only"))
    ready: dict[str, Any] = {"type": "ready", "pid": os.getpid(), "model": str(host.model)}
    collect_first = bool(settings.get("collect_first")) and not collects
    if not collects:
        if "torch" in sys.modules and not collect_first:
            # no collection will tell whether the tests compile: import it before forking
            # (a host that collects first imports it after, only if the tests use Dynamo)
            warm_imports(list(WARM_AFTER_DYNAMO))
        if host.model is ProcessModel.FORK and device_initialised(settings.get("device_probe")):
            host.model = ProcessModel.SPAWN
            ready["model"] = str(host.model)
            ready["warning"] = (
                f"importing {', '.join(settings.get('preimport', [])) or 'the preimports'}"
                f" initialised the device ({settings.get('device_probe')}() is true): case"
                " processes are spawned, not forked, which costs an interpreter start each"
            )
    ready["import_s"] = round(time.monotonic() - started, 3)
    runner_out.send(ready)
    if not collects:
        gc.freeze()  # forked case processes do not copy these pages
        if collect_first:
            host.start_first_child()
        else:  # a host started later: what the first collection found is known already
            host.collected_once = True
            host.warm_eagerly = True
            host.warm(settings.get("warm") or [])
        host.serve()
        return 0
    args = [*settings["paths"], *pytest_base_args(settings)]
    if settings.get("k"):
        args += ["-k", settings["k"]]
    code = pytest.main(args, plugins=[host, host.recorder])
    if not host.collected_sent:
        runner_out.send({"type": "collect_failed", "exit_code": int(code)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
