"""``instep run`` as a library call: collect, plan, execute in isolated workers, store.

:func:`execute_run` creates (or resumes) a run in a :class:`~instep.store.Store`, has the
worker hosts collect the paths, keeps the planned cases (``--shard`` applied), runs what
has no final outcome yet, and commits each outcome as it arrives. ``--reruns N`` keeps
every attempt; the last is ``final`` and a pass after a failure is marked ``flaky``. A
collection error or a conftest that raises is an outcome of layer ``env``, not a crash of
the run. Each non-passing outcome is filed (layer, category, signature) before it is
stored by the classifier the caller injects (an :class:`OutcomeClassifier`, such as
``instep.triage.classifier.Classifier``): ``run`` imports nothing from ``triage``.
:func:`collect_cases` is ``--collect-only``.
``--engine ray`` runs the same loop over :class:`~instep.run.ray_engine.RayPool` (Ray
tasks across a cluster) instead of a local :class:`WorkerPool`. Rendering is the
reporter's job.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from instep.doctor.version_matrix import read_version_matrix
from instep.errors import BadInput, InstepError, MissingDependency, MissingInput
from instep.inductor_cache import CACHE_VARIABLES, cache_state, inductor_cache
from instep.outcome import FAILING, MANIFESTATIONS
from instep.profiles import Profile
from instep.run.balancing import longest_first, standbys_per_host
from instep.run.exception_chain import module_from_path
from instep.run.host_protocol import last_error_line
from instep.run.process_model import choose as choose_model
from instep.run.sharding import select_shard
from instep.run.worker_pool import HostConfig, PoolEvent, WorkerPool, WorkItem, check_python_module

if TYPE_CHECKING:  # the store (SQLAlchemy) is imported once the worker hosts are starting
    from instep.store import Run, Store

log = logging.getLogger(__name__)

#: pytest's exit codes, which ``instep run`` follows.
EXIT_OK, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_NO_TESTS = 0, 1, 130, 5


class OutcomeClassifier(Protocol):
    """What the runner asks of triage, injected so that ``run`` never imports it."""

    def file_outcome(self, data: dict[str, Any], nodeid: str) -> None:
        """File a non-passing outcome in place (layer, category, signature, evidence)."""

    def signature(self, exception_type: str | None, message: str | None) -> str:
        """The stored signature of a failure the runner files itself (collection errors)."""


#: Builds a run's classifier from its profile and the directories generated code is
#: written to (``generated_roots``); ``instep.triage.classifier.Classifier`` is one.
ClassifierFactory = Callable[[Profile, tuple[str, ...]], OutcomeClassifier]


@dataclass
class RunOptions:
    paths: list[str] = field(default_factory=list)
    k: str | None = None
    workers: int = 1
    devices: list[str] = field(default_factory=list)
    isolate: str | None = None  # None: the profile's default_isolation
    timeout: float = 600.0
    reruns: int = 0
    shard: tuple[int, int] | None = None
    name: str | None = None
    tier: str | None = None
    preimport: list[str] | None = None  # None: torch and the profile's backend package
    memory_limit_mb: int | None = None
    pytest_args: list[str] = field(default_factory=list)
    inductor_cache_dir: Path | None = None
    argv: list[str] = field(default_factory=list)
    cwd: Path | None = None
    engine: str = "local"  # 'local' (a WorkerPool here) or 'ray' (instep.run.ray_engine)
    address: str | None = None  # the Ray cluster: None (start one here), 'auto', 'ray://...'
    ray_resource: str | None = None  # None: the profile's device_resource, else CPU
    max_tasks: int | None = None  # Ray tasks in flight at most [twice the resource's units]
    process_model: str | None = None  # None: the profile's [runtime] fork decides
    device_class: str | None = None  # only cases of test classes made for this device
    standbys: int | None = None  # prepared case processes per host [balancing.standbys_per_host]
    #: ``instep run --impact``: the report and, per test file, the units that chose it
    impact: dict[str, Any] | None = None


@dataclass
class CollectedCase:
    nodeid: str
    file: str
    timeout: float | None = None
    device: str | None = None  # the device its test class was made for, if any


@dataclass
class Collection:
    cases: list[CollectedCase]
    errors: list[dict[str, Any]]


@dataclass
class RunResult:
    run: Run
    counts: Counter[str]
    planned: int
    exit_code: int
    wall_s: float
    status: str
    hosts_started: int = 0  # worker hosts the local pool started (0 with Ray: its workers)


class RunReporter:
    """What ``execute_run`` tells its caller as it goes; the default says nothing."""

    def run_started(self, run: Run, resumed: bool) -> None: ...

    def plan_ready(self, total: int, already_done: int) -> None: ...

    def case_started(self, nodeid: str, worker: int) -> None: ...

    def outcome(self, nodeid: str, status: str, final: bool, data: dict[str, Any]) -> None: ...

    def tick(self) -> None: ...

    def run_finished(self, result: RunResult) -> None: ...


def default_preimport(profile: Profile) -> list[str]:
    """torch and the backend package; Dynamo/Inductor are warmed after collection when the
    suite imports them (see ``worker_host.WARM_AFTER_DYNAMO``), or name them here."""
    backend = [profile.backend_package] if profile.backend_package else []
    return ["torch", *backend]


def check_preimport(modules: list[str], profile: Profile) -> None:
    for module in modules:
        if "." in module:  # finding a submodule imports its package: the host checks it
            continue
        if not check_python_module(module):
            hint = (
                "install the torch your backend needs, or pass --preimport none to run a"
                " suite that does not use torch"
                if module == "torch"
                else f"install it, or choose another profile than '{profile.name}'"
            )
            raise MissingDependency(module, f"instep run (profile '{profile.name}')", hint)


#: torch.testing's switch: device-type test classes for these devices only.
ONLY_FOR = "PYTORCH_TESTING_DEVICE_ONLY_FOR"


def _run_env(profile: Profile, settings: dict[str, Any], opts: RunOptions) -> dict[str, str]:
    """What every case process gets on top of the caller's environment."""
    env = dict(profile.env)
    caller = {k: os.environ[k] for k in CACHE_VARIABLES if os.environ.get(k)}
    env.update(caller)  # the user's cache (a CI cache, a clean-cache experiment) wins
    if opts.inductor_cache_dir is not None and "TORCHINDUCTOR_CACHE_DIR" not in env:
        env["TORCHINDUCTOR_CACHE_DIR"] = str(opts.inductor_cache_dir)
    device = settings.get("device_class")
    if device and not os.environ.get(ONLY_FOR) and ONLY_FOR not in env:
        env[ONLY_FOR] = device  # instantiate_device_type_tests makes only DEV's classes
    return env


