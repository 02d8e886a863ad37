"""Per-graph compile stage timings, recorded from torch's own timing events.

torch wraps its compile phases in ``dynamo_timed(...)``, which reports a start and an end
to the chromium event logger. :class:`StageRecorder` receives those (through
:mod:`instep.doctor.compile_hooks`, which patches the logger; the recorder itself never
imports torch and can be fed by hand) and keeps, per compiled graph (Dynamo compile id):

- the *exclusive* seconds spent in each :class:`CompileStage` (an event's duration minus
  its children's, attributed by the rules of ``data/stage_events.toml``);
- the time compile-pool threads spent (``background``), which overlaps the main thread;
- the first run of the compiled graph, the kernels it compiled, and while it compiles, the
  stage and event it is in now (:meth:`StageRecorder.active`, read by the watchdog).

It can write a JSON snapshot to a file after each graph and on demand, so that a parent
that kills a hung process still knows the stage it was in. It does not decide what is
slow (see ``watchdog``) and does not render anything.
"""

from __future__ import annotations

import fnmatch
import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from importlib import resources
from pathlib import Path
from typing import Any

from instep.doctor import compile_hooks
from instep.doctor.compile_hooks import FIRST_RUN_EVENT
from instep.layers import Layer
from instep.tomlfile import parse_toml


class CompileStage(str, Enum):
    CACHE = "cache"
    DYNAMO = "dynamo"
    AOT = "aot"
    LOWERING = "lowering"
    SCHEDULING = "scheduling"
    CODEGEN = "codegen"
    KERNEL_COMPILE = "kernel_compile"
    AUTOTUNE = "autotune"
    FIRST_RUN = "first_run"
    OTHER = "other"

    @property
    def layer(self) -> Layer | None:
        """The triage layer a failure or a timeout in this stage belongs to."""
        return _STAGE_LAYER.get(self)


_STAGE_LAYER = {
    CompileStage.DYNAMO: Layer.DYNAMO,
    CompileStage.AOT: Layer.AOT,
    CompileStage.LOWERING: Layer.LOWERING,
    CompileStage.SCHEDULING: Layer.SCHEDULER,
    CompileStage.CODEGEN: Layer.CODEGEN,
    CompileStage.KERNEL_COMPILE: Layer.KERNEL_COMPILE,
    CompileStage.AUTOTUNE: Layer.KERNEL_COMPILE,
    CompileStage.FIRST_RUN: Layer.RUNTIME,
}


@dataclass(frozen=True)
class StageRule:
    pattern: str  # fnmatch pattern on the event name
    stage: CompileStage


def load_stage_rules(text: str | None = None) -> list[StageRule]:
    """The rules of ``data/stage_events.toml`` (or of ``text`` in that format)."""
    if text is None:
        text = (resources.files("instep.doctor") / "data" / "stage_events.toml").read_text(
            encoding="utf-8"
        )
    data = parse_toml(text, "instep/doctor/data/stage_events.toml")
    return [StageRule(r["pattern"], CompileStage(r["stage"])) for r in data.get("rules", [])]


class StageClassifier:
    """Event name -> stage, first matching rule wins; ``None`` means 'inherit'."""

    def __init__(self, rules: list[StageRule] | None = None) -> None:
        self.rules = rules if rules is not None else load_stage_rules()
        self._cache: dict[str, CompileStage | None] = {}

    def stage_of(self, event: str) -> CompileStage | None:
        if event not in self._cache:
            self._cache[event] = next(
                (r.stage for r in self.rules if fnmatch.fnmatchcase(event, r.pattern)), None
            )
        return self._cache[event]


@dataclass
class GraphTiming:
    """What one compiled graph (one Dynamo compile id) cost, stage by stage."""

    compile_id: str
    name: str | None = None  # 'forward (model.py:12)': the frame Dynamo compiled
    started: float = 0.0  # epoch seconds
    ended: float | None = None
    stages: dict[str, float] = field(default_factory=dict)  # exclusive seconds
    background: dict[str, float] = field(default_factory=dict)  # compile-pool threads
    first_run_s: float | None = None
    events: int = 0
    kernels: list[str] = field(default_factory=list)
    owner_thread: int = 0

    @property
    def compile_s(self) -> float:
        return sum(s for k, s in self.stages.items() if k != CompileStage.FIRST_RUN.value)

    def as_dict(self) -> dict[str, Any]:
        return {
            "compile_id": self.compile_id,
            "name": self.name,
            "started": self.started,
            "ended": self.ended,
            "compile_s": round(self.compile_s, 6),
            "stages": {k: round(v, 6) for k, v in self.stages.items()},
            "background": {k: round(v, 6) for k, v in self.background.items()},
            "first_run_s": None if self.first_run_s is None else round(self.first_run_s, 6),
            "events": self.events,
            "kernels": self.kernels,
        }


