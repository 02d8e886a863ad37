"""The fork server of one worker slot: ``python -m instep.run.worker_host``.

Started by the runner with two pipe fds (``INSTEP_HOST_FDS``) and its device already
pinned in the environment. It imports torch (and the backend package) *before any device
is initialised*, starts a pytest session over the run's paths with instep's plugin,
collects once, reports the collected node ids, then serves requests: for each chunk of
cases it forks a child that runs them through pytest's own ``pytest_runtest_protocol``.

``isolate='case'``: a fresh child per case. ``isolate='worker'``: a child is reused
until a case fails or crashes. The host watches each child: a death by a signal, an
``os._exit``, a time-out (faulthandler dump, then SIGKILL of the child's process group)
or memory exhaustion (``RLIMIT_AS`` in the child) becomes a ``crashed``/``timeout``
outcome with the phase it was in and its output tail, and the next child is forked.
Outcomes go to the runner as pickled dicts; the host never writes the store.
"""

from __future__ import annotations

import contextlib
import faulthandler
import gc
import importlib
import mmap
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Iterator
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

import pytest

from instep.run.host_protocol import ENV_FDS, FAILING, signal_name

DUMP_GRACE_S = 0.5
#: The pytest phase a child is in, written to a shared page (no message per phase).
PHASES = ("", "setup", "call", "teardown")
#: Imported in the host after collection when the suite itself imported Dynamo: the first
#: compile's lazy imports (~5 s) are then paid once, not in every forked case.
WARM_AFTER_DYNAMO = ("torch._inductor.compile_fx",)


class HostSession:
    """pytest plugin in the host: report collection, then serve the runner's requests."""

    def __init__(self, runner_in: Connection, runner_out: Connection, settings: dict[str, Any]):
        from instep.run.pytest_plugin import OutcomeRecorder

        self.runner_in = runner_in
        self.runner_out = runner_out
        self.settings = settings
        self.workdir = Path(settings["workdir"])
        self.recorder = OutcomeRecorder()
        self.collect_errors: list[dict[str, Any]] = []
        self.collected_sent = False
        self.items: dict[str, Any] = {}
        self.child: _Child | None = None
        self.phase_board = mmap.mmap(-1, mmap.PAGESIZE)  # shared with every forked child

    # -- collection ------------------------------------------------------------------------

    @pytest.hookimpl(trylast=True)
    def pytest_configure(self, config) -> None:  # type: ignore[no-untyped-def]
        config.addinivalue_line(
            "markers", "timeout(seconds): per-case time limit (instep run and pytest-timeout)"
        )
        # Outcomes are data: pytest's terminal output would only land in the cases' output
        # files. Unregistered rather than disabled with -p, so a project's addopts that
        # use its options (-ra, -q, -v) still parse.
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            config.pluginmanager.unregister(reporter)

    def pytest_collectreport(self, report) -> None:  # type: ignore[no-untyped-def]
        if report.failed:
            self.collect_errors.append(
                {
                    "nodeid": report.nodeid or str(report.fspath),
                    "longrepr": str(report.longrepr)[-20_000:],
                }
            )

    def pytest_runtestloop(self, session) -> bool:  # type: ignore[no-untyped-def]
        self.items = {item.nodeid: item for item in session.items}
        cases = [
            {
                "nodeid": item.nodeid,
                "file": item.nodeid.split("::", 1)[0],
                "timeout": _timeout_marker(item),
            }
            for item in session.items
        ]
        self.runner_out.send({"type": "collected", "cases": cases, "errors": self.collect_errors})
        self.collected_sent = True
        if not self.settings.get("collect_only"):
            self._warm_compiler()
            gc.freeze()  # forked children do not copy pages just to run the collector
            self.serve()
        return True

    def _warm_compiler(self) -> None:
        if "torch._dynamo" not in sys.modules:
            return
        for module in WARM_AFTER_DYNAMO:
            with contextlib.suppress(Exception):
                importlib.import_module(module)

    def current_phase(self) -> str | None:
        code = self.phase_board[0]
        return (PHASES[code] or None) if code < len(PHASES) else None

    # -- serving ---------------------------------------------------------------------------

    def serve(self) -> None:
        while True:
            try:
                msg = self.runner_in.recv()
            except (EOFError, OSError):
                break
            if msg["type"] == "stop":
                break
            if msg["type"] == "run" and not self.run_chunk(msg["cases"]):
                break
        if self.child is not None:
            self.child.kill()

    def run_chunk(self, cases: list[dict[str, Any]]) -> bool:
        """Run ``cases`` in order; ``False`` when the runner went away."""
        pending = list(cases)
        while pending:
            if self.child is None:
                self.child = _Child.fork(self)
            child = self.child
            child.send([(c["nodeid"], c.get("env")) for c in pending])
            current: dict[str, Any] | None = None
            started = time.monotonic()
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
                        if kind == "start":
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
        from instep.run.output_capture import read_tail

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