def _host_config(profile: Profile, settings: dict[str, Any], opts: RunOptions) -> HostConfig:
    env = _run_env(profile, settings, opts)
    return HostConfig(
        paths=settings["paths"],
        k=settings.get("k"),
        isolate=settings["isolate"],
        timeout=settings["timeout"],
        preimport=settings["preimport"],
        env=env,
        visible_devices_env=profile.visible_devices_env,
        devices=list(opts.devices),
        memory_limit_mb=settings.get("memory_limit_mb"),
        pytest_args=settings.get("pytest_args", []),
        cwd=opts.cwd,
        model=settings.get("process_model", "shared"),
        device_probe=list(profile.runtime.initialized),
        rootdir=settings.get("rootdir"),
        standbys=(
            standbys_per_host(settings["isolate"], settings["process_model"], opts.workers)
            if opts.standbys is None
            else max(0, opts.standbys)
        ),
        fatal_errors=list(profile.runtime.fatal_errors),
        device_healthy=list(profile.runtime.healthy),
    )


def check_paths(paths: list[str], cwd: Path, pytest_args: list[str]) -> None:
    """Every path (a node id's file part) exists, before any store or worker is made:
    pytest would say so only after the hosts imported torch, as a collection error."""
    if "--pyargs" in pytest_args:  # module names, not paths: pytest resolves them
        return
    for path in paths:
        file = path.split("::", 1)[0]
        if not (cwd / file).exists():
            raise MissingInput(
                f"instep run: {path}: no such file or directory (expected a test file, a"
                " directory or a node id such as tests/test_x.py::TestX::test_y)"
            )


