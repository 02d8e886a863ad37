"""Post-import hooks: a callback runs right after its module is first imported."""

from __future__ import annotations

import sys

from instep.doctor.compile_hooks import when_imported


def test_callback_runs_after_import_and_at_once_when_already_imported(tmp_path, monkeypatch):
    (tmp_path / "instep_probe_mod.py").write_text("VALUE = 41\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    seen = []
    when_imported("instep_probe_mod", lambda m: seen.append(m.VALUE + 1))
    assert seen == []
    import instep_probe_mod  # noqa: F401

    assert seen == [42]
    when_imported("instep_probe_mod", lambda m: seen.append("again"))
    assert seen == [42, "again"]
    sys.modules.pop("instep_probe_mod", None)


def test_a_failing_callback_does_not_break_the_import(tmp_path, monkeypatch):
    (tmp_path / "instep_probe_bad.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    when_imported("instep_probe_bad", lambda m: 1 / 0)
    import instep_probe_bad

    assert instep_probe_bad.VALUE == 1
    sys.modules.pop("instep_probe_bad", None)


class FakeNode:
    """The accessors Inductor's IR input nodes offer."""

    def get_name(self):
        return "arg0_1"

    def get_size(self):
        return [64, 32]

    def get_stride(self):
        return [32, 1]

    def get_dtype(self):
        return "torch.float16"

    def get_device(self):
        return "npu:0"


class FakeChoice:
    def __init__(self, name: str) -> None:
        self.name = name
        self.description = f"{name} BLOCK_M=64"


def test_autotune_candidates_and_failed_configs_are_logged():
    import types

    from instep.doctor import compile_hooks
    from instep.doctor.stage_timing import StageRecorder

    savers = []
    select_algorithm = types.ModuleType("fake_select_algorithm")
    select_algorithm.add_feedback_saver = savers.append
    compile_hooks._hook_select_algorithm(select_algorithm)

    class Launcher:
        def __init__(self, config: str) -> None:
            self.config = config

    class CachingAutotuner:
        def __init__(self) -> None:
            self.fn = types.SimpleNamespace(__name__="triton_mm_0")

        def benchmark_all_configs(self, *args):
            return {Launcher("XBLOCK: 64"): 0.25}

        def _precompile_config(self, cfg):
            raise RuntimeError("UB overflow, requires 262144 bytes")

    heuristics = types.ModuleType("fake_triton_heuristics")
    heuristics.CachingAutotuner = CachingAutotuner
    compile_hooks._hook_caching_autotuner(heuristics)

    rec = StageRecorder()
    compile_hooks.activate(rec)
    try:
        good, bad = FakeChoice("mm_template_1"), FakeChoice("mm_template_2")
        savers[0]({good: 0.5, bad: float("inf")}, "mm", [FakeNode()], [good, bad], dict)
        tuner = CachingAutotuner()
        tuner.benchmark_all_configs()
        try:
            tuner._precompile_config("XBLOCK: 1024")
        except RuntimeError:
            pass
        else:  # pragma: no cover
            raise AssertionError("the hook swallowed the error")
    finally:
        compile_hooks.deactivate(rec)
    selected, benchmarked, failed = rec.autotune
    assert selected["op"] == "mm" and selected["failed"] == ["mm_template_2"]
    assert selected["inputs"][0] == {
        "name": "arg0_1",
        "shape": ["64", "32"],
        "stride": ["32", "1"],
        "dtype": "torch.float16",
        "device": "npu:0",
    }
    assert benchmarked["kernel"] == "triton_mm_0"
    assert benchmarked["candidates"] == [{"config": "XBLOCK: 64", "time_ms": 0.25}]
    assert failed["kind"] == "triton_precompile_failure" and failed["config"] == "XBLOCK: 1024"
    assert "UB overflow" in failed["error"]