STAGES_FILE = "stages.json"


class _CaseStages:
    """The doctor's stage recorder around one case (None where torch is not in use).

    Its snapshot file is what the worker host reads when the case times out: the compile
    stage, event and kernel running at that moment (seed 000 6.12).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.recorder: Any = None

    def __enter__(self) -> Any:
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        if "torch" not in sys.modules:
            return None
        from instep.doctor.stage_timing import StageRecorder

        self.recorder = StageRecorder(snapshot_path=self.path)
        _SNAPSHOTS[0] = self.recorder
        return self.recorder.__enter__()

    def __exit__(self, *exc: object) -> None:
        if self.recorder is not None:
            _SNAPSHOTS[0] = None
            self.recorder.__exit__(*exc)


_SNAPSHOTS: list[Any] = [None]  # the recorder of the case running in this process


def _start_stage_snapshots(interval_s: float = 0.5) -> None:
    """A daemon thread writing the running compile's stages twice a second."""

    def loop() -> None:
        while True:
            time.sleep(interval_s)
            rec = _SNAPSHOTS[0]
            if rec is not None:
                with contextlib.suppress(Exception):
                    if rec.active():
                        rec.write_snapshot(force=True)

    threading.Thread(target=loop, name="instep-stage-snapshots", daemon=True).start()


def _compile_in_progress(path: Path) -> dict[str, Any] | None:
    """The innermost compile that was running at the last snapshot, if any."""
    import json

    try:
        snapshot = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    active = snapshot.get("active") or []
    return active[0] if active and isinstance(active[0], dict) else None


def _dump_chain(kind: str, message: str, stderr_tail: str) -> list[dict[str, Any]]:
    from instep.run.exception_chain import faulthandler_frames

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


def _timeout_marker(item) -> float | None:  # type: ignore[no-untyped-def]
    marker = item.get_closest_marker("timeout")
    if marker is None:
        return None
    value = marker.args[0] if marker.args else marker.kwargs.get("timeout")
    try:
        return float(value) if value is not None and float(value) > 0 else None
    except (TypeError, ValueError):
        return None


class _Child:
    """One forked worker process and the host's end of its pipes."""

    def __init__(self, pid: int, requests: Connection, events: Connection) -> None:
        self.pid = pid
        self.requests = requests
        self.events = events
        self.case_started = time.monotonic()
        self._pidfd: int | None = None
        with contextlib.suppress(AttributeError, OSError):
            self._pidfd = os.pidfd_open(pid)
        self.status: int | None = None

    @property
    def sentinel(self) -> Any:
        return self._pidfd if self._pidfd is not None else self.events

    @classmethod
    def fork(cls, host: HostSession) -> _Child:
        req_r, req_w = os.pipe()
        ev_r, ev_w = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # the child
            os.close(req_w)
            os.close(ev_r)
            code = 1
            try:
                _child_main(
                    host, Connection(req_r, writable=False), Connection(ev_w, readable=False)
                )
                code = 0
            except BaseException:
                with contextlib.suppress(Exception):
                    traceback.print_exc()
            finally:
                os._exit(code)
        os.close(req_r)
        os.close(ev_w)
        return cls(pid, Connection(req_w, readable=False), Connection(ev_r, writable=False))

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
            conn.close()
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None