def _settings(profile: Profile, opts: RunOptions) -> dict[str, Any]:
    if not opts.paths:
        raise BadInput("instep run: give test paths, node ids, or --tier NAME from the config")
    check_paths(list(opts.paths), opts.cwd or Path.cwd(), list(opts.pytest_args))
    preimport = default_preimport(profile) if opts.preimport is None else list(opts.preimport)
    return {
        "paths": list(opts.paths),
        "k": opts.k,
        "isolate": opts.isolate or profile.default_isolation,
        "timeout": float(opts.timeout),
        "reruns": int(opts.reruns),
        "preimport": preimport,
        "memory_limit_mb": opts.memory_limit_mb,
        "pytest_args": list(opts.pytest_args),
        "cwd": str(opts.cwd or Path.cwd()),
        "process_model": str(choose_model(profile.runtime.fork, opts.process_model)),
        "device_class": opts.device_class,
        **({"impact": opts.impact} if opts.impact else {}),
    }


def _make_pool(
    profile: Profile, settings: dict[str, Any], opts: RunOptions, collect: bool = True
) -> WorkerPool:
    """The engine that runs the cases: worker hosts on this machine, or Ray tasks."""
    config = _host_config(profile, settings, opts)
    if opts.engine == "local":
        check_preimport(settings["preimport"], profile)
        return WorkerPool(config, opts.workers, collect=collect)
    if opts.engine != "ray":
        raise BadInput(f"--engine {opts.engine}: expected 'local' or 'ray'")
    # optional dependency: the Ray engine (the 'ray' extra) only for --engine ray
    from instep.run.ray_engine import RayPool

    # every node runs from the driver's directory; preimports are checked by each node's host
    config.cwd = Path(settings["cwd"])
    if opts.standbys is None:  # a node's CPUs are not the driver's: one standby for case
        config.standbys = min(config.standbys, 1 if settings["isolate"] == "case" else 0)
    pool = RayPool(
        config,
        address=opts.address,
        resource=opts.ray_resource or profile.device_resource or "CPU",
        max_tasks=opts.max_tasks,
    )
    return pool  # type: ignore[return-value]  # the same interface as WorkerPool


def make_pool(profile: Profile, opts: RunOptions) -> WorkerPool:
    """The engine of ``opts`` (worker hosts here, or Ray tasks) outside a stored run: the
    backend ladder's re-runs, whose work items carry their own environment. The caller
    starts and closes it."""
    return _make_pool(profile, _settings(profile, opts), opts)


def classified_outcome(
    event: PoolEvent, item: WorkItem, profile: Profile, classifier: OutcomeClassifier
) -> dict[str, Any]:
    """A host's outcome as the store takes it: times, worker, device, and for a failure
    its layer, category and signature."""
    data = _outcome_values(event, item)
    _note_stack_layer(data, profile)
    _classify(data, item.nodeid, classifier)
    return data


def collect_cases(profile: Profile, opts: RunOptions) -> Collection:
    """``--collect-only``: the cases (and collection errors) one worker host sees."""
    settings = _settings(profile, opts)
    check_preimport(settings["preimport"], profile)
    config = _host_config(profile, settings, opts)
    config.collect_only = True
    with WorkerPool(config, 1) as pool:
        pool.start()
        for event in pool.events():
            if event.kind == "collected":
                collection = _collection(event)
                collection.cases = select_device_class(collection.cases, opts.device_class)
                return collection
            if event.kind == "host_failed":
                raise InstepError(_host_failure_line(event, settings["paths"]))
    raise InstepError("instep run --collect-only: the worker host ended without collecting")


def _collection(event: PoolEvent) -> Collection:
    cases = [
        CollectedCase(c["nodeid"], c["file"], c.get("timeout"), c.get("device"))
        for c in event.data["cases"]
    ]
    return Collection(cases=cases, errors=list(event.data["errors"]))


def _host_failure_line(event: PoolEvent, paths: list[str]) -> str:
    data = event.data
    if data.get("type") == "collect_failed":
        last = last_error_line(data.get("log", ""))
        return f"collecting {' '.join(paths)} failed (pytest exit {data.get('exit_code')}): {last}"
    return f"the worker host failed: {data.get('message') or last_error_line(data.get('log', ''))}"


