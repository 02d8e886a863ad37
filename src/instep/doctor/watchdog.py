"""A watchdog thread for hung compiles and dead compile workers (seed 001 feature 4).

:class:`Watchdog` polls a :class:`~instep.doctor.stage_timing.StageRecorder`: when one
graph has been compiling (or running for the first time) longer than ``threshold_s`` it
emits a :class:`WatchdogReport` with the stage, the event, the PID, the graph and kernel
names and the stacks of all threads, and again every ``repeat_s`` while it stays stuck.
A compile worker that dies is reported at once (:mod:`instep.doctor.compile_workers`).
Reports go to ``callback`` (default: printed to stderr) and into ``recorder.reports``;
the recorder's snapshot is refreshed on every poll while something is compiling.
It never kills anything: the caller decides (``instep doctor compile --timeout``, the
runner's per-case timeout).
"""

from __future__ import annotations

import os
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from instep.doctor.compile_workers import CompileWorkerMonitor, DeadWorker
from instep.doctor.stage_timing import ActiveCompile, StageRecorder


@dataclass
class WatchdogReport:
    kind: str  # 'slow_compile' or 'dead_worker'
    pid: int
    time: float
    message: str
    compile: ActiveCompile | None = None
    worker: DeadWorker | None = None
    stacks: dict[str, str] = field(default_factory=dict)  # thread -> formatted stack

    @property
    def stage(self) -> str | None:
        return self.compile.stage.value if self.compile else None

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "pid": self.pid,
            "time": self.time,
            "message": self.message,
            "stage": self.stage,
            "compile": self.compile.as_dict() if self.compile else None,
            "worker": self.worker.as_dict() if self.worker else None,
            "stacks": self.stacks,
        }

    def format(self) -> str:
        lines = [f"[instep watchdog] {self.message}"]
        if self.compile is not None:
            lines.append(f"  events: {' > '.join(self.compile.event_stack)}")
        for thread, stack in self.stacks.items():
            lines.append(f"  --- thread {thread}")
            lines.extend("  " + line for line in stack.rstrip().splitlines())
        return "\n".join(lines)


def thread_stacks() -> dict[str, str]:
    """Formatted stacks of every thread of this process (the watchdog's own excluded)."""
    names = {t.ident: t.name for t in threading.enumerate()}
    me = threading.get_ident()
    out: dict[str, str] = {}
    for tid, frame in sys._current_frames().items():
        if tid == me:
            continue
        out[f"{names.get(tid, '?')} ({tid})"] = "".join(traceback.format_stack(frame))
    return out


def kernel_in_stack(thread_id: int) -> str | None:
    """A ``kernel_name`` local of the innermost frame that has one, in that thread."""
    frame = sys._current_frames().get(thread_id)
    while frame is not None:
        value = frame.f_locals.get("kernel_name")
        if isinstance(value, str) and value:
            return value
        frame = frame.f_back
    return None


def print_report(report: WatchdogReport) -> None:
    print(report.format(), file=sys.stderr, flush=True)


class Watchdog:
    """``start()``/``stop()`` (or ``with``) a daemon thread watching ``recorder``."""

    def __init__(
        self,
        recorder: StageRecorder,
        threshold_s: float = 300.0,
        repeat_s: float | None = None,
        callback: Callable[[WatchdogReport], None] | None = print_report,
        poll_s: float | None = None,
        worker_monitor: CompileWorkerMonitor | None = None,
    ) -> None:
        self.recorder = recorder
        self.threshold_s = threshold_s
        self.repeat_s = repeat_s if repeat_s is not None else threshold_s
        self.callback = callback
        self.poll_s = poll_s if poll_s is not None else max(0.05, min(1.0, threshold_s / 4))
        self.workers = worker_monitor if worker_monitor is not None else CompileWorkerMonitor()
        self.reports: list[WatchdogReport] = []
        self._last: dict[str, float] = {}  # compile id -> monotonic time of last report
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> Watchdog:
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._loop, name="instep-watchdog", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> Watchdog:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _loop(self) -> None:
        while not self._stop.wait(self.poll_s):
            try:
                self.poll()
            except Exception as exc:  # the watchdog must outlive its own bugs
                print(f"[instep watchdog] internal error: {exc!r}", file=sys.stderr)

    def poll(self) -> list[WatchdogReport]:
        """One round of checks (the thread calls this; tests may too)."""
        out: list[WatchdogReport] = []
        for dead in self.workers.check():
            out.append(
                WatchdogReport(
                    "dead_worker",
                    os.getpid(),
                    time.time(),
                    dead.description,
                    worker=dead,
                    stacks=thread_stacks(),
                )
            )
        active = self.recorder.active()
        now = time.monotonic()
        for comp in active:
            if comp.elapsed_s < self.threshold_s:
                continue
            last = self._last.get(comp.compile_id)
            if last is not None and now - last < self.repeat_s:
                continue
            self._last[comp.compile_id] = now
            comp.kernel = kernel_in_stack(comp.thread_id) or comp.kernel
            graph = comp.name or "?"
            kernel = f", kernel {comp.kernel}" if comp.kernel else ""
            message = (
                f"pid {os.getpid()}: graph {comp.compile_id} {graph} has been compiling for"
                f" {comp.elapsed_s:.1f}s; stage {comp.stage.value} (event {comp.event}"
                f"{kernel}, thread {comp.thread_name})"
            )
            out.append(
                WatchdogReport(
                    "slow_compile",
                    os.getpid(),
                    time.time(),
                    message,
                    compile=comp,
                    stacks=thread_stacks(),
                )
            )
        for report in out:
            self.reports.append(report)
            with self.recorder._lock:
                self.recorder.reports.append(report.as_dict())
            if self.callback is not None:
                self.callback(report)
        if active or out:
            self.recorder.write_snapshot(force=bool(out))
        return out
