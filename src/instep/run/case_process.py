"""The process that runs cases: forked from a worker host, or spawned fresh.

A case process isolates itself (own process group, death with its host, ``RLIMIT_AS``,
fds 1 and 2 sent to files, faulthandler), then serves the host's requests: lists of
``(nodeid, env)`` cases, each run through pytest's own ``pytest_runtest_protocol`` with
instep's :class:`~instep.run.pytest_plugin.OutcomeRecorder`, each outcome sent back as a
dict. It retires after one case with ``isolate='case'``, and after a case that may have
left it unusable (:mod:`instep.run.reuse_rule`: under ``shared`` any failure).

Where its items come from depends on the process model (:mod:`instep.run.process_model`):
under ``shared`` it inherits the host's collected items; under ``fork`` and ``spawn`` it
collects for itself, so a module that touches the device at import does so in the
process that runs its cases: a host's first case process collects the whole run (and
reports it, with the modules its host may import: :class:`ImportWatch`), a standby the
file its host names (``{PREPARE: file}``: it says ``prepared`` and waits for cases), and
any other the file or node id of its first request. ``python -m
instep.run.case_process`` is the spawned form: it imports the preimports first.
It never forks and never writes the store; the host watches it and reports its deaths.
"""

from __future__ import annotations

import contextlib
import faulthandler
import importlib
import mmap
import os
import resource
import signal
import sys
import threading
import time
import traceback
from collections.abc import Iterator
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import pytest

from instep.run.host_protocol import last_error_line
from instep.run.output_capture import read_tail, redirect_std_fds, truncate_std_fds
from instep.run.process_model import ImportWatch
from instep.run.pytest_plugin import OutcomeRecorder
from instep.run.reuse_rule import replace_reason

#: The pytest phase a case process is in, written to a shared page (no message per phase).
PHASES = ("", "setup", "call", "teardown")
STAGES_FILE = "stages.json"
PHASE_FILE = "phase"
#: ``"REQUESTS,EVENTS"``: the pipe fds of a spawned case process.
ENV_CASE_FDS = "INSTEP_CASE_FDS"
#: A host's first request to its first case process: collect the whole run, then serve.
COLLECT_RUN = "collect-run"
#: The first request to a standby: ``{PREPARE: file}``, collect it, say so, then wait.
PREPARE = "prepare"