def execute_run(
    store: Store | str,
    profile: Profile,
    opts: RunOptions,
    reporter: RunReporter | None = None,
    resume: str | None = None,
    *,
    classifier: ClassifierFactory,
) -> RunResult:
    """Run (or resume) a run to its end and return the summary.

    ``classifier`` builds the run's :class:`OutcomeClassifier` (its profile, the Inductor
    cache as generated code): ``instep.triage.classifier.Classifier`` for ``instep run``.

    ``store`` may be a target (path or URL) instead of an open store: it is then opened
    while the worker hosts start (they import torch meanwhile), and closed at the end.
    """
    # SQLAlchemy loads while the worker hosts start (see TYPE_CHECKING above)
    from instep.store import Store

    reporter = reporter or RunReporter()
    began = time.monotonic()
    attempts: dict[str, list[tuple[int, str, bool]]] = {}
    owned = not isinstance(store, Store)
    plan: list[tuple[str, str, float | None]] = []
    if resume is not None:
        store = Store(store) if not isinstance(store, Store) else store
        run = store.get_run(resume)
        settings = dict(run.settings)
        pool = _make_pool(profile, settings, opts, collect=False)
        plan = store.plan(run.id)
        attempts = store.attempts(run.id)
        store.update_run(run.id, status="running", finished_at=None)
        try:
            pool.start()
        except BaseException:
            if owned:
                store.close()
            raise
    else:
        settings = _settings(profile, opts)
        pool = _make_pool(profile, settings, opts)
        pool.start()  # the hosts import torch while the store opens
        try:
            store = Store(store) if not isinstance(store, Store) else store
            run = store.create_run(
                name=opts.name,
                profile=profile.name,
                tier=opts.tier,
                shard=f"{opts.shard[0]}/{opts.shard[1]}" if opts.shard else None,
                argv=opts.argv,
                settings=settings,
            )
        except BaseException:
            pool.close()
            raise
    try:
        return _execute(
            store,
            run,
            pool,
            profile,
            opts,
            settings,
            plan,
            attempts,
            reporter,
            resume,
            began,
            classifier,
        )
    finally:
        pool.close()
        if owned:
            store.close()


def _execute(
    store: Store,
    run: Run,
    pool: WorkerPool,
    profile: Profile,
    opts: RunOptions,
    settings: dict[str, Any],
    plan: list[tuple[str, str, float | None]],
    attempts: dict[str, list[tuple[int, str, bool]]],
    reporter: RunReporter,
    resume: str | None,
    began: float,
    make_classifier: ClassifierFactory,
) -> RunResult:
    reporter.run_started(run, resumed=resume is not None)
    env = _run_env(profile, settings, opts)
    cases_env = {**os.environ, **env}  # what a case process sees
    matrix = getattr(pool, "version_matrix", None)
    matrix_thread = _start_version_matrix(store, run, profile, matrix, cache_state(cases_env))
    files = {n: f for n, f, _ in plan}
    status = "finished"
    reruns = int(settings.get("reruns", 0))
    classifier = make_classifier(profile, (str(inductor_cache(cases_env)),))
    try:
        with pool:
            planned = resume is not None
            if planned:
                todo = _balanced(store, _resume_items(plan, attempts))
                reporter.plan_ready(len(plan), len(plan) - len(todo))
                pool.submit(todo)
            for event in pool.events():
                if event.kind == "tick":
                    reporter.tick()
                elif event.kind == "collected" and not planned:
                    planned = True
                    collection = _collection(event)
                    if event.data.get("rootdir") and settings.get("rootdir") is None:
                        settings["rootdir"] = event.data["rootdir"]  # what --resume needs
                        store.update_run(run.id, settings=settings)
                    plan = _make_plan(store, run, opts, collection, classifier)
                    files = {n: f for n, f, _ in plan}
                    todo = _balanced(
                        store, [WorkItem(n, f, t) for n, f, t in plan if n not in attempts]
                    )
                    reporter.plan_ready(len(plan) + len(collection.errors), 0)
                    for error in collection.errors:
                        message = last_error_line(error["longrepr"])
                        reporter.outcome(error["nodeid"], "error", True, {"message": message})
                    pool.submit(todo)
                elif event.kind == "host_failed" and not planned:
                    planned = True
                    _record_host_failure(store, run, event, settings["paths"], reporter, classifier)
                elif event.kind == "start" and event.nodeid:
                    reporter.case_started(event.nodeid, event.worker)
                elif event.kind == "outcome" and event.item is not None:
                    item = event.item
                    data = classified_outcome(event, item, profile, classifier)
                    history = attempts.setdefault(item.nodeid, [])
                    final = not (data["status"] in FAILING and item.attempt <= reruns)
                    data["final"] = final
                    data["flaky"] = (
                        final
                        and data["status"] not in FAILING
                        and any(s in FAILING for _, s, _ in history)
                    )
                    if not store.record_outcome(
                        run.id, item.nodeid, files.get(item.nodeid, item.file), data
                    ):
                        continue  # that attempt is stored already: never counted twice
                    history.append((item.attempt, data["status"], final))
                    reporter.outcome(item.nodeid, data["status"], final, data)
                    if not final:
                        pool.submit(
                            [WorkItem(item.nodeid, item.file, item.timeout, item.attempt + 1)]
                        )
            if planned and pool.queue:
                status = "interrupted"  # every host failed: what is left stays resumable
    except KeyboardInterrupt:
        store.finish_run(run.id, "interrupted")
        raise
    if matrix_thread is not None:
        matrix_thread.join(timeout=120)
    counts = store.status_counts(run.id)
    total = store.planned_count(run.id)
    done = sum(counts.values())
    if done < total and status == "finished":
        status = "interrupted"
    store.finish_run(run.id, status)
    run = store.get_run(run.name)
    if any(counts[s] for s in FAILING) or done < total:
        code = EXIT_FAILED
    elif total == 0:
        code = EXIT_NO_TESTS
    else:
        code = EXIT_OK
    hosts = getattr(pool, "hosts_started", 0)
    result = RunResult(run, counts, total, code, time.monotonic() - began, status, hosts)
    reporter.run_finished(result)
    return result


