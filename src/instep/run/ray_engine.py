"""``instep run --engine ray``: a run's cases as Ray tasks across a cluster of hosts.

:class:`RayPool` offers what the runner uses of :class:`~instep.run.worker_pool.WorkerPool`
(``start``, ``submit``, ``events``, ``queue``, ``close``), so resume, reruns, flaky marks,
classification, store writes and progress stay one code path in :mod:`instep.run.runner`.
Each small chunk of cases becomes one Ray task requesting one unit of the profile's
``device_resource`` (``NPU``, ``GPU``; ``CPU`` when the profile has none); Ray places it.
Inside the task, :func:`run_chunk` runs the cases with the local machinery unchanged: a
``WorkerPool`` of one fork-server host, kept alive in the Ray worker process across tasks
(torch is imported once per Ray worker, not per case), pinned to the device ids Ray
granted, with the same isolation, time limits and output capture. Outcomes return to the
driver, which alone writes the store, each chunk as it finishes.

Failures: Ray re-executes a task whose worker or node died (``max_retries``) on another
node; a chunk whose task still fails is split and resubmitted by the driver, and a case
whose task fails again is recorded ``crashed`` with the Ray error. Attempts are numbered
by the driver and each task's result is read once, so a re-executed task cannot add an
outcome (the store also keys outcomes by run, case and attempt). A cluster left without
the resource stops the run ``interrupted`` (resumable).

It does not start clusters, ship test files or install packages: every node needs instep,
the suite's dependencies and the test paths at the driver's path (docs/scale-out.md).
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import logging
import os
import socket
import time
from collections import Counter, deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from instep.doctor.version_matrix import read_version_matrix
from instep.errors import InstepError, require_module
from instep.run.worker_pool import (
    HOST_GRACE_S,
    HostConfig,
    PoolEvent,
    WorkerPool,
    WorkItem,
    enqueue,
)

log = logging.getLogger(__name__)

#: Cases per task at most (fewer as the queue drains, so the tail spreads over the nodes).
MAX_CHUNK = 8
#: Ray's own re-executions of a task whose worker process or node died.
TASK_RETRIES = 3
#: A case whose task failed this many times (after Ray's retries) is recorded ``crashed``.
MAX_TASK_FAILURES = 2
#: Worker hosts that may fail to start (bad node) before the run stops, resumable.
MAX_HOST_FAILURES = 5
#: Seconds a task may take on top of its cases' time limits (host start-up, collection).
STARTUP_ALLOWANCE_S = 600.0
#: Seconds without any node offering the resource before the run stops (interrupted).
NO_CAPACITY_STOP_S = 120.0


def import_ray() -> Any:
    return require_module("ray", "instep run --engine ray", "pip install 'instep[ray]'")


def task_resources(resource: str) -> dict[str, Any]:
    """Ray task options requesting one unit of ``resource`` (``CPU``, ``GPU`` or custom).

    Device tasks reserve no CPU: the device is what limits how many run at once. Ray's
    default of one call per worker for GPU tasks is lifted (``max_calls=0``): the worker
    never touches the device (forked case processes do), and keeping it keeps its host.
    """
    if resource == "CPU":
        return {"num_cpus": 1}
    if resource == "GPU":
        return {"num_cpus": 0, "num_gpus": 1}
    return {"num_cpus": 0, "resources": {resource: 1}}


# ---- the Ray worker's side ---------------------------------------------------------------


@dataclass
class _DeviceSlot:
    """The worker host of one Ray worker process, for one run configuration and device."""

    key: str
    pool: WorkerPool
    collected: dict[str, Any] | None = None


_SLOT: list[_DeviceSlot | None] = [None]


def _close_slot() -> None:
    slot, _SLOT[0] = _SLOT[0], None
    if slot is not None:
        slot.pool.close()


atexit.register(_close_slot)


def _granted_ids(resource: str) -> list[str]:
    # optional dependency: the 'ray' extra
    import ray

    with contextlib.suppress(Exception):
        return [str(i) for i in ray.get_runtime_context().get_accelerator_ids().get(resource, [])]
    return []


def _where(resource: str, ids: list[str]) -> dict[str, Any]:
    # optional dependency: the 'ray' extra
    import ray

    ctx = ray.get_runtime_context()
    return {
        "node_id": ctx.get_node_id(),
        "node_ip": ray.util.get_node_ip_address(),
        "host": socket.gethostname(),
        "ray_pid": os.getpid(),
        "resource": resource,
        "device_ids": ids,
    }


class StartBoard:
    """A Ray actor (no resources) that each task tells when it starts running.

    A task can wait in Ray's queue for as long as a busy cluster keeps its resource; its
    time limit must count from when it runs, not from when it was submitted. Ages, not
    times, go back to the driver, so no clock is compared across machines.
    """

    def __init__(self) -> None:
        self._started: dict[int, float] = {}

    def mark(self, key: int) -> None:
        self._started[key] = time.monotonic()  # a re-executed task marks again: later

    def ages(self, keys: list[int]) -> dict[int, float]:
        now = time.monotonic()
        return {k: now - self._started[k] for k in keys if k in self._started}


def run_chunk(
    config: HostConfig,
    items: list[WorkItem],
    resource: str,
    collection: bool = False,
    board: Any = None,
    key: int = 0,
) -> dict[str, Any]:
    """Body of one Ray task: run ``items`` in this worker's host (none: start it only).

    Tells ``board`` (a :class:`StartBoard` handle) that task ``key`` started. Returns
    ``where`` (node, host, device ids), ``outcomes`` (``nodeid``, ``attempt``, ``data``),
    ``collected`` (the host's collection, when ``collection`` asks for it) and
    ``host_failed``.
    """
    if board is not None:
        with contextlib.suppress(Exception):
            board.mark.remote(key)
    ids = _granted_ids(resource)
    where = _where(resource, ids)
    device = ",".join(ids) or None
    result: dict[str, Any] = {"where": where, "outcomes": [], "collected": None}
    if config.cwd is not None and not Path(config.cwd).is_dir():
        result["host_failed"] = {
            "type": "died",
            "message": f"{config.cwd} is not a directory on {where['host']}: every node needs"
            " the test paths where the driver has them",
        }
        return result
    key = repr((dataclasses.asdict(config), device))
    slot = _SLOT[0]
    if slot is None or slot.key != key:
        _close_slot()
        pinned = dataclasses.replace(config, devices=[device] if device else [])
        pool = WorkerPool(pinned, 1)
        pool.start()
        slot = _SLOT[0] = _DeviceSlot(key, pool)
    pool = slot.pool
    pool.failures = 0
    pool.submit(list(items))
    failed: dict[str, Any] | None = None
    for event in pool.events():
        if event.kind == "collected":
            slot.collected = {"cases": event.data["cases"], "errors": event.data["errors"]}
        elif event.kind == "outcome" and event.item is not None:
            result["outcomes"].append(
                {"nodeid": event.item.nodeid, "attempt": event.item.attempt, "data": event.data}
            )
        elif event.kind == "host_failed":
            failed = event.data
    pool.queue.clear()  # what did not run goes back to the driver, which requeues it
    if collection:
        result["collected"] = slot.collected
    if failed is not None or not any(h is not None and h.state != "dead" for h in pool.hosts):
        result["host_failed"] = failed or {"type": "died", "message": "the worker host died"}
        _close_slot()
    return result


def read_node_matrix(profile: Any) -> dict[str, Any]:
    """Body of the task reading the version matrix on a node that has the device."""
    matrix = read_version_matrix(profile).flat()
    matrix["ray_node"] = socket.gethostname()
    return matrix


# ---- the driver's side -------------------------------------------------------------------


@dataclass
class _Flight:
    items: list[WorkItem]
    sent: float
    collect: bool = False  # the task whose collection plans the run
    limit_s: float = 0.0  # how long it may run once started
    key: int = 0  # its name on the start board
    deadline: float | None = None  # None: not started yet (queued in Ray), no limit
    overdue: bool = False


@dataclass
class _Workers:
    """Small numbers for the (node, Ray worker process) pairs, in order of appearance."""

    numbers: dict[tuple[str, int], int] = field(default_factory=dict)

    def number(self, where: dict[str, Any]) -> int:
        key = (str(where.get("node_id")), int(where.get("ray_pid") or 0))
        return self.numbers.setdefault(key, len(self.numbers))


class RayPool:
    """Chunks of :class:`WorkItem` as Ray tasks; yields the same :class:`PoolEvent` kinds.

    ``address``: ``None`` starts a Ray instance on this machine, ``auto`` joins the one
    started here with ``ray start``, ``ray://host:10001`` goes through Ray Client, or a
    ``host:port`` GCS address. ``max_tasks`` caps the tasks in flight (default: twice the
    units of ``resource`` the cluster offers, read again as nodes come and go).
    """

    def __init__(
        self,
        config: HostConfig,
        *,
        address: str | None = None,
        resource: str | None = None,
        max_tasks: int | None = None,
        capacity_wait_s: float = 60.0,
    ) -> None:
        self.config = config
        self.address = address
        self.resource = resource or "CPU"
        self.max_tasks = max_tasks
        self.capacity_wait_s = capacity_wait_s
        self.queue: deque[WorkItem] = deque()
        self.inflight: dict[Any, _Flight] = {}
        self.collected_once = False
        self.closed = False
        self._submitted = False
        self._solo: set[tuple[str, int]] = set()  # cases to run alone after a failed chunk
        self._task_failures: Counter[tuple[str, int]] = Counter()
        self._collect_failures = 0
        self._host_failures = 0
        self._stopped: str | None = None
        self._capacity = 0.0
        self._capacity_read = 0.0
        self._no_capacity_since: float | None = None
        self._workers = _Workers()
        self._owns_ray = False
        self._ray: Any = None
        self._remote: Any = None
        self._config_ref: Any = None
        self._board: Any = None  # StartBoard actor; None: limits count from submission
        self._keys = 0
        self._board_read = 0.0

    def __enter__(self) -> RayPool:
        return self

    def __exit__(self, *exc: object) -> None:
        # The end of the runner's event loop: stop the tasks, keep the connection (the
        # version matrix may still be on its way); close() lets go of the cluster.
        self._recall_inflight()

    # -- life cycle ------------------------------------------------------------------------

    def start(self) -> None:
        ray = self._ray = import_ray()
        if not ray.is_initialized():
            try:
                ray.init(
                    address=self.address,
                    namespace="instep",
                    log_to_driver=False,
                    logging_level=logging.WARNING,
                    include_dashboard=False if self.address is None else None,
                )
            except Exception as exc:  # ConnectionError, RuntimeError, ValueError by version
                where = self.address or "a new local instance"
                first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
                raise InstepError(f"--address {where}: cannot connect to Ray: {first}") from exc
            self._owns_ray = True
        try:
            self._wait_for_capacity()
            task = ray.remote(max_calls=0)(run_chunk)
            self._remote = task.options(**task_resources(self.resource), max_retries=TASK_RETRIES)
            self._config_ref = ray.put(self.config)
            self._board = self._start_board()
        except BaseException:
            self.close()
            raise

    def _start_board(self) -> Any:
        """The start board, on the driver's node where Ray can (it holds no resource)."""
        ray = self._ray
        options: dict[str, Any] = {"num_cpus": 0}
        with contextlib.suppress(Exception):
            # optional dependency: the 'ray' extra
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            here = ray.get_runtime_context().get_node_id()
            options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(here, soft=True)
        try:
            return ray.remote(StartBoard).options(**options).remote()
        except Exception as exc:  # limits then count from submission, as a fallback
            log.warning("no Ray start board (%s): task limits count from submission", exc)
            return None

    def _wait_for_capacity(self) -> None:
        deadline = time.monotonic() + self.capacity_wait_s
        while self._read_capacity(force=True) <= 0:
            if time.monotonic() > deadline:
                nodes = sum(1 for n in self._ray.nodes() if n.get("Alive"))
                raise InstepError(
                    f"the Ray cluster ({self.address or 'local'}, {nodes} live nodes) offers no"
                    f" '{self.resource}' resource: start its workers with"
                    f" --resources '{{\"{self.resource}\": 8}}', or pass --ray-resource NAME"
                )
            time.sleep(1.0)

    def version_matrix(self, profile: Any, timeout_s: float = 110.0) -> dict[str, Any]:
        """The profile's version matrix as read on a node of the cluster, not the driver's.

        The task asks for a sliver of the resource, so it lands where the devices are
        without holding one a case could use.
        """
        ray = self._ray
        sliver = {**task_resources(self.resource)}
        if self.resource == "CPU":
            sliver["num_cpus"] = 0.01
        elif self.resource == "GPU":
            sliver["num_gpus"] = 0.01
        else:
            sliver["resources"] = {self.resource: 0.01}
        task = ray.remote(read_node_matrix).options(**sliver, max_retries=TASK_RETRIES)
        try:
            return ray.get(task.remote(profile), timeout=timeout_s)
        except SystemExit as exc:  # the connection closed under the waiting thread
            raise RuntimeError("the Ray connection closed before the matrix came back") from exc

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        ray = self._ray
        if ray is None:
            return
        self._recall_inflight()
        if self._board is not None:
            with contextlib.suppress(Exception):
                ray.kill(self._board)
            self._board = None
        if self._owns_ray:
            with contextlib.suppress(Exception):
                ray.shutdown()

    # -- work ------------------------------------------------------------------------------

    def submit(self, items: list[WorkItem], front: bool = False) -> None:
        self._submitted = True
        enqueue(self.queue, items, front)

    @property
    def busy(self) -> bool:
        return bool(self.inflight)

    def _read_capacity(self, force: bool = False) -> float:
        now = time.monotonic()
        if force or now - self._capacity_read > 2.0:
            self._capacity_read = now
            with contextlib.suppress(Exception):
                self._capacity = float(self._ray.cluster_resources().get(self.resource, 0.0))
        return self._capacity

    def _task_limit(self) -> int:
        capacity = self._read_capacity()
        if capacity <= 0:
            now = time.monotonic()
            self._no_capacity_since = self._no_capacity_since or now
            if now - self._no_capacity_since > NO_CAPACITY_STOP_S:
                self._stop(f"no node of the Ray cluster offers '{self.resource}' any more")
            return 0
        self._no_capacity_since = None
        limit = max(1, int(capacity)) * 2
        return min(limit, self.max_tasks) if self.max_tasks else limit

    def _stop(self, why: str) -> None:
        if self._stopped is None:
            log.warning("stopping the Ray run: %s; what is left stays resumable", why)
        self._stopped = why

    def _chunk_size(self) -> int:
        slots = max(1, int(self._capacity))
        return max(1, min(MAX_CHUNK, len(self.queue) // (slots * 4)))

    def _dispatch(self) -> None:
        if self._stopped:
            return
        limit = self._task_limit()
        while self.queue and len(self.inflight) < limit:
            size = self._chunk_size()
            first = self.queue.popleft()
            chunk = [first]
            if (first.nodeid, first.attempt) not in self._solo:
                while (
                    self.queue
                    and len(chunk) < size
                    and self.queue[0].file == first.file
                    and (self.queue[0].nodeid, self.queue[0].attempt) not in self._solo
                ):
                    chunk.append(self.queue.popleft())
            self._send(chunk)

    def _send(self, items: list[WorkItem], collect: bool = False) -> None:
        self._keys += 1
        key = self._keys
        ref = self._remote.remote(self._config_ref, items, self.resource, collect, self._board, key)
        now = time.monotonic()
        limits = sum((i.timeout or self.config.timeout) + 5.0 for i in items)
        limit_s = STARTUP_ALLOWANCE_S + HOST_GRACE_S + 2 * limits
        deadline = None if self._board is not None else now + limit_s
        self.inflight[ref] = _Flight(items, now, collect, limit_s, key, deadline)

    def events(self, poll_s: float = 0.2) -> Iterator[PoolEvent]:
        """Run until nothing is queued or in flight, yielding what the tasks report.

        Called before anything was submitted, one task collects first (``collected``);
        the caller submits work once it has the case list. Meanwhile a task per other slot
        starts that slot's host, so every host imports and collects at once, not in turn.
        ``tick`` every ``poll_s``.
        """
        ray = self._ray
        if not self._submitted and not self.collected_once and not self.inflight:
            self._send([], collect=True)
            for _ in range(self._task_limit() // 2 - 1):
                self._send([])
        while True:
            self._dispatch()
            if not self.inflight:
                if not self.queue or self._stopped:
                    return
                time.sleep(poll_s)  # no node offers the resource now: wait for one
                yield PoolEvent("tick", -1, None)
                continue
            refs = list(self.inflight)
            ready, _ = ray.wait(refs, num_returns=1, timeout=poll_s)
            if ready:
                ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
            for ref in ready:
                yield from self._finished(ref, self.inflight.pop(ref))
            self._cancel_overdue()
            if self._stopped:
                self._recall_inflight()
            yield PoolEvent("tick", -1, None)

    def _finished(self, ref: Any, flight: _Flight) -> Iterator[PoolEvent]:
        try:
            result = self._ray.get(ref)
        except Exception as exc:  # RayTaskError, WorkerCrashedError, NodeDiedError, ...
            yield from self._task_failed(flight, exc)
            return
        where = result["where"]
        worker = self._workers.number(where)
        device = ",".join(where.get("device_ids") or []) or None
        node = {k: where[k] for k in ("node_id", "node_ip", "host", "resource", "device_ids")}
        if result.get("collected") is not None and not self.collected_once and flight.collect:
            self.collected_once = True
            yield PoolEvent("collected", worker, device, data=result["collected"])
        pending = {i.nodeid: i for i in flight.items}
        for outcome in result["outcomes"]:
            item = pending.pop(outcome["nodeid"], None)
            if item is None:
                log.warning("a Ray task reported an unexpected case %s", outcome["nodeid"])
                continue
            data = outcome["data"]
            evidence = data.setdefault("evidence", {})
            evidence["node"] = node
            yield PoolEvent("outcome", worker, device, item.nodeid, item, data)
        failed = result.get("host_failed")
        if failed is not None:
            if flight.collect and not self.collected_once:
                yield PoolEvent("host_failed", worker, device, data=failed)
                return
            self._host_failures += 1
            log.warning(
                "the worker host on %s failed: %s", where.get("host"), failed.get("message")
            )
            if self._host_failures >= MAX_HOST_FAILURES:
                self._stop(f"{self._host_failures} worker hosts failed to start")
        if pending:
            self.submit(list(pending.values()), front=True)

    def _task_failed(self, flight: _Flight, exc: BaseException) -> Iterator[PoolEvent]:
        why = f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0]}"[:500]
        if flight.overdue:
            why = f"the Ray task stopped answering past its time limit ({why})"
        log.warning("a Ray task of %d cases failed: %s", len(flight.items), why)
        if flight.collect:
            self._collect_failures += 1
            if self._collect_failures < MAX_TASK_FAILURES + 1:
                self._send([], collect=True)
            else:
                yield PoolEvent("host_failed", -1, None, data={"type": "died", "message": why})
            return
        retry = []
        for item in flight.items:
            key = (item.nodeid, item.attempt)
            self._task_failures[key] += 1
            if self._task_failures[key] < MAX_TASK_FAILURES:
                self._solo.add(key)
                retry.append(item)
                continue
            data = {
                "status": "crashed",
                "stage": None,
                "message": f"the Ray task running the case failed"
                f" {self._task_failures[key]} times: {why}",
                "evidence": {"ray_error": why},
            }
            yield PoolEvent("outcome", -1, None, item.nodeid, item, data)
        self.submit(retry, front=True)

    def _read_starts(self, now: float) -> None:
        """Deadlines of the tasks that started since the last look (every 2 s)."""
        if self._board is None or now - self._board_read < 2.0 or not self.inflight:
            return
        self._board_read = now
        flights = {f.key: f for f in self.inflight.values()}
        try:
            ages = self._ray.get(self._board.ages.remote(list(flights)), timeout=10)
        except Exception as exc:  # the board's node is gone: count from submission
            log.warning("the Ray start board is gone (%s): limits count from submission", exc)
            self._board = None
            for flight in flights.values():
                if flight.deadline is None:
                    flight.deadline = flight.sent + flight.limit_s
            return
        for key, age in ages.items():
            flights[key].deadline = now - age + flights[key].limit_s

    def _cancel_overdue(self) -> None:
        now = time.monotonic()
        self._read_starts(now)
        for ref, flight in self.inflight.items():
            if flight.deadline is None:
                continue  # still waiting for the resource in Ray's queue
            if not flight.overdue and now > flight.deadline:
                flight.overdue = True
                log.warning("a Ray task is past its time limit; cancelling it")
                with contextlib.suppress(Exception):
                    self._ray.cancel(ref, force=True)

    def _recall_inflight(self) -> None:
        """Stopping: cancel what is in flight; its cases go back to the queue (unrun)."""
        if self._ray is None:
            return
        for ref, flight in list(self.inflight.items()):
            with contextlib.suppress(Exception):
                self._ray.cancel(ref, force=True)
            enqueue(self.queue, flight.items, front=True)
        self.inflight.clear()