def pytest_base_args(settings: dict[str, Any]) -> list[str]:
    """What every pytest session of a run gets besides its paths."""
    return [
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


def open_phase_board(workdir: Path, create: bool = False) -> mmap.mmap:
    """The page a case process writes its pytest phase to and its host reads.

    File-backed, so that a forked and a spawned case process share it alike."""
    path = workdir / PHASE_FILE
    if create:
        path.write_bytes(b"\0" * mmap.PAGESIZE)
    with open(path, "r+b") as fh:
        return mmap.mmap(fh.fileno(), mmap.PAGESIZE)


def read_phase(board: mmap.mmap) -> str | None:
    code = board[0]
    return (PHASES[code] or None) if code < len(PHASES) else None


class ServeContext:
    """What a case process needs from its host: settings, work directory, phase page."""

    def __init__(self, settings: dict[str, Any], board: mmap.mmap) -> None:
        self.settings = settings
        self.workdir = Path(settings["workdir"])
        self.board = board
        self.recorder = OutcomeRecorder()

    @property
    def isolate_case(self) -> bool:
        return self.settings["isolate"] == "case"


def case_main(
    ctx: ServeContext,
    requests: Connection,
    events: Connection,
    items: dict[str, Any] | None = None,
) -> None:
    """Body of a case process: isolate, then serve ``items`` (inherited), or collect the
    file of the first request and serve what that collected."""
    _isolate_process(ctx)
    if items is not None:
        _serve(ctx, items, requests, events)
        return
    try:
        first = requests.recv()
    except (EOFError, OSError):
        return
    args = pytest_base_args(ctx.settings)
    if first == COLLECT_RUN:  # a host's first case process: the whole run, like xdist
        watch = ImportWatch(ctx.settings.get("device_probe"))
        watch.install()
        plugin = _CollectThenServe(ctx, requests, events, None, watch)
        args = [*ctx.settings["paths"], *args]
        if ctx.settings.get("k"):
            args += ["-k", ctx.settings["k"]]
    elif isinstance(first, dict) and PREPARE in first:  # a standby: its file, then wait
        rootdir = ctx.settings.get("rootdir") or os.getcwd()
        plugin = _CollectThenServe(ctx, requests, events, None, prepared=True)
        args = [os.path.join(rootdir, first[PREPARE]), *args]
        first = None
    else:
        rootdir = ctx.settings.get("rootdir") or os.getcwd()
        if ctx.isolate_case:
            targets = [os.path.join(rootdir, nodeid) for nodeid, _ in first]
        else:
            files = {nodeid.split("::", 1)[0] for nodeid, _ in first}
            targets = sorted(os.path.join(rootdir, f) for f in files)
        plugin = _CollectThenServe(ctx, requests, events, first)
        args = [*targets, *args]
    code = pytest.main(args, plugins=[plugin, ctx.recorder])
    if not plugin.served and first != COLLECT_RUN:
        # pytest stopped before running anything ("found no collectors" after the test
        # module failed to import): each requested case is an error saying why
        why = plugin.collect_error_text() or f"pytest exited with {code} collecting it"
        if plugin.prepared:
            events.send({"type": "prepared", "error": why})
        _serve(ctx, {}, requests, events, first, why)


class CollectingPlugin:
    """What every instep pytest session that collects does: the timeout marker known, no
    terminal reporter (:func:`configure_session`), and its collection errors kept."""

    def __init__(self) -> None:
        self.collect_errors: list[dict[str, str]] = []

    @pytest.hookimpl(trylast=True)
    def pytest_configure(self, config) -> None:  # type: ignore[no-untyped-def]
        configure_session(config)

    def pytest_collectreport(self, report) -> None:  # type: ignore[no-untyped-def]
        if report.failed:
            self.collect_errors.append(collect_error(report))

    def collect_error_text(self) -> str | None:
        return "\n".join(e["longrepr"] for e in self.collect_errors) or None


class _CollectThenServe(CollectingPlugin):
    """pytest plugin of a case process that collects for itself (``fork``, ``spawn``).

    With a ``watch`` it collected the whole run for its host: it reports the cases (the
    host passes them on to the runner, which plans the run from the first report) and the
    modules its host may import without touching the device."""

    def __init__(
        self,
        ctx: ServeContext,
        requests: Connection,
        events: Connection,
        first: list | None,
        watch: ImportWatch | None = None,
        prepared: bool = False,
    ) -> None:
        super().__init__()
        self.ctx = ctx
        self.requests = requests
        self.events = events
        self.first = first
        self.watch = watch
        self.prepared = prepared  # a standby: it says when it has collected
        self.served = False

    def pytest_runtestloop(self, session) -> bool:  # type: ignore[no-untyped-def]
        self.served = True
        items = {item.nodeid: item for item in session.items}
        if self.watch is not None:
            rootdir = str(session.config.rootpath)
            self.events.send(
                {
                    "type": "collected",
                    "cases": collected_cases(session.items),
                    "errors": self.collect_errors,
                    "rootdir": rootdir,
                    "warm": self.watch.safe_modules([rootdir, *self.ctx.settings["paths"]]),
                    # the host imports Inductor's compile entry point before its next fork
                    "dynamo": "torch._dynamo" in sys.modules,
                }
            )
        if self.prepared:
            self.events.send({"type": "prepared", "error": self.collect_error_text()})
        _serve(self.ctx, items, self.requests, self.events, self.first, self.collect_error_text())
        # Served: every fixture was torn down after its chunk's last case (nextitem None).
        # Leave before pytest's unconfigure, whose forced garbage collections walk the whole
        # heap (a second of CPU per process with an OpInfo-sized test module imported).
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


def collect_error(report) -> dict[str, str]:  # type: ignore[no-untyped-def]
    nodeid = report.nodeid or str(report.fspath)
    return {"nodeid": nodeid, "longrepr": str(report.longrepr)[-20_000:]}


def collected_cases(items: list) -> list[dict[str, Any]]:  # type: ignore[type-arg]
    """What the runner plans from: node id, file, time limit marker, device class."""
    return [
        {
            "nodeid": item.nodeid,
            "file": item.nodeid.split("::", 1)[0],
            "timeout": _timeout_marker(item),
            "device": _device_class(item),
        }
        for item in items
    ]


def _timeout_marker(item) -> float | None:  # type: ignore[no-untyped-def]
    marker = item.get_closest_marker("timeout")
    if marker is None:
        return None
    value = marker.args[0] if marker.args else marker.kwargs.get("timeout")
    try:
        return float(value) if value is not None and float(value) > 0 else None
    except (TypeError, ValueError):
        return None


def _device_class(item) -> str | None:  # type: ignore[no-untyped-def]
    """The device a test class was made for: ``device_type`` of the classes that
    ``instantiate_device_type_tests`` makes (``TestFooCUDA``), else a class's ``device``
    string (``test_torchinductor.py``'s ``CpuTests`` and ``GPUTests``)."""
    cls = getattr(item, "cls", None)
    for name in ("device_type", "device"):
        value = getattr(cls, name, None) if cls is not None else None
        if isinstance(value, str) and value:
            device = value.split(":", 1)[0]
            if device == "privateuse1":  # renamed only in setUpClass: TestFooPRIVATEUSE1
                torch_c = getattr(sys.modules.get("torch"), "_C", None)
                name_of = getattr(torch_c, "_get_privateuse1_backend_name", None)
                device = name_of() if name_of is not None else device
            return device
    return None


def configure_session(config) -> None:  # type: ignore[no-untyped-def]
    """Every instep pytest session: the timeout marker known, no terminal reporter.

    Outcomes are data: pytest's terminal output would only land in the cases' output
    files. Unregistered rather than disabled with -p, so a project's addopts that use its
    options (-ra, -q, -v) still parse."""
    config.addinivalue_line(
        "markers", "timeout(seconds): per-case time limit (instep run and pytest-timeout)"
    )
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        config.pluginmanager.unregister(reporter)


def _isolate_process(ctx: ServeContext) -> None:
    with contextlib.suppress(OSError):  # a spawned process already leads its own session
        os.setpgid(0, 0)
    _die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    limit_mb = ctx.settings.get("memory_limit_mb")
    if limit_mb:
        limit = int(limit_mb) * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    redirect_std_fds(ctx.workdir / "stdout.txt", ctx.workdir / "stderr.txt")
    faulthandler.enable(file=sys.stderr, all_threads=True)
    faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True)