def _start_version_matrix(
    store: Store,
    run: Run,
    profile: Profile,
    reader: Callable[[Profile], dict] | None = None,
    extra: dict[str, Any] | None = None,
) -> threading.Thread | None:
    """Read the version matrix in a thread: here, or through ``reader`` (a Ray node's)."""
    if run.version_matrix:
        return None

    def probe() -> None:
        try:
            matrix = reader(profile) if reader else read_version_matrix(profile).flat()
            matrix.update(extra or {})
            store.update_run(run.id, version_matrix=matrix)
        except Exception:  # the matrix is evidence, not a reason to lose the run
            log.exception("reading the version matrix failed")

    thread = threading.Thread(target=probe, name="instep-version-matrix", daemon=True)
    thread.start()
    return thread


def _make_plan(
    store: Store,
    run: Run,
    opts: RunOptions,
    collection: Collection,
    classifier: OutcomeClassifier,
) -> list[tuple[str, str, float | None]]:
    cases = select_device_class(collection.cases, opts.device_class)
    if opts.shard:
        nodeids = [c.nodeid for c in cases]
        keep = set(select_shard(nodeids, opts.shard, store.durations(nodeids)))
        cases = [c for c in cases if c.nodeid in keep]
    plan: list[tuple[str, str, float | None]] = [
        (e["nodeid"], e["nodeid"].split("::", 1)[0], None) for e in collection.errors
    ]
    seen = {n for n, _, _ in plan}
    plan += [(c.nodeid, c.file, c.timeout) for c in cases if c.nodeid not in seen]
    store.set_plan(run.id, plan)
    for error in collection.errors:
        data = _collection_error(error["nodeid"], error["longrepr"], classifier)
        store.record_outcome(run.id, error["nodeid"], error["nodeid"].split("::", 1)[0], data)
    errored = {e["nodeid"] for e in collection.errors}
    return [p for p in plan if p[0] not in errored]


def _balanced(store: Store, items: list[WorkItem]) -> list[WorkItem]:
    """``items`` longest first by the store's durations, each with its estimate
    (:mod:`instep.run.balancing`); in their order when none ran before."""
    by_id = {i.nodeid: i for i in items}
    durations = store.durations(list(by_id)) if items else {}
    ordered = []
    for nodeid, _, estimate in longest_first([(i.nodeid, i.file) for i in items], durations):
        by_id[nodeid].estimate = estimate
        ordered.append(by_id[nodeid])
    return ordered


