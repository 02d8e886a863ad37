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
run, and the host imports, in a thread joined before the next fork, what that collection
found it could import without touching the device. With ``--isolate worker`` one case
process serves chunk after chunk until a case fails.

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
import os
import signal
import subprocess
import sys
import time
import traceback
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

import pytest

from instep.run.case_process import (
    COLLECT_RUN,
    ENV_CASE_FDS,
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


class HostSession(CollectingPlugin):
    """The host's state; under ``shared`` also its pytest plugin (collect, then serve)."""

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
        self.child: _Child | None = None
        self.pending_warm: list[str] = []  # imported before the next fork
        self.warm_note: dict[str, Any] | None = None

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
        if not self.settings.get("collect_only"):
            self._warm_compiler()
            gc.freeze()  # forked children do not copy pages just to run the collector
            self.serve()
        return True

    def _warm_compiler(self) -> None:
        if "torch._dynamo" in sys.modules:
            warm_imports(list(WARM_AFTER_DYNAMO))

    def current_phase(self) -> str | None:
        return read_phase(self.ctx.board)

    # -- serving ---------------------------------------------------------------------------

    def serve(self) -> None:
        while True:
            waiting_for = [self.runner_in]
            collecting = self.child is not None and not self.child.collected
            if collecting:
                waiting_for += [self.child.events, self.child.sentinel]
            ready = wait(waiting_for)
            if collecting and self.runner_in not in ready:
                if not self._first_collection():
                    break
                continue
            try:
                msg = self.runner_in.recv()
            except (EOFError, OSError):
                break
            if msg["type"] == "stop":
                break
            if msg["type"] == "run":
                if msg.get("rootdir"):  # where the collecting process found the node ids' root
                    self.settings["rootdir"] = msg["rootdir"]
                if not self.run_chunk(msg["cases"]):
                    break
        if self.child is not None:
            self.child.kill()

    # -- the first case process collects the whole run (``fork``, ``spawn``) -------------

    def start_first_child(self) -> None:
        """Fork (or spawn) a case process that collects every path of the run, as an
        xdist worker does, reports the cases, and then serves any of them."""
        self.child = self._new_child(None)
        self.child.requests.send(COLLECT_RUN)

    def _first_collection(self) -> bool:
        """The collecting case process spoke or died; ``False`` when it died."""
        child = self.child
        assert child is not None
        event = None
        with contextlib.suppress(EOFError, OSError):
            if child.events.poll():
                event = child.events.recv()
        if event is not None and event.get("type") == "collected":
            self._on_collected(event)
            return True
        status = child.reap(block=True)
        self.child = None
        tail = self._tails()["stderr_tail"]
        self.runner_out.send(
            {"type": "collect_failed", "exit_code": status, "log": tail or "no output"}
        )
        return False

    def _on_collected(self, event: dict[str, Any]) -> None:
        """Pass the first case process's collection on, and keep what the tests import
        without touching the device: the host imports it before its next fork.

        Not in a thread while the case process runs: a module-level ``threading.local``
        (``torch.testing``'s precision) set at import belongs to the importing thread, and
        a process forked from the main thread would not see it."""
        assert self.child is not None
        self.child.collected = True
        self.settings["rootdir"] = event.get("rootdir")
        self.runner_out.send(event)
        self.pending_warm = list(event.get("warm") or [])

    def run_chunk(self, cases: list[dict[str, Any]]) -> bool:
        """Run ``cases`` in order; ``False`` when the runner went away."""
        pending = list(cases)
        file = pending[0]["nodeid"].split("::", 1)[0] if pending else ""
        child_file = self.child.file if self.child is not None else None
        if self.items is None and child_file is not None and child_file != file:
            self.child.stop()  # it imported another test file: the next one starts fresh
            self.child = None
        while pending:
            if self.child is None:
                self.child = self._new_child(file)
            child = self.child
            child.send([(c["nodeid"], c.get("env")) for c in pending])
            current: dict[str, Any] | None = None
            started = time.monotonic()
            if not child.collected:
                started += COLLECT_LIMIT_S  # its first case waits for it to collect
            while True:
                if current is None and not pending:
                    self._end_of_chunk(child)
                    break
                case = current or pending[0]
                limit = case.get("timeout") or self.settings["timeout"]
                remaining = limit - (time.monotonic() - started)
                ready = wait([child.events, child.sentinel, self.runner_in], max(0.0, remaining))
                if self.runner_in in ready and not _runner_wants_more(self.runner_in):
                    child.kill()
                    self.child = None
                    return False
                if child.events in ready:
                    try:
                        event = child.events.recv()
                    except (EOFError, OSError):
                        event = None
                    if event is not None:
                        kind = event["type"]
                        if kind == "collected":
                            self._on_collected(event)
                            continue
                        if kind == "start":
                            child.collected = True
                            current = pending[0]
                            started = child.case_started = time.monotonic()
                            self.runner_out.send({"type": "start", "nodeid": current["nodeid"]})
                        elif kind == "outcome":
                            data = event["data"]
                            data["pid"] = child.pid
                            self.runner_out.send(
                                {"type": "outcome", "nodeid": pending[0]["nodeid"], "data": data}
                            )
                            pending.pop(0)
                            current = None
                        elif kind == "retire":
                            child.reap(block=True)
                            self.child = None
                            break
                        elif kind == "idle":
                            break
                        continue
                if child.sentinel in ready or (child.events in ready):
                    # the child died without retiring: the case in flight crashed
                    status = child.reap(block=True)
                    self.child = None
                    self._send_crash(case, status, self.current_phase(), child)
                    pending.pop(0)
                    break
                if not ready:
                    self._send_timeout(case, limit, self.current_phase(), child)
                    self.child = None
                    pending.pop(0)
                    break
        self.runner_out.send({"type": "done"})
        return True

    def warm(self, modules: list[str]) -> None:
        """Import what the test modules import and their collection found device-free;
        the note saying so waits in ``warm_note``."""
        if self.model is not ProcessModel.FORK or not modules:
            return
        started = time.monotonic()
        failed = warm_imports(modules)
        took = time.monotonic() - started
        note = f"imported {len(modules) - len(failed)} modules the tests use in {took:.1f} s"
        warning = device_initialised(self.settings.get("device_probe"))
        if warning:
            self.model = ProcessModel.SPAWN
            note += (
                f", and that initialised the device ({self.settings.get('device_probe')}() is"
                " true): case processes are spawned, not forked"
            )
        self.warm_note = {"type": "note", "message": note, "warning": warning}

    def _send_warm_note(self) -> None:
        if self.warm_note is not None:
            self.runner_out.send(self.warm_note)
            self.warm_note = None

    def _new_child(self, file: str | None) -> _Child:
        if self.pending_warm:
            self.warm(self.pending_warm)
            self.pending_warm = []
            gc.freeze()
            self._send_warm_note()
        if self.model is ProcessModel.SPAWN:
            return _Child.spawn(self, file)
        return _Child.fork(self, file)

    def _end_of_chunk(self, child: _Child) -> None:
        """After the chunk's last outcome the child says 'idle' (kept) or 'retire' (gone)."""
        ready = wait([child.events, child.sentinel], 30.0)
        if child.events in ready:
            try:
                event = child.events.recv()
            except (EOFError, OSError):
                event = {"type": "died"}
            if event["type"] == "idle":
                return
            if event["type"] == "retire":
                child.reap(block=True)
                self.child = None
                return
        child.kill()  # it died, or said nothing: the next chunk gets a fresh one
        self.child = None

    def _tails(self) -> dict[str, Any]:
        out, out_size = read_tail(self.workdir / "stdout.txt")
        err, err_size = read_tail(self.workdir / "stderr.txt")
        return {"stdout_tail": out, "stderr_tail": err, "sizes": (out_size, err_size)}

    def _send_crash(self, case: dict[str, Any], status: int, phase: str | None, child) -> None:  # type: ignore[no-untyped-def]
        tails = self._tails()
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
        tails = self._tails()
        evidence = {"output_bytes": tails.pop("sizes"), "timeout_s": limit}
        stage = phase
        compiling = _compile_in_progress(self.workdir / STAGES_FILE)
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


def _runner_wants_more(conn: Connection) -> bool:
    """The runner wrote while a chunk runs: only a 'stop' or a closed pipe do that."""
    try:
        msg = conn.recv()
    except (EOFError, OSError):
        return False
    return msg.get("type") != "stop"


class _Child:
    """One case process and the host's end of its pipes."""

    def __init__(
        self,
        pid: int,
        requests: Connection,
        events: Connection,
        file: str | None,
        collected: bool,
    ) -> None:
        self.pid = pid
        self.requests = requests
        self.events = events
        self.file = file  # the test file it collected (``fork``/``spawn``; None: all)
        self.collected = collected  # False until its first case starts
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
    def fork(cls, host: HostSession, file: str | None) -> _Child:
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
                case_main(
                    host.ctx,
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
        return cls(pid, requests, Connection(ev_r, writable=False), file, host.items is not None)

    @classmethod
    def spawn(cls, host: HostSession, file: str | None) -> _Child:
        """A fresh interpreter (``python -m instep.run.case_process``) for ``file``."""
        req_r, req_w = os.pipe()
        ev_r, ev_w = os.pipe()
        env = {**os.environ, ENV_CASE_FDS: f"{req_r},{ev_w}"}
        env.pop(ENV_FDS, None)
        with open(host.workdir / "stderr.txt", "ab") as log_fh:  # what fails before capture
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
        child = cls(
            proc.pid,
            Connection(req_w, readable=False),
            Connection(ev_r, writable=False),
            file,
            False,
        )
        child.proc = proc
        child.requests.send(host.settings)
        return child

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
    if not collects:
        if "torch" in sys.modules:  # no test module tells here whether it compiles
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
        host.warm(settings.get("warm") or [])  # a replacement host: known already
        host._send_warm_note()
        gc.freeze()  # forked case processes do not copy these pages
        if settings.get("collect_first"):
            host.start_first_child()
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