def _serve(
    ctx: ServeContext,
    items: dict[str, Any],
    requests: Connection,
    events: Connection,
    first: list | None = None,
    not_collected: str | None = None,
) -> None:
    """Run the requested cases until told to stop, a case fails, or (``case``) one ran."""
    out_path, err_path = ctx.workdir / "stdout.txt", ctx.workdir / "stderr.txt"
    recorder, board = ctx.recorder, ctx.board

    def on_phase(_nodeid: str, phase: str) -> None:
        board[0] = PHASES.index(phase)

    recorder.on_phase = on_phase
    stages_path = ctx.workdir / STAGES_FILE
    _start_stage_snapshots()
    while True:
        if first is not None:
            chunk, first = first, None
        else:
            try:
                chunk = requests.recv()
            except (EOFError, OSError):
                return
        for index, (nodeid, env) in enumerate(chunk):
            board[0] = 0
            truncate_std_fds()
            events.send({"type": "start", "nodeid": nodeid})
            item = items.get(nodeid)
            started = time.time()
            if item is None:
                data = _not_collected(nodeid, not_collected)
            else:
                following = chunk[index + 1][0] if index + 1 < len(chunk) else None
                nextitem = items.get(following) if following else None
                recorder.begin(nodeid)
                with _CaseStages(stages_path) as stages, _case_env(env):
                    item.config.hook.pytest_runtest_protocol(item=item, nextitem=nextitem)
                data = recorder.finish()
                if stages is not None and stages.graphs:
                    # only for a case that imported torch: the host's pre-fork imports stay few
                    from instep.doctor.stage_timing import stage_totals

                    graphs = stages.as_dict().get("graphs", [])
                    data.setdefault("evidence", {})["compile_stages"] = stage_totals(graphs)
            sys.stdout.flush()
            sys.stderr.flush()
            data["stdout_tail"], out_size = read_tail(out_path)
            data["stderr_tail"], err_size = read_tail(err_path)
            data.setdefault("evidence", {})["output_bytes"] = (out_size, err_size)
            data["started_at"] = started
            # a case it could not collect says nothing against the process
            reason = replace_reason(data, ctx.settings) if item or ctx.isolate_case else None
            if reason is not None and not ctx.isolate_case:
                data["evidence"]["process_replaced"] = reason
            events.send({"type": "outcome", "nodeid": nodeid, "data": data})
            if reason is not None:
                events.send({"type": "retire", "reason": reason})
                return
        events.send({"type": "idle"})


def _not_collected(nodeid: str, collect_errors: str | None) -> dict[str, Any]:
    data: dict[str, Any] = {
        "status": "error",
        "stage": "collect",
        "message": f"{nodeid} was not collected in this worker",
    }
    if collect_errors:
        why = last_error_line(collect_errors)
        data["message"] = f"{nodeid} was not collected in its case process: {why}"
        data["longrepr"] = collect_errors
    return data


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
        # only for a case that imported torch: the host's pre-fork imports stay few
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


def _die_with_parent() -> None:
    """Ask Linux to SIGKILL this case process when its worker host dies.

    The case runs in its own process group (so that a time-out kills all it started), so
    killing the host's group would not reach it: without this, a case that outlives its
    host (it killed the host, or the runner killed the host) would be orphaned.
    """
    try:
        # optional dependency: ctypes may be missing (minimal Python builds): the except covers it
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
    (a process kept by ``--isolate worker`` runs the next case as it was)."""
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


def main() -> int:
    """A spawned case process: settings first, then the preimports, then serve."""
    fd_req, fd_ev = (int(x) for x in os.environ[ENV_CASE_FDS].split(","))
    requests = Connection(fd_req, writable=False)
    events = Connection(fd_ev, readable=False)
    settings: dict[str, Any] = requests.recv()
    code = 0
    try:
        for module in settings.get("preimport", []):
            importlib.import_module(module)
        ctx = ServeContext(settings, open_phase_board(Path(settings["workdir"])))
        case_main(ctx, requests, events)
    except BaseException:
        with contextlib.suppress(Exception):
            traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # no interpreter teardown: what the cases left running is not waited for


if __name__ == "__main__":
    sys.exit(main())
