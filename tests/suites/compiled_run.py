"""A real stored run of real ``torch.compile`` cases on CPU, then triaged, for the metric
and summary tests.

:func:`make_compiled_run` writes ``test_compiled.py`` into a directory and runs it as a
user would: ``instep run`` (real worker processes, real compiles on CPU), then ``instep
triage``. The run holds every kind of case the metrics must count from what is stored:

- compiled cases: an Inductor (C++) compile, and a backend that times an autotuner under
  Inductor's own event name (``CachingAutotuner.benchmark_all_configs``), as a vendor
  backend such as torch_npu's does, so the autotune stage is recorded by the real recorder;
- a graph break Dynamo counts in a case that passes (``backend="eager"``);
- a graph break that *is* the failure (``fullgraph=True``): Dynamo raises before its
  counter moves;
- a failure no rule of the profile knows (``eager.unclassified``);
- a backend that raises while compiling (a compile failure).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SUITE = """
import time

import torch
from torch._dynamo.utils import dynamo_timed


def f(x):
    return (x.sin() + 1).relu()


def tuning_backend(gm, example_inputs):
    with dynamo_timed("CachingAutotuner.benchmark_all_configs"):
        time.sleep(0.2)
    return gm.forward


def broken_backend(gm, example_inputs):
    raise NotImplementedError("no lowering for aten.sin on this device")


def breaks(x):
    print("graph break here")
    return x + 1


def test_inductor_compiles():
    x = torch.randn(8)
    torch.testing.assert_close(torch.compile(f, backend="inductor")(x), f(x))


def test_backend_autotunes():
    x = torch.randn(8)
    torch.testing.assert_close(torch.compile(f, backend=tuning_backend)(x), f(x))


def test_graph_break_counted():
    x = torch.ones(2)
    torch.testing.assert_close(torch.compile(breaks, backend="eager")(x), x + 1)


def test_graph_break_under_fullgraph():
    def breaks_too(x):  # not 'breaks': Dynamo would reuse what it compiled of it
        print("graph break here")
        return x + 1

    torch.compile(breaks_too, backend="eager", fullgraph=True)(torch.ones(2))


def test_backend_fails_to_compile():
    torch.compile(f, backend=broken_backend)(torch.ones(2))


def test_unrecognised_failure():
    raise RuntimeError("the widget frobnicated unexpectedly")
"""
FILE = "test_compiled.py"
RUN = "compiled"


@dataclass
class CompiledRun:
    work: Path
    db: Path
    name: str

    def instep(self, *args: str, check: int | None = 0) -> str:
        """Run the CLI as a user does (a subprocess in the project); its stdout."""
        proc = subprocess.run(
            [sys.executable, "-m", "instep", *args, "--db", str(self.db)],
            cwd=self.work,
            capture_output=True,
            text=True,
            env={**os.environ, "NO_COLOR": "1"},
            timeout=300,
        )
        if check is not None:
            assert proc.returncode == check, proc.stderr
        return proc.stdout

    def outcomes(self) -> dict[str, dict[str, Any]]:
        """The stored final outcomes by test name, as ``instep show --format json`` gives."""
        data = json.loads(self.instep("show", self.name, "--format", "json"))
        return {o["case"].split("::")[-1]: o for o in data["outcomes"]}

    def metrics(self) -> dict[str, Any]:
        data = json.loads(self.instep("show", self.name, "--metrics", "--format", "json"))
        return data["metrics"]


def make_compiled_run(work: Path, name: str = RUN) -> CompiledRun:
    (work / FILE).write_text(SUITE)
    run = CompiledRun(work, work / "results.db", name)
    run.instep("run", FILE, "--run", name, check=1)  # failures expected: exit 1
    run.instep("triage", name, check=None)
    return run
