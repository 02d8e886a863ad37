"""StageRecorder fed by hand (no torch): exclusive attribution, pool threads, first run."""

from __future__ import annotations

import json
import threading

from instep.doctor.stage_timing import (
    FIRST_RUN_EVENT,
    CompileStage,
    StageClassifier,
    StageRecorder,
    load_stage_rules,
)
from instep.layers import Layer


class FakeClock:
    def __init__(self) -> None:
        self.ns = 1_000_000_000_000

    def __call__(self) -> int:
        return self.ns

    def advance(self, seconds: float) -> None:
        self.ns += int(seconds * 1e9)


def test_rules_map_torch_event_names_to_stages():
    classify = StageClassifier().stage_of
    assert classify("dynamo") is CompileStage.DYNAMO
    assert classify("create_aot_dispatcher_function") is CompileStage.AOT
    assert classify("pass.post_grad_passes.post_grad_custom_post_pass") is CompileStage.LOWERING
    assert classify("GraphLowering.run") is CompileStage.LOWERING
    assert classify("Scheduler.__init__") is CompileStage.SCHEDULING
    assert classify("Scheduler.codegen") is CompileStage.CODEGEN
    assert classify("compile_file") is CompileStage.KERNEL_COMPILE
    assert classify("async_compile.wait") is CompileStage.KERNEL_COMPILE
    assert classify("CachingAutotuner.benchmark_all_configs") is CompileStage.AUTOTUNE
    assert classify("inductor_codecache_torch_key") is CompileStage.CACHE
    assert classify(FIRST_RUN_EVENT) is CompileStage.FIRST_RUN
    assert classify("some_new_event") is None  # inherits
    assert CompileStage.SCHEDULING.layer is Layer.SCHEDULER
    assert CompileStage.FIRST_RUN.layer is Layer.RUNTIME


def test_custom_rules_text():
    rules = load_stage_rules('[[rules]]\npattern = "npu_*"\nstage = "kernel_compile"\n')
    assert StageClassifier(rules).stage_of("npu_compile") is CompileStage.KERNEL_COMPILE


def test_exclusive_time_per_stage_and_graph_end(tmp_path):
    clock = FakeClock()
    done = []
    rec = StageRecorder(
        snapshot_path=tmp_path / "snap.json", on_graph_done=done.append, clock_ns=clock
    )
    rec.event_start("dynamo", "0/0")
    clock.advance(1.0)
    rec.event_start("backend_compile", "0/0")  # aot
    clock.advance(0.5)
    rec.event_start("GraphLowering.run", "0/0")  # lowering
    clock.advance(2.0)
    rec.event_start("unmapped_helper", "0/0")  # inherits lowering
    clock.advance(0.25)
    active = rec.active()
    assert [a.stage for a in active] == [CompileStage.LOWERING]
    assert active[0].event == "unmapped_helper"
    assert active[0].elapsed_s == 3.75
    assert active[0].event_stack == [
        "dynamo",
        "backend_compile",
        "GraphLowering.run",
        "unmapped_helper",
    ]
    rec.event_end("unmapped_helper")
    rec.event_end("GraphLowering.run")
    rec.event_start("Scheduler.__init__", "0/0")
    clock.advance(0.75)
    rec.event_end("Scheduler.__init__")
    rec.event_end("backend_compile")
    clock.advance(0.5)
    assert not done
    rec.event_end("dynamo")
    graph = rec.graphs["0/0"]
    assert done == [graph]
    assert graph.stages == {"dynamo": 1.5, "aot": 0.5, "lowering": 2.25, "scheduling": 0.75}
    assert graph.compile_s == 5.0
    assert graph.ended == clock.ns / 1e9
    assert rec.active() == []
    snap = json.loads((tmp_path / "snap.json").read_text())
    assert snap["graphs"][0]["stages"]["lowering"] == 2.25


def test_pool_thread_time_is_background_and_first_run_is_timed():
    clock = FakeClock()
    rec = StageRecorder(clock_ns=clock)
    rec.event_start("dynamo", "1/0")
    rec.event_start("async_compile.wait", "1/0")

    def worker():  # a compile-pool thread: no compile id of its own
        rec.event_start("compile_file", None)
        rec.kernel_started("cpp_fused_add_0")
        clock.advance(2.0)
        rec.event_end("compile_file")

    thread = threading.Thread(target=worker, name="pool-0")
    thread.start()
    thread.join()
    rec.event_end("async_compile.wait")
    rec.event_end("dynamo")
    graph = rec.graphs["1/0"]
    assert graph.background == {"kernel_compile": 2.0}
    assert graph.stages["kernel_compile"] == 2.0  # the main thread waited as long
    assert graph.kernels == ["cpp_fused_add_0"]
    # the first run arrives later, without a compile id
    assert rec.latest_graph_without_run() == "1/0"
    rec.event_start(FIRST_RUN_EVENT, rec.latest_graph_without_run())
    clock.advance(0.5)
    assert rec.active()[0].stage is CompileStage.FIRST_RUN
    rec.event_end(FIRST_RUN_EVENT)
    assert graph.first_run_s == 0.5
    assert graph.compile_s == 2.0  # the first run is not compile time


def test_end_of_an_outer_event_closes_inner_ones_left_open():
    clock = FakeClock()
    rec = StageRecorder(clock_ns=clock)
    rec.event_start("dynamo", "0/0")
    rec.event_start("GraphLowering.run", "0/0")
    clock.advance(1.0)
    rec.event_end("dynamo")  # an exception skipped the inner end
    assert rec.graphs["0/0"].stages == {"dynamo": 0.0, "lowering": 1.0}
    assert rec.graphs["0/0"].ended is not None
    rec.event_end("never_started")  # ignored