def _die_with_parent() -> None:
    """Ask Linux to SIGKILL this case process when its worker host dies.

    The case runs in its own process group (so that a time-out kills all it started), so
    killing the host's group would not reach it: without this, a case that outlives its
    host (it killed the host, or the runner killed the host) would be orphaned.
    """
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the pool's group kill is all there is
        return
    if os.getppid() == 1:  # the host died before the request took effect
        os._exit(137)


@contextlib.contextmanager
def _case_env(env: dict[str, str] | None) -> Iterator[None]:
    """``env`` set in this process for one case, the previous values back afterwards
    (a child kept by ``--isolate worker`` runs the next case as it was)."""
    if not env:
        yield
        return
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _child_main(host: HostSession, requests: Connection, events: Connection) -> None:
    from instep.run.output_capture import read_tail, redirect_std_fds, truncate_std_fds

    os.setpgid(0, 0)
    _die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    host.runner_in.close()
    host.runner_out.close()
    settings = host.settings
    limit_mb = settings.get("memory_limit_mb")
    if limit_mb:
        import resource

        limit = int(limit_mb) * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    out_path, err_path = host.workdir / "stdout.txt", host.workdir / "stderr.txt"
    redirect_std_fds(out_path, err_path)
    faulthandler.enable(file=sys.stderr, all_threads=True)
    faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True)
    recorder = host.recorder
    board = host.phase_board

    def on_phase(_nodeid: str, phase: str) -> None:
        board[0] = PHASES.index(phase)

    recorder.on_phase = on_phase
    isolate_case = settings["isolate"] == "case"
    stages_path = host.workdir / STAGES_FILE
    _start_stage_snapshots()
    while True:
        try:
            chunk: list[tuple[str, dict[str, str] | None]] = requests.recv()
        except (EOFError, OSError):
            return
        for index, (nodeid, env) in enumerate(chunk):
            board[0] = 0
            truncate_std_fds()
            events.send({"type": "start", "nodeid": nodeid})
            item = host.items.get(nodeid)
            started = time.time()
            if item is None:
                data: dict[str, Any] = {
                    "status": "error",
                    "stage": "collect",
                    "message": f"{nodeid} was not collected in this worker",
                }
            else:
                following = chunk[index + 1][0] if index + 1 < len(chunk) else None
                nextitem = host.items.get(following) if following else None
                recorder.begin(nodeid)
                with _CaseStages(stages_path) as stages, _case_env(env):
                    item.config.hook.pytest_runtest_protocol(item=item, nextitem=nextitem)
                data = recorder.finish()
                if stages is not None and stages.graphs:
                    from instep.doctor.stage_timing import stage_totals

                    graphs = stages.as_dict().get("graphs", [])
                    data.setdefault("evidence", {})["compile_stages"] = stage_totals(graphs)
            sys.stdout.flush()
            sys.stderr.flush()
            data["stdout_tail"], out_size = read_tail(out_path)
            data["stderr_tail"], err_size = read_tail(err_path)
            data.setdefault("evidence", {})["output_bytes"] = (out_size, err_size)
            data["started_at"] = started
            events.send({"type": "outcome", "nodeid": nodeid, "data": data})
            if isolate_case or data["status"] in FAILING:
                events.send({"type": "retire"})
                return
        events.send({"type": "idle"})


def _warm_torch() -> None:
    """Pay torch's first-call costs once, here, instead of in every forked case.

    ``torch.testing.assert_close`` lazily imports sympy and the symbolic-shape machinery
    (~1 s) on its first call; nearly every torch test calls it. Only CPU tensors of one
    element are touched: no device is initialised and no thread pool is started.
    """
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
    runner_out.send({"type": "ready", "pid": os.getpid(), "import_s": time.monotonic() - started})

    host = HostSession(runner_in, runner_out, settings)
    args = [
        *settings["paths"],
        "-p",
        "no:cacheprovider",
        "-p",
        "no:xdist",
        "-p",
        "no:timeout",  # instep enforces time limits (and honours the timeout marker)
        "-s",
        "--continue-on-collection-errors",
        *settings.get("pytest_args", []),
    ]
    if settings.get("k"):
        args += ["-k", settings["k"]]
    code = pytest.main(args, plugins=[host, host.recorder])
    if not host.collected_sent:
        runner_out.send({"type": "collect_failed", "exit_code": int(code)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
