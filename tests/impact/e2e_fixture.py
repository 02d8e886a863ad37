"""A small upstream (git) and downstream (tree) pair exercising every coupling kind.

Upstream ``torch`` at tag v1, then commits: expand gains ``implicit`` (PR #101),
compute_ancestors body fix (PR #102) and its revert, a config default flip (#103), a
removed helper (#104), codegen/triton changes (#105). The downstream ``torch_npu`` forks,
patches, subclasses, imports and registers against it, with a version gate.
All code here is written for the test (in the style of the real projects).
"""

from __future__ import annotations

from pathlib import Path

from .gitrepo import RepoBuilder

REGISTER_LOWERING = """\
def register_lowering(op, type_promotion_kind=None):
    def wrap(fn):
        lowerings[op] = fn
        return fn
    return wrap
"""

LOWERING_V1 = (
    '''\
"""Lowerings."""
import torch
from torch._inductor import config
aten = torch.ops.aten
lowerings = {}


'''
    + REGISTER_LOWERING
    + """

def _validate(x):
    return x


def make_fallback(op, warn=True):
    return _validate(op)


@register_lowering(aten.expand)
def expand(x, sizes):
    return x.expand(sizes)


@register_lowering(aten.with_effects)
def with_effects(token, op, *args):
    return op(*args)


def old_helper(x):
    return x


make_fallback(aten.uniform)
"""
)

SCHEDULER_V1 = """\
class Scheduler:
    def __init__(self, nodes):
        self.nodes = nodes

    def compute_ancestors(self):
        ancestors = {}
        for node in self.nodes:
            ancestors[node] = set()
        return ancestors
"""

SIMD_V1 = """\
class SIMDKernel:
    def codegen_body(self):
        return "body"

    def indexing(self, index):
        return index
"""

TRITON_V1 = """\
from torch._inductor.codegen.simd import SIMDKernel


class TritonKernel(SIMDKernel):
    def load(self, name, index):
        return f"tl.load({name} + {index})"

    def store(self, name, index, value):
        return f"tl.store({name} + {index}, {value})"
"""

CONFIG_V1 = "fallback_random = False\nmax_autotune = False\n"
DYNAMO_INIT = "from .eval_frame import optimize\n"
EVAL_FRAME_V1 = "def optimize(backend='inductor'):\n    return backend\n"

DOWN_LOWERING = """\
import torch
from torch._inductor.lowering import register_lowering, make_fallback
from torch._inductor import lowering
aten = torch.ops.aten


def _register_npu_lowerings():
    @register_lowering(aten.expand)
    def expand(x, sizes):
        return x.expand(sizes)

    make_fallback(aten.uniform)


@register_lowering(aten.with_effects)
def with_effects(token, op, *args):
    return op(*args)
"""

DOWN_PATCH = """\
from torch._inductor.scheduler import Scheduler


def npu_compute_ancestors(self):
    ancestors = {}
    for node in self.nodes:
        ancestors[node] = set()
    return ancestors


Scheduler.compute_ancestors = npu_compute_ancestors
"""

DOWN_TRITON = """\
from torch._inductor.codegen.triton import TritonKernel


class NPUTritonKernel(TritonKernel):
    def load(self, name, index):
        return f"npu_load({name}, {index})"
"""

DOWN_CONFIG = """\
from torch._inductor import config

config.fallback_random = True
"""

DOWN_DYNAMO = """\
import torch._dynamo
from torch._inductor.lowering import old_helper

TORCH_VERSION = (2, 14)


def compile_npu(fn):
    return torch._dynamo.optimize("npu")(fn)
"""

DOWN_UNRELATED = "import os\n\nVALUE = os.sep\n"


