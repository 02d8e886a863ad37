"""Inductor's own registries against a backend that never runs Inductor (pattern 6).

torch-ttnn 7fb5bbaaf hands AOTAutograd's graph to its own FX passes; its op tables
(``to_tt_pass.py:125`` ``torch.ops.aten.clamp.default: ttnn.clip``) met Inductor's
``clamp`` decomposition and ``convolution`` lowering as ``registration.other_role`` (Test).
Those entries run only inside Inductor: when no downstream file imports from
``torch._inductor`` (beyond ``torch._inductor.decomposition``), calls ``torch.compile``
without a backend or passes ``backend="inductor"``, the coupling is Check. A registry
outside ``torch/_inductor/`` (``torch/_decomp``), Inductor's decomposition table for a
downstream that imports ``select_decomp_table``, and any downstream that runs Inductor
keep their Test.
"""

from __future__ import annotations

import pytest

from instep.impact.downstream.inductor_use import find_inductor_use

from .gitrepo import impact_of_commit

REGISTRARS = """\
import torch
aten = torch.ops.aten
table = {}


def register_lowering(op):
    def wrap(fn):
        table[op] = fn
        return fn
    return wrap


def register_decomposition(op):
    def wrap(fn):
        table[op] = fn
        return fn
    return wrap
"""

LOWERING = (
    REGISTRARS
    + """

@register_lowering(aten.clamp)
def clamp(x, lo=None, hi=None):
    return x
"""
)
INDUCTOR_DECOMP = (
    REGISTRARS
    + """

@register_decomposition(aten.cosh)
def cosh(x):
    return x
"""
)
CORE_DECOMP = (
    REGISTRARS
    + """

@register_decomposition(aten.clamp)
def clamp_decomp(x, lo=None, hi=None):
    return x
"""
)
V1 = {
    "torch/_inductor/lowering.py": LOWERING,
    "torch/_inductor/decomposition.py": INDUCTOR_DECOMP,
    "torch/_decomp/__init__.py": "",
    "torch/_decomp/decompositions.py": CORE_DECOMP,
}
V2 = {path: text.replace("    return x\n", "    return x * 1\n") for path, text in V1.items()}

OPS = """\
import torch


def clip(x):
    return x


def cosh(x):
    return x


TT_OPS = {
    torch.ops.aten.clamp.default: clip,
    torch.ops.aten.cosh.default: cosh,
}
"""
BACKEND = """\
from torch._dynamo.backends.common import aot_autograd


def tt_backend(gm, example_inputs):
    return aot_autograd(fw_compiler=lambda g, _: g)(gm, example_inputs)
"""
HELPER = "from torch._inductor.decomposition import select_decomp_table\n"
RUNS = "import torch\n\n\ndef compiled(m):\n    return torch.compile(m)\n"


def _rows(tmp, extra: str) -> dict[tuple[str, str], dict]:
    down = {"torch_npu/ops.py": OPS, "torch_npu/backend.py": extra + BACKEND}
    doc = impact_of_commit(tmp, V1, V2, "[inductor] clamp, cosh (#6)", down)
    got = {}
    for unit in doc["units"]:
        for c in unit["couplings"]:
            if c["kind"] == "registration":
                got[(c["upstream"].split("::")[0], c["upstream"].split("::")[1])] = c
    return got


@pytest.fixture(scope="module")
def no_inductor(tmp_path_factory):
    return _rows(tmp_path_factory.mktemp("noind"), "")


def test_an_inductor_lowering_against_a_backend_without_inductor_is_check(no_inductor):
    c = no_inductor[("torch/_inductor/lowering.py", "clamp")]
    assert (c["rule"], c["action"]) == ("registration.inductor_not_run", "Check")
    assert "never runs Inductor" in c["evidence"]
    assert "none of its 4 Python files imports from torch._inductor" in c["evidence"]


def test_an_inductor_decomposition_against_a_backend_without_inductor_is_check(no_inductor):
    c = no_inductor[("torch/_inductor/decomposition.py", "cosh")]
    assert (c["rule"], c["action"]) == ("registration.inductor_not_run", "Check")


def test_a_registry_outside_inductor_keeps_its_test(no_inductor):
    c = no_inductor[("torch/_decomp/decompositions.py", "clamp_decomp")]
    assert c["action"] == "Test"
    assert c["rule"] in ("registration.other_role", "registration.cross_registry")


def test_inductor_decompositions_stay_test_for_a_backend_that_selects_them(tmp_path_factory):
    got = _rows(tmp_path_factory.mktemp("helper"), HELPER)
    assert got[("torch/_inductor/decomposition.py", "cosh")]["action"] == "Test"
    assert got[("torch/_inductor/lowering.py", "clamp")]["rule"] == "registration.inductor_not_run"


def test_a_backend_that_runs_inductor_keeps_every_test(tmp_path_factory):
    got = _rows(tmp_path_factory.mktemp("runs"), RUNS)
    assert got  # the same three couplings
    assert {c["action"] for c in got.values()} == {"Test"}
    assert "registration.inductor_not_run" not in {c["rule"] for c in got.values()}


@pytest.mark.parametrize(
    ("source", "runs"),
    [
        ("from torch._inductor.compile_fx import compile_fx\n", True),
        ("from torch._inductor import config\n", True),
        ("import torch._inductor.lowering as L\n", True),
        ("import torch\ntorch._inductor.config.fallback_random = True\n", True),
        ("from torch._inductor.lowering import make_fallback, register_lowering\n", True),
        ("import torch\ntorch.compile(m)\n", True),
        ("import torch\ntorch.compile(m, backend='inductor')\n", True),
        ("import torch._dynamo\ntorch._dynamo.optimize('inductor')(m)\n", True),
        ("import torch\ntorch.compile(m, backend='ttnn')\n", False),
        ("from torch._inductor.decomposition import select_decomp_table\n", False),
        ("from torch._inductor import decomposition\n", False),
        ("# torch._inductor is not used here\nx = 'inductor'\n", False),
    ],
)
def test_what_counts_as_running_inductor(tmp_path, source, runs):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "mod.py").write_text(source, encoding="utf-8")
    use = find_inductor_use(["pkg/mod.py"], lambda p: (tmp_path / p).read_bytes())
    assert use.runs is runs, use.evidence
    if runs:
        assert use.evidence.startswith("pkg/mod.py:")
