"""A runnable test for every Test row, even from plain sources without test files: the
OpInfo cases of the operators whose lowerings reach a change, read statically from the
new upstream, run by ``instep run --impact`` through instep's L5 suite on CPU.

The upstream is two small trees in the layout of torch (release mode): a lowering
registered for ``aten.abs`` that calls a helper whose body changes, a ``constant_pad_nd``
lowering calling ``ops.masked`` (which Inductor dispatches to the kernel's ``masked``),
a scheduler method no operator reaches, and the ``op_db`` of
``torch/testing/_internal/common_methods_invocations.py``. The downstream calls the
helper, overrides ``masked``, patches the scheduler method and falls ``aten.cdist`` back.
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest

from instep.cli import run as cli_run

OPS_HANDLER = """\
class OpsHandler:
    def masked(self, mask, body, other):
        raise NotImplementedError

    def load(self, name, index):
        raise NotImplementedError
"""

IR = """\
from torch._inductor.virtualized import ops


class Pointwise:
    def __init__(self, fn):
        self.fn = fn

    @classmethod
    def create(cls, fn):
        return cls(fn)
"""

LOWERING = """\
import torch
from torch._inductor import ir
from torch._inductor.virtualized import ops

aten = torch.ops.aten
lowerings = {}


def register_lowering(op):
    def wrap(fn):
        lowerings[op] = fn
        return fn

    return wrap


def make_pointwise(fn):
    def inner(x):
        return ir.Pointwise.create(fn)

    return inner


@register_lowering(aten.abs)
def abs_(x):
    return make_pointwise(lambda v: ops.abs(v))(x)


@register_lowering(aten.constant_pad_nd)
def constant_pad_nd(x, pad, value=0.0):
    return ops.masked(x, lambda: x, value)


@register_lowering(aten.cdist)
def cdist(x1, x2, p=2.0):
    return make_pointwise(lambda v: v)(x1)
"""

TRITON = """\
class TritonKernelOverrides:
    def masked(self, mask, body, other):
        return body()
"""

SCHEDULER = """\
class Scheduler:
    def compute_ancestors(self):
        return {}
"""

OP_DB = """\
from torch.testing._internal.opinfo.core import OpInfo, UnaryUfuncInfo

op_db: list[OpInfo] = [
    UnaryUfuncInfo('abs', ref=None),
    OpInfo('constant_pad_nd', supports_out=False),
    OpInfo('cdist', supports_out=False),
    OpInfo('nn.functional.relu', aten_name='relu'),
]

python_ref_db = [UnaryUfuncInfo('_refs.abs', torch_opinfo_name='abs')]
"""

DOWN_LOWERING = """\
import torch
from torch._inductor.lowering import make_fallback, make_pointwise

aten = torch.ops.aten
make_fallback(aten.cdist)


def npu_abs(x):
    return make_pointwise(lambda v: v)(x)
"""

DOWN_CODEGEN = """\
from torch._inductor.codegen.triton import TritonKernelOverrides


class NPUOverrides(TritonKernelOverrides):
    def masked(self, mask, body, other):
        return super().masked(mask, body, other)
"""

DOWN_PLUGIN = """\
from torch._inductor import scheduler


def _compute_ancestors(self):
    return {}