@dataclass
class ActiveCompile:
    """A graph being compiled (or run for the first time) right now."""

    compile_id: str
    name: str | None
    stage: CompileStage
    event: str  # innermost open event
    elapsed_s: float  # since its outermost open event started
    thread_id: int
    thread_name: str
    event_stack: list[str]
    kernel: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "compile_id": self.compile_id,
            "name": self.name,
            "stage": self.stage.value,
            "layer": self.stage.layer.value if self.stage.layer else None,
            "event": self.event,
            "elapsed_s": round(self.elapsed_s, 3),
            "thread": self.thread_name,
            "event_stack": self.event_stack,
            "kernel": self.kernel,
        }


@dataclass
class _Open:
    name: str
    stage: CompileStage
    start_ns: int
    compile_id: str | None
    background: bool
    child_ns: int = 0


class StageRecorder:
    """Records stage timings per graph; a context manager that installs the torch hooks.

    ``with StageRecorder() as rec: ...`` makes ``rec`` the process's active recorder:
    torch's timing events (hooked once per process, on import of the torch modules
    concerned) go to it until the block ends. ``snapshot_path`` gets a JSON snapshot
    after each graph and whenever :meth:`write_snapshot` is called.
    """

    def __init__(
        self,
        classifier: StageClassifier | None = None,
        snapshot_path: str | os.PathLike[str] | None = None,
        on_graph_done: Callable[[GraphTiming], None] | None = None,
        clock_ns: Callable[[], int] = time.time_ns,
    ) -> None:
        self.classifier = classifier or StageClassifier()
        self.snapshot_path = Path(snapshot_path) if snapshot_path else None
        self.on_graph_done = on_graph_done
        self.clock_ns = clock_ns
        self.graphs: dict[str, GraphTiming] = {}
        self.autotune: list[dict[str, Any]] = []  # filled by compile_hooks
        self.reports: list[dict[str, Any]] = []  # watchdog reports (hangs, dead workers)
        self.graph_name_hint: Callable[[], str | None] = lambda: None
        self._stacks: dict[int, list[_Open]] = {}
        self._thread_names: dict[int, str] = {}
        self._kernel_hint: dict[int, str] = {}
        self._lock = threading.RLock()
        self._last_write = 0.0

    # -- the active recorder

    def __enter__(self) -> StageRecorder:
        compile_hooks.activate(self)
        return self

    def __exit__(self, *exc: object) -> None:
        compile_hooks.deactivate(self)
        self.write_snapshot()

    # -- events (called from torch's logger, or by hand)

    def event_start(self, name: str, compile_id: str | None = None) -> None:
        now = self.clock_ns()
        tid = threading.get_ident()
        with self._lock:
            stack = self._stacks.setdefault(tid, [])
            self._thread_names[tid] = threading.current_thread().name
            parent = stack[-1] if stack else None
            cid = compile_id or (parent.compile_id if parent else None)
            if cid is None:
                cid = self._latest_open_graph()
            stage = self.classifier.stage_of(name) or (
                parent.stage if parent else CompileStage.OTHER
            )
            background = False
            if cid is not None:
                graph = self.graphs.get(cid)
                if graph is None:
                    graph = GraphTiming(cid, self.graph_name_hint(), now / 1e9, owner_thread=tid)
                    self.graphs[cid] = graph
                elif graph.ended is not None and parent is None and tid == graph.owner_thread:
                    graph.ended = None  # reopened (runtime autotuning of this graph, ...)
                background = tid != graph.owner_thread and (parent is None or parent.background)
                graph.events += 1
            stack.append(_Open(name, stage, now, cid, background))

    def event_end(self, name: str) -> None:
        now = self.clock_ns()
        tid = threading.get_ident()
        done: GraphTiming | None = None
        with self._lock:
            stack = self._stacks.get(tid) or []
            idx = next((i for i in range(len(stack) - 1, -1, -1) if stack[i].name == name), None)
            if idx is None:
                return
            while len(stack) > idx:  # events left open inside it end with it
                op = stack.pop()
                dur = now - op.start_ns
                own = max(0, dur - op.child_ns)
                if stack:
                    stack[-1].child_ns += dur
                graph = self.graphs.get(op.compile_id) if op.compile_id else None
                if graph is None:
                    continue
                bucket = graph.background if op.background else graph.stages
                bucket[op.stage.value] = bucket.get(op.stage.value, 0.0) + own / 1e9
                if op.name == FIRST_RUN_EVENT:
                    graph.first_run_s = (graph.first_run_s or 0.0) + dur / 1e9
                if not stack and tid == graph.owner_thread and not op.background:
                    graph.ended = now / 1e9
                    done = graph
        if done is not None:
            self.write_snapshot(force=True)
            if self.on_graph_done is not None:
                self.on_graph_done(done)

    def kernel_started(self, kernel: str) -> None:
        """A kernel is being compiled (or submitted to the pool) by this thread."""
        tid = threading.get_ident()
        with self._lock:
            self._kernel_hint[tid] = kernel
            stack = self._stacks.get(tid) or []
            cid = stack[-1].compile_id if stack else self._latest_open_graph()
            graph = self.graphs.get(cid) if cid else None
            if graph is not None and kernel not in graph.kernels:
                graph.kernels.append(kernel)

    def _latest_open_graph(self) -> str | None:
        open_ids = {op.compile_id for s in self._stacks.values() for op in s if op.compile_id}
        candidates = [g for g in self.graphs.values() if g.compile_id in open_ids]
        if not candidates:
            return None
        return max(candidates, key=lambda g: g.started).compile_id

    def latest_graph_without_run(self) -> str | None:
        with self._lock:
            done = [g for g in self.graphs.values() if g.ended and g.first_run_s is None]
            return max(done, key=lambda g: g.started).compile_id if done else None

    # -- reading

    def active(self) -> list[ActiveCompile]:
        """Graphs with open events now, the innermost stage of their owner thread first."""
        now = self.clock_ns()
        out: list[ActiveCompile] = []
        with self._lock:
            by_graph: dict[str, list[tuple[int, list[_Open]]]] = {}
            for tid, stack in self._stacks.items():
                for cid in {op.compile_id for op in stack if op.compile_id}:
                    by_graph.setdefault(cid, []).append((tid, stack))
            for cid, holders in by_graph.items():
                graph = self.graphs[cid]
                holders.sort(key=lambda h: h[0] != graph.owner_thread)
                tid, stack = holders[0]
                mine = [op for op in stack if op.compile_id == cid]
                inner = mine[-1]
                # the innermost event of a pool thread tells more than a wait on the main one
                for other_tid, other in holders[1:]:
                    theirs = [op for op in other if op.compile_id == cid]
                    if theirs and inner.name.startswith("async_compile.wait"):
                        tid, inner = other_tid, theirs[-1]
                out.append(
                    ActiveCompile(
                        compile_id=cid,
                        name=graph.name,
                        stage=inner.stage,
                        event=inner.name,
                        elapsed_s=(now - mine[0].start_ns) / 1e9,
                        thread_id=tid,
                        thread_name=self._thread_names.get(tid, str(tid)),
                        event_stack=[op.name for op in mine],
                        kernel=self._kernel_hint.get(tid),
                    )
                )
        return sorted(out, key=lambda a: -a.elapsed_s)

    def as_dict(self) -> dict[str, Any]:
        with self._lock:
            graphs = [g.as_dict() for g in self.graphs.values()]
            autotune = list(self.autotune)
            reports = list(self.reports)
        return {
            "pid": os.getpid(),
            "updated": time.time(),
            "graphs": graphs,
            "active": [a.as_dict() for a in self.active()],
            "autotune": autotune,
            "reports": reports,
        }

    def write_snapshot(self, force: bool = True, min_interval_s: float = 1.0) -> None:
        """Write :meth:`as_dict` to ``snapshot_path`` atomically (throttled unless forced)."""
        if self.snapshot_path is None:
            return
        now = time.monotonic()
        if not force and now - self._last_write < min_interval_s:
            return
        self._last_write = now
        tmp = self.snapshot_path.with_name(self.snapshot_path.name + f".{os.getpid()}.tmp")
        try:
            tmp.write_text(json.dumps(self.as_dict(), default=str), encoding="utf-8")
            os.replace(tmp, self.snapshot_path)
        except OSError:
            pass  # a full disk must not break the compile being observed


def stage_totals(graphs: list[dict[str, Any]]) -> dict[str, float]:
    """Seconds per stage summed over graphs (as found in a snapshot's ``graphs``)."""
    totals: dict[str, float] = {}
    for graph in graphs:
        for stage, seconds in graph.get("stages", {}).items():
            totals[stage] = totals.get(stage, 0.0) + seconds
    return totals