def select_device_class(cases: list[CollectedCase], device: str | None) -> list[CollectedCase]:
    """``--device-class DEV``: the cases of test classes made for DEV (``TestFooCUDA``,
    ``GPUTests``), so that ``-k cuda`` matching ``test_x_cuda`` in a CPU class is no trap."""
    if not device:
        return cases
    return [c for c in cases if c.device == device]


def _utcnow() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)


def _collection_error(nodeid: str, longrepr: str, classifier: OutcomeClassifier) -> dict[str, Any]:
    now = _utcnow()
    message = last_error_line(longrepr)
    return {
        "status": "error",
        "stage": "collect",
        "layer": "env",
        "category": "env.collection_error",
        "signature": classifier.signature(None, message),
        "confidence": 0.95,
        "message": message,
        "longrepr": longrepr,
        "attempt": 1,
        "final": True,
        "started_at": now,
        "finished_at": now,
        "duration": 0.0,
    }


def _record_host_failure(
    store: Store,
    run: Run,
    event: PoolEvent,
    paths: list[str],
    reporter: RunReporter,
    classifier: OutcomeClassifier,
) -> None:
    """A conftest that raises, a failing preimport: one ``env`` outcome per path given."""
    log_text = event.data.get("log", "") or event.data.get("traceback", "")
    plan = [(p, p.split("::", 1)[0], None) for p in paths]
    store.set_plan(run.id, plan)
    reporter.plan_ready(len(plan), 0)
    for path in paths:
        data = _collection_error(path, log_text[-20_000:], classifier)
        data["message"] = _host_failure_line(event, paths)
        data["signature"] = classifier.signature(None, data["message"])
        store.record_outcome(run.id, path, path.split("::", 1)[0], data)
        reporter.outcome(path, "error", True, data)


def _resume_items(
    plan: list[tuple[str, str, float | None]], attempts: dict[str, list[tuple[int, str, bool]]]
) -> list[WorkItem]:
    items = []
    for nodeid, file, timeout in plan:
        history = attempts.get(nodeid, [])
        if any(final for _, _, final in history):
            continue
        next_attempt = max((a for a, _, _ in history), default=0) + 1
        items.append(WorkItem(nodeid, file, timeout, next_attempt))
    return items


def _note_stack_layer(data: dict[str, Any], profile: Profile) -> None:
    """For a crash or time-out: the compile layer of the innermost frame the profile knows.

    The frames come from faulthandler's dump (files only), so modules are read from the
    file paths. Stored as ``evidence.stack_layer`` with the frame; triage decides layers.
    """
    if data.get("status") not in MANIFESTATIONS:
        return
    if (data.get("evidence") or {}).get("stack_layer"):
        return  # the worker host read the running compile stage: that is better evidence
    chain = data.get("exception_chain") or []
    frames = chain[0].get("frames", []) if chain else []
    for frame in reversed(frames):
        module = frame.get("module") or module_from_path(frame.get("file", ""))
        layer = profile.layer_for(module=module, path=frame.get("file"))
        if layer is not None:
            frame["module"] = module
            evidence = data.setdefault("evidence", {})
            evidence["stack_layer"] = str(layer)
            evidence["stack_frame"] = f"{module or frame.get('file')}:{frame.get('line')}"
            return


def _classify(data: dict[str, Any], nodeid: str, classifier: OutcomeClassifier) -> None:
    """File a non-passing outcome under its layer/category/signature before it is stored."""
    try:
        classifier.file_outcome(data, nodeid)
    except Exception:  # triage is evidence, never a reason to lose the outcome
        log.exception("classifying %s failed", nodeid)


def _outcome_values(event: PoolEvent, item: WorkItem) -> dict[str, Any]:
    data = dict(event.data)
    finished = _utcnow()
    started = data.pop("started_at", None)
    duration = data.get("duration")
    if isinstance(started, (int, float)):
        started_at = datetime.fromtimestamp(started, timezone.utc).replace(tzinfo=None)
    elif duration is not None:
        started_at = finished - timedelta(seconds=float(duration))
    else:
        started_at = finished
    data.update(
        attempt=item.attempt,
        worker=event.worker,
        device=event.device,
        started_at=started_at,
        finished_at=finished,
    )
    evidence = data.get("evidence") or {}
    if "output_bytes" in evidence:
        evidence["output_bytes"] = list(evidence["output_bytes"])
    data["evidence"] = evidence
    return data