def build_upstream(root: Path) -> RepoBuilder:
    repo = RepoBuilder(root)
    repo.write("torch/__init__.py", "__version__ = '2.13.0'\n")
    repo.write("torch/version.py", "__version__ = '2.13.0'\n")
    repo.write("torch/_inductor/__init__.py", "")
    repo.write("torch/_inductor/lowering.py", LOWERING_V1)
    repo.write("torch/_inductor/scheduler.py", SCHEDULER_V1)
    repo.write("torch/_inductor/config.py", CONFIG_V1)
    repo.write("torch/_inductor/codegen/__init__.py", "")
    repo.write("torch/_inductor/codegen/simd.py", SIMD_V1)
    repo.write("torch/_inductor/codegen/triton.py", TRITON_V1)
    repo.write("torch/_dynamo/__init__.py", DYNAMO_INIT)
    repo.write("torch/_dynamo/eval_frame.py", EVAL_FRAME_V1)
    repo.write("test/inductor/test_lowering.py", "def test_expand():\n    pass\n")
    repo.commit("base")
    repo.tag("v1")

    low = LOWERING_V1.replace("def expand(x, sizes):", "def expand(x, sizes, *, implicit=False):")
    repo.write("torch/_inductor/lowering.py", low)
    repo.write(
        "test/inductor/test_lowering.py",
        "def test_expand():\n    pass\n\n\ndef test_expand_implicit():\n    pass\n",
    )
    repo.commit(
        "[inductor] expand lowering accepts implicit (#101)\n\n"
        "Pull Request resolved: https://github.com/pytorch/pytorch/pull/101"
    )

    sched = SCHEDULER_V1.replace(
        "            ancestors[node] = set()",
        "            ancestors[node] = set()\n            ancestors[node].discard(node)",
    )
    repo.write("torch/_inductor/scheduler.py", sched)
    fix = repo.commit("[inductor] tolerate self edges in compute_ancestors (#102)")
    repo.revert(
        fix,
        'Revert "[inductor] tolerate self edges in compute_ancestors (#102)"\n\n'
        f"This reverts commit {fix}.\n\n"
        "Reverted https://github.com/pytorch/pytorch/pull/102 on behalf of someone",
    )

    repo.write(
        "torch/_inductor/config.py",
        CONFIG_V1.replace("fallback_random = False", "fallback_random = True"),
    )
    repo.commit("[inductor] flip fallback_random default (#103)")

    low = low.replace("def old_helper(x):\n    return x\n\n\n", "")
    repo.write(
        "torch/_inductor/lowering.py",
        low.replace("    return x\n\n\ndef make", "    return x  # validated\n\n\ndef make"),
    )
    repo.write(
        "torch/_inductor/lowering.py",
        low.replace("def _validate(x):\n    return x", "def _validate(x):\n    return x or None"),
    )
    repo.commit("[inductor] remove old_helper, tighten _validate (#104)")

    repo.write(
        "torch/_inductor/codegen/simd.py", SIMD_V1.replace('return "body"', 'return "body" + "\\n"')
    )
    repo.write(
        "torch/_inductor/codegen/triton.py",
        TRITON_V1.replace(
            'return f"tl.load({name} + {index})"', 'return f"tl.load({name} + {index}, mask=None)"'
        ),
    )
    repo.commit("[inductor] codegen: masked loads, body newline (#105)")
    repo.write("torch/version.py", "__version__ = '2.14.0'\n")
    repo.commit("bump version")
    repo.tag("v2")
    return repo


def build_downstream(root: Path) -> Path:
    files = {
        "torch_npu/__init__.py": "",
        "torch_npu/_inductor/__init__.py": "",
        "torch_npu/_inductor/lowering_fx.py": DOWN_LOWERING,
        "torch_npu/_inductor/plugin.py": DOWN_PATCH,
        "torch_npu/_inductor/codegen/__init__.py": "",
        "torch_npu/_inductor/codegen/triton.py": DOWN_TRITON,
        "torch_npu/_inductor/config_patch.py": DOWN_CONFIG,
        "torch_npu/utils/dyn.py": DOWN_DYNAMO,
        "torch_npu/utils/unrelated.py": DOWN_UNRELATED,
        # the downstream's own tests (not indexed: suggested for the units they exercise)
        "test/_inductor/test_lowering_fx.py": (
            "from torch_npu._inductor import lowering_fx\n\n\n"
            "def test_expand():\n    assert lowering_fx\n"
        ),
        "test/_inductor/test_kernel.py": (
            "from torch._inductor.codegen.triton import (\n    TritonKernel,\n)\n\n\n"
            "def test_kernel():\n    assert TritonKernel\n"
        ),
        "test/test_unrelated.py": (
            "import torch_npu.utils.unrelated as u\n\n\ndef test_u():\n    assert u\n"
        ),
    }
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root
