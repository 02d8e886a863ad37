"""The watchdog on a hand-fed recorder, and dead compile workers of real process pools."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from concurrent.futures import Future, ProcessPoolExecutor

from instep.doctor.compile_workers import CompileWorkerMonitor
from instep.doctor.stage_timing import StageRecorder
from instep.doctor.watchdog import Watchdog


def _slow_pass_in_this_thread(rec: StageRecorder, seconds: float) -> None:
    kernel_name = "triton_poi_fused_add_0"  # noqa: F841 - read from the stack by the watchdog
    rec.event_start("dynamo", "0/0")
    rec.event_start("pass.post_grad_passes.post_grad_custom_post_pass", "0/0")
    time.sleep(seconds)


def test_reports_stage_pid_graph_kernel_and_stacks_then_repeats():
    rec = StageRecorder()
    rec.graph_name_hint = lambda: "forward (model.py:12)"
    got = []
    dog = Watchdog(rec, threshold_s=0.2, repeat_s=0.3, callback=got.append, poll_s=0.05)
    import threading

    worker = threading.Thread(target=_slow_pass_in_this_thread, args=(rec, 1.0), name="compiler")
    with dog:
        worker.start()
        worker.join()
    slow = [r for r in got if r.kind == "slow_compile"]
    assert 2 <= len(slow) <= 4  # once past 0.2 s, then every 0.3 s
    first = slow[0]
    assert first.stage == "lowering"
    assert first.pid == os.getpid()
    assert first.compile.event == "pass.post_grad_passes.post_grad_custom_post_pass"
    assert first.compile.kernel == "triton_poi_fused_add_0"
    assert "forward (model.py:12)" in first.message and "stage lowering" in first.message
    stacks = "\n".join(first.stacks.values())
    assert "_slow_pass_in_this_thread" in stacks
    assert any(name.startswith("compiler") for name in first.stacks)
    assert rec.reports and rec.reports[0]["stage"] == "lowering"


def test_below_threshold_nothing_is_reported():
    rec = StageRecorder()
    rec.event_start("dynamo", "0/0")
    dog = Watchdog(rec, threshold_s=30, callback=None)
    assert dog.poll() == []


def _sleep(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


def test_a_killed_pool_worker_is_reported_at_once():
    pool = ProcessPoolExecutor(max_workers=1)
    try:
        fut = pool.submit(_sleep, 30)
        deadline = time.monotonic() + 30
        while not pool._processes and time.monotonic() < deadline:
            time.sleep(0.05)
        pid = next(iter(pool._processes))
        monitor = CompileWorkerMonitor(pools=lambda: [pool])
        assert monitor.check() == []
        os.kill(pid, signal.SIGKILL)
        dead = []
        while not dead and time.monotonic() < deadline:
            dead = monitor.check()
            time.sleep(0.02)
        assert [d.pid for d in dead] == [pid]
        assert dead[0].exit_code == -signal.SIGKILL
        assert "killed by signal 9" in dead[0].description
        assert monitor.check() == []  # reported once
        fut.exception(timeout=30)  # the executor breaks the future itself
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


class SidecarPool:
    """The shape of Inductor's SubprocPool: a sidecar process and futures waiting on it."""

    def __init__(self) -> None:
        self.process = subprocess.Popen([sys.executable, "-c", "import sys; sys.exit(7)"])
        self.pending_futures = {1: Future(), 2: Future()}
        self.running = True


def test_a_dead_sidecar_fails_the_pending_futures_and_is_reported():
    pool = SidecarPool()
    pool.process.wait()
    rec = StageRecorder()
    got = []
    dog = Watchdog(
        rec,
        threshold_s=60,
        callback=got.append,
        worker_monitor=CompileWorkerMonitor(pools=lambda: [pool]),
    )
    reports = dog.poll()
    assert [r.kind for r in reports] == ["dead_worker"] and got == reports
    assert reports[0].worker.exit_code == 7 and reports[0].worker.failed_futures == 2
    for fut in pool.pending_futures.values():
        assert "died (exit code 7)" in str(fut.exception(timeout=0))
