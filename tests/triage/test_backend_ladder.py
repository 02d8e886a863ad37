"""The backend ladder: verdicts from rungs, the backend redirect, and ``run --bisect``."""

from __future__ import annotations

import importlib.util
import json

import pytest

from instep.triage.backend_ladder import ladder_verdict
from instep.triage.backend_redirect import ENV, _redirect

SIG = "RuntimeError: boom"


def rung(status: str, signature: str | None = SIG, layer: str | None = None) -> dict:
    return {
        "status": status,
        "signature": signature if status != "passed" else None,
        "layer": layer,
    }


def test_first_reproducing_rung_bounds_the_layer():
    v = ladder_verdict({"eager": rung("failed", layer="dynamo")}, "inductor", SIG)
    assert (v["layer"], v["first_rung"]) == ("dynamo", "eager")
    v = ladder_verdict({"eager": rung("failed", layer="eager")}, "inductor", SIG)
    assert v["layer"] == "eager"
    v = ladder_verdict({"eager": rung("passed"), "aot_eager": rung("failed")}, "inductor", SIG)
    assert v["layer"] == "aot"
    rungs = {"eager": rung("passed"), "aot_eager": rung("passed")}
    v = ladder_verdict({**rungs, "aot_eager_decomp_partition": rung("error")}, "inductor", SIG)
    assert v["layer"] == "decomposition"
    rungs["aot_eager_decomp_partition"] = rung("passed")
    v = ladder_verdict({**rungs, "inductor": rung("failed")}, "inductor", SIG)
    assert (v["layer"], v["min_layer"]) == (None, "lowering")
    # another failure is not a reproduction; nothing reproducing: flaky, no layer
    v = ladder_verdict(
        {"eager": rung("failed", "KeyError: 'x'"), "inductor": rung("passed")}, "inductor", SIG
    )
    assert (v["reproduced"], v["layer"]) == (False, None)


def test_redirect_replaces_whatever_backend_a_test_names(monkeypatch):
    seen = []

    def compile_(model=None, *, backend="inductor", mode=None, options=None):
        seen.append((backend, mode, options))

    def optimize(backend="inductor", nopython=False):
        seen.append((backend, nopython))

    compile_r, optimize_r = _redirect(compile_, None), _redirect(optimize, 0)
    compile_r(print, backend="inductor", mode="max-autotune")  # no rung set: untouched
    monkeypatch.setenv(ENV, "aot_eager")  # the rung is read at each call
    compile_r(print, backend="inductor", mode="max-autotune")
    compile_r(print)
    monkeypatch.setenv(ENV, "eager")
    optimize_r("inductor", nopython=True)
    optimize_r(backend="inductor")
    assert seen == [
        ("inductor", "max-autotune", None),
        ("aot_eager", None, None),
        ("aot_eager", None, None),
        ("eager", True),
        ("eager", False),
    ]


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch not installed")
def test_run_bisect_files_each_case_by_the_first_reproducing_rung(instep, tmp_path):
    from instep.triage.selftest import suite_source

    (tmp_path / "test_faults.py").write_text(suite_source())
    cases = ["test_backward_formula", "test_decomposition", "test_lowering", "test_runtime"]
    args = [f"test_faults.py::{c}" for c in cases]
    result = instep(
        "run", *args, "--profile", "cpu", "--db", "s.db", "--run", "b", "-n", "2", "--bisect"
    )
    assert result.code == 1, result.err
    assert "bisect: 4 failed cases" in result.err
    # the rungs share the hosts: two workers, whatever the number of rungs
    assert "re-runs on the backend ladder in 2 worker hosts" in result.err
    shown = json.loads(instep("show", "b", "--db", "s.db", "--format", "json").out)
    out = {o["case"].rsplit("::", 1)[1]: o for o in shown["outcomes"]}
    got = {c: (o["layer"], o["evidence"]["triage"]["decided_by"]) for c, o in out.items()}
    assert got == {
        "test_backward_formula": ("aot", "ladder"),
        "test_decomposition": ("decomposition", "ladder"),
        "test_lowering": ("lowering", "ladder"),
        # its kernel raises under the eager backend too: the ladder bounds the compiler,
        # the frames put it in the op's kernel
        "test_runtime": ("runtime", "ladder"),
    }
    ladder = out["test_lowering"]["evidence"]["ladder"]
    assert ladder["first_rung"] == "inductor"
    assert [ladder["rungs"][r]["status"] for r in ("eager", "aot_eager")] == ["passed", "passed"]


IMPORT_TIME_SUITE = """
import torch
from torch._inductor import lowering

compiled = torch.compile(lambda x: torch.sin(x) + 1)  # at import: before any rung is set


def test_lowering_compiled_at_import(monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("selftest: the sin lowering is broken")

    monkeypatch.setitem(lowering.lowerings, torch.ops.aten.sin.default, broken)
    compiled(torch.randn(4))
"""


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch not installed")
def test_bisect_of_a_suite_compiling_at_import_starts_hosts_per_rung(instep, tmp_path):
    """A function compiled while collecting keeps the backend of that moment: shared hosts
    cannot redirect it, so the case runs in hosts started with each rung set."""
    (tmp_path / "test_import_time.py").write_text(IMPORT_TIME_SUITE)
    result = instep(
        "run", "test_import_time.py", "--profile", "cpu", "--db", "s.db", "--run", "i", "--bisect"
    )
    assert result.code == 1, result.err
    # one shared host found the import-time compile; then one host per rung (four rungs)
    assert "re-runs on the backend ladder in 5 worker hosts" in result.err
    shown = json.loads(instep("show", "i", "--db", "s.db", "--format", "json").out)
    (outcome,) = shown["outcomes"]
    ladder = outcome["evidence"]["ladder"]
    # redirected at import by hosts started per rung: the debug backends pass
    assert [ladder["rungs"][r]["status"] for r in ("eager", "aot_eager")] == ["passed", "passed"]
    assert ladder["first_rung"] == "inductor"
    assert outcome["layer"] == "lowering"
