"""Breaking calls that never run on the backend: a call behind a condition an out-of-tree
backend never meets by default (a built-in device type, an environment variable, a debug
flag, or a local name set only under one) is Test saying the condition; a call inside an
upstream function that the downstream swaps out wholesale for its own copy does not reach
a replacement shipped with that copy.

One real upstream git commit adds keyword-only parameters and calls that pass them; the
downstream overrides and patches the changed callables.
"""

from __future__ import annotations

import pytest

from .gitrepo import impact_of_commit

HEUR_V1 = """\
import os


class Tuner:
    def _precompile(self, cfg):
        return cfg

    def _flush(self, x):
        return x

    def _emit(self, x):
        return x

    def save(self, props):
        return props

    def dump(self):
        return None

    def run(self, props):
        return props
"""

HEUR_V2 = """\
import os


class Tuner:
    def _precompile(self, cfg, *, cc=None):
        return cfg

    def _flush(self, x, *, verbose=False):
        return x

    def _emit(self, x, *, fast=False):
        return x

    def save(self, props):
        target = None
        if props.type == "cuda" and props.multi_arch:
            target = props.arch
        if target is not None:
            self._precompile(1, cc=target)
        return props

    def dump(self):
        if os.environ.get("TUNER_DEBUG"):
            self._flush(1, verbose=True)

    def run(self, props):
        if props.type == "npu":
            self._emit(1, fast=True)
        return props
"""

IR_V1 = """\
class Reduction:
    @classmethod
    def create(cls, x):
        return x
"""

IR_V2 = IR_V1.replace("def create(cls, x):", "def create(cls, x, *, strict=False):")

LOWERING_V1 = """\
from torch._inductor import ir


def make_reduction(kind):
    def inner(x):
        return ir.Reduction.create(x)
    return inner
"""

LOWERING_V2 = LOWERING_V1.replace(
    "return ir.Reduction.create(x)", "return ir.Reduction.create(x, strict=True)"
)

DOWN_HEUR = """\
from torch._inductor.heur import Tuner


class NPUTuner(Tuner):
    def _precompile(self, cfg):
        return cfg

    def _flush(self, x):
        return x

    def _emit(self, x):
        return x
"""

# the downstream's own copy of upstream lowering.py, and a patch shipped beside it
FORK_LOWERING = """\
from torch._inductor import ir


def make_reduction(kind):
    def inner(x):
        return ir.Reduction.create(x)
    return inner
"""

IR_PATCH = """\
from torch._inductor import ir


@classmethod
def _create(cls, x):
    return x


ir.Reduction.create = _create
"""

SWAP = """\
def _functions(module):
    return {k: v for k, v in vars(module).items() if callable(v)}


def apply_fork(fork_module):
    from torch._inductor import lowering as upstream

    mine = _functions(fork_module)
    for name in _functions(upstream):
        if name in mine:
            setattr(upstream, name, mine[name])


def install():
    from .fork import lowering as fork_lowering
    from .fork import ir_patch  # noqa: F401

    apply_fork(fork_lowering)
"""


@pytest.fixture(scope="module")
def couplings(tmp_path_factory) -> dict[str, dict]:
    doc = impact_of_commit(
        tmp_path_factory.mktemp("unmet"),
        {
            "torch/_inductor/heur.py": HEUR_V1,
            "torch/_inductor/ir.py": IR_V1,
            "torch/_inductor/lowering.py": LOWERING_V1,
        },
        {
            "torch/_inductor/heur.py": HEUR_V2,
            "torch/_inductor/ir.py": IR_V2,
            "torch/_inductor/lowering.py": LOWERING_V2,
        },
        "new keywords",
        {
            "torch_npu/_inductor/heur.py": DOWN_HEUR,
            "torch_npu/_inductor/fork/__init__.py": "",
            "torch_npu/_inductor/fork/lowering.py": FORK_LOWERING,
            "torch_npu/_inductor/fork/ir_patch.py": IR_PATCH,
            "torch_npu/_inductor/swap.py": SWAP,
            # the same patch outside the copy's package: installed without the swap
            "torch_npu/_inductor/ir_patch.py": IR_PATCH,
        },
    )
    out: dict[str, dict] = {}
    for unit in doc["units"]:
        for c in unit["couplings"]:
            if c["kind"] in ("subclass_override", "monkeypatch"):
                out[f"{c['upstream'].split('::')[1]}@{c['downstream']}"] = c
    return out


def test_a_call_behind_a_cuda_only_local_is_test_and_names_the_condition(couplings):
    c = couplings["Tuner._precompile@torch_npu/_inductor/heur.py:5"]
    assert (c["action"], c["rule"]) == ("Test", "signature.conditional_call")
    assert "torch/_inductor/heur.py:19" in c["evidence"]
    assert "`props.type == 'cuda'` (a device type the backend never has)" in c["evidence"]
    assert "through `target`" in c["evidence"]


def test_a_call_behind_an_environment_variable_is_test(couplings):
    c = couplings["Tuner._flush@torch_npu/_inductor/heur.py:8"]
    assert (c["action"], c["rule"]) == ("Test", "signature.conditional_call")
    assert "`os.environ.get('TUNER_DEBUG')` (an environment variable)" in c["evidence"]


def test_a_call_behind_the_backend_own_device_type_stays_shim(couplings):
    c = couplings["Tuner._emit@torch_npu/_inductor/heur.py:11"]
    assert (c["action"], c["rule"]) == ("Shim", "signature.replacement_breaks")
    assert "torch/_inductor/heur.py:28" in c["evidence"]


def test_a_patch_shipped_with_a_wholesale_swapped_copy_is_not_reached(couplings):
    c = couplings["Reduction.create@torch_npu/_inductor/fork/ir_patch.py:9"]
    assert (c["action"], c["rule"]) == ("Test", "signature.no_breaking_call")
    assert "its caller `make_reduction` is swapped out wholesale" in c["evidence"]
    assert "torch_npu/_inductor/swap.py:11" in c["evidence"]
    assert "torch_npu._inductor.fork.lowering" in c["evidence"]


def test_the_same_patch_outside_the_copy_package_stays_shim(couplings):
    c = couplings["Reduction.create@torch_npu/_inductor/ir_patch.py:9"]
    assert (c["action"], c["rule"]) == ("Shim", "signature.replacement_breaks")
    assert "torch/_inductor/lowering.py:6" in c["evidence"]