scheduler.Scheduler.compute_ancestors = _compute_ancestors
"""


def _write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def _upstream(root: Path, version: str, changed: bool) -> Path:
    lowering = LOWERING
    triton = TRITON
    scheduler = SCHEDULER
    if changed:
        lowering = lowering.replace(
            "def make_pointwise(fn):\n",
            "def make_pointwise(fn):\n    if fn is None:\n        raise ValueError(fn)\n\n",
        )
        triton = triton.replace("return body()", "result = body()\n        return result")
        scheduler = scheduler.replace("return {}", "return dict()")
    return _write(
        root,
        {
            "torch/__init__.py": f"__version__ = '{version}'\n",
            "torch/version.py": f"__version__ = '{version}'\n",
            "torch/_inductor/__init__.py": "",
            "torch/_inductor/virtualized.py": "ops = None\n",
            "torch/_inductor/ops_handler.py": OPS_HANDLER,
            "torch/_inductor/ir.py": IR,
            "torch/_inductor/lowering.py": lowering,
            "torch/_inductor/scheduler.py": scheduler,
            "torch/_inductor/codegen/__init__.py": "",
            "torch/_inductor/codegen/triton.py": triton,
            "torch/testing/_internal/common_methods_invocations.py": OP_DB,
        },
    )


@pytest.fixture(scope="module")
def trees(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("runnable")
    down = _write(
        root / "down",
        {
            "npu_like/__init__.py": "",
            "npu_like/lowering.py": DOWN_LOWERING,
            "npu_like/codegen.py": DOWN_CODEGEN,
            "npu_like/plugin.py": DOWN_PLUGIN,
        },
    )
    return {
        "old": _upstream(root / "v1", "2.13.0", changed=False),
        "new": _upstream(root / "v2", "2.14.0", changed=True),
        "down": down,
        "root": root,
    }


def _impact(trees: dict[str, Path], fmt: str, out: Path) -> str:
    args = ["impact", "--upstream-old", str(trees["old"]), "--upstream-new", str(trees["new"])]
    args += ["--downstream", str(trees["down"]), "--format", fmt, "--out", str(out)]
    assert cli_run([*args, "--no-cache"]) == 0
    return out.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def report(trees) -> dict:
    return json.loads(_impact(trees, "json", trees["root"] / "impact.json"))


def _tests(doc: dict, symbol: str) -> list[dict]:
    return [t for u in doc["units"] for t in u["tests"] if symbol in t["symbols"]]


def test_a_helper_is_tested_through_the_operators_whose_lowering_calls_it(report):
    (abs_test,) = [
        t
        for t in _tests(report, "torch/_inductor/lowering.py::make_pointwise")
        if t["test"] == "opinfo:abs"
    ]
    assert abs_test["kind"] == "opinfo" and abs_test["rule"] == "op.reaches"
    assert abs_test["why"].startswith(
        "aten.abs's lowering `abs_` (torch/_inductor/lowering.py) calls `make_pointwise`;"
        " OpInfo `abs` calls aten.abs (torch/testing/_internal/common_methods_invocations.py:"
    )
    # cdist's lowering calls it too, but the downstream runs cdist eagerly
    # (make_fallback): upstream's route never runs on the backend
    tests = {t["test"] for t in _tests(report, "torch/_inductor/lowering.py::make_pointwise")}
    assert tests == {"opinfo:abs"}
    unit = next(u for u in report["units"] if u["id"] == "torch/_inductor/lowering.py")
    assert unit["suggested_tests"] == ["opinfo:abs"]


def test_a_kernel_method_is_tested_through_the_ops_call_that_dispatches_to_it(report):
    (pad,) = _tests(report, "torch/_inductor/codegen/triton.py::TritonKernelOverrides.masked")
    assert pad["test"] == "opinfo:constant_pad_nd" and pad["rule"] == "op.reaches"
    assert "`constant_pad_nd` (torch/_inductor/lowering.py) calls `ops.masked` ->" in pad["why"]


def test_a_member_no_operator_reaches_gets_the_stage_case(report):
    (case,) = _tests(report, "torch/_inductor/scheduler.py::Scheduler.compute_ancestors")
    assert case["test"] == "instep:smoke/test_l1_smoke.py::test_smoke[softmax_layernorm]"
    assert case["kind"] == "builtin" and case["rule"] == "stage.case"


def test_every_test_row_carries_a_command(trees, report):
    md = _impact(trees, "md", trees["root"] / "impact.md")
    rows = [ln for ln in md.split("## Test these", 1)[1].splitlines() if re.match(r"\| \d", ln)]
    assert len(rows) == 3
    commands = {
        ln.split(" | ")[2].split("::")[1].split("`")[0]: ln.rsplit(" | ", 1)[1] for ln in rows
    }
    assert commands == {
        "npu_abs": "`instep run --tier L5 --pytest-arg=--instep-opinfo-ops=abs` |",
        "NPUOverrides.masked": (
            "`instep run --tier L5 --pytest-arg=--instep-opinfo-ops=constant_pad_nd` |"
        ),
        "<module>": (
            "`instep run 'instep:smoke/test_l1_smoke.py::test_smoke[softmax_layernorm]'` |"
        ),
    }
    assert "All suggested tests at once: `instep run --impact REPORT.json`" in md


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch not installed")
@pytest.mark.skipif(
    importlib.util.find_spec("expecttest") is None, reason="L5 needs expecttest (instep[suites])"
)
def test_run_impact_runs_the_opinfo_case_on_cpu(trees, report, instep):
    """`instep run --impact` runs the OpInfo case the report names, through L5, with the
    cpu profile: a real compile of torch's own `constant_pad_nd` OpInfo sample. The
    report is kept to the unit of the kernel override, so that the run is that one case
    (the others' cases run the same way, and cost more CPU)."""
    doc = dict(report)
    doc["units"] = [u for u in report["units"] if u["id"] == "torch/_inductor/codegen/triton.py"]
    path = trees["root"] / "impact-kernel.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    ran = instep("run", "--impact", str(path), "--profile", "cpu", "--run", "r")
    assert ran.code == 0, ran.err
    assert "--impact: OpInfo cases of constant_pad_nd (L5)" in ran.err
    shown = json.loads(instep("show", "r", "--format", "json").out)
    statuses = {o["case"].split("::")[-1]: o["status"] for o in shown["outcomes"]}
    assert statuses == {"test_opinfo[constant_pad_nd-float32]": "passed"}
    settings = shown["run"]["settings"]
    assert "--instep-opinfo-ops=constant_pad_nd" in settings["pytest_args"]
    assert "--instep-device=cpu" in settings["pytest_args"]
    assert settings["impact"]["opinfo_ops"] == ["constant_pad_nd"]
