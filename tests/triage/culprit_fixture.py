"""A runnable upstream (git) and downstream (tree) pair whose downstream tests really break.

Upstream is a small package named ``torch`` (no real torch: it imports nothing) with a
miniature Inductor: a lowering table filled by ``register_lowering``, a ``GraphLowering``
that calls the lowerings, a ``Scheduler`` that calls a backend's
``generate_kernel_code_from_nodes``, a ``codecache.compile_file`` the graph calls, and a
``utils.get_device_tflops``. Tag v1, then one commit per change, each with a PR number:

- #201 the ``expand`` lowering gains ``implicit`` and the graph passes it;
- #202 ``SIMDScheduling.generate_kernel_code_from_nodes`` gains ``hint_override`` and the
  scheduler passes it;
- #203 ``get_device_tflops`` moves from ``utils`` to ``runtime/hints.py``;
- #204 ``compile_file`` gains ``cmd`` and the graph passes it;
- #205 an unrelated change in the same files (a body and a config default);
then tag v2.

The downstream ``npu_like`` was written against v1 in the patterns torch_npu uses: it
registers its own ``expand`` lowering, subclasses ``SIMDScheduling`` and overrides the
method, imports ``get_device_tflops`` from ``utils``, and monkey-patches ``compile_file``
with a wrapper of the old signature. Its tests pass with v1 on ``sys.path`` and fail with
v2, each for its own upstream commit. All code here is written for the test.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.impact.gitrepo import RepoBuilder

TORCH_INIT = '''\
"""A miniature torch: op handles and nothing else."""
__version__ = "2.13.0"


class _Namespace:
    def __init__(self, name):
        self._name = name

    def __getattr__(self, op):
        return f"{self._name}.{op}"


class _Ops:
    aten = _Namespace("aten")


ops = _Ops()
'''

LOWERING = '''\
"""Lowerings: one function per op, registered in a table."""
import torch

aten = torch.ops.aten
lowerings = {}


def register_lowering(op):
    def wrap(fn):
        lowerings[op] = fn
        return fn

    return wrap


@register_lowering(aten.expand)
def expand(x, sizes):
    return [x] * sizes[0]


@register_lowering(aten.add)
def add(x, y):
    return x + y
'''

GRAPH = '''\
"""The graph: calls each node's lowering, then compiles the result."""
from torch._inductor import codecache
from torch._inductor.lowering import lowerings


class GraphLowering:
    def call_function(self, target, args, kwargs):
        return lowerings[target](*args, **kwargs)

    def run(self, nodes):
        return [self.call_function(target, args, kwargs) for target, args, kwargs in nodes]

    def compile_to_module(self, source):
        return codecache.compile_file(source, "out.so")
'''

CODECACHE = '''\
"""Compiling generated code."""


def compile_file(inputs, output):
    return f"cc {inputs} -o {output}"
'''

SIMD = '''\
"""The scheduling base class a backend subclasses."""


class SIMDScheduling:
    def generate_kernel_code_from_nodes(self, nodes, benchmark_kernel=False):
        return "\\n".join(str(n) for n in nodes)

    def flush(self):
        return None
'''

SCHEDULER = '''\
"""The scheduler: asks the backend for each group's kernel code."""


class Scheduler:
    def __init__(self, backend):
        self.backend = backend

    def codegen(self, groups):
        out = []
        for group in groups:
            out.append(self.backend.generate_kernel_code_from_nodes(group, benchmark_kernel=False))
        return out
'''

UTILS = '''\
"""Helpers."""


def get_device_tflops(dtype):
    return 100.0


def ceildiv(a, b):
    return -(a // -b)
'''

CONFIG = "fallback_random = False\n"

DOWN_LOWERING = '''\
"""NPU lowerings, registered over the upstream ones."""
import torch
from torch._inductor.lowering import register_lowering

aten = torch.ops.aten


@register_lowering(aten.expand)
def npu_expand(x, sizes):
    return [x] * sizes[0]
'''

DOWN_SCHEDULING = '''\
"""NPU scheduling."""
from torch._inductor.codegen.simd import SIMDScheduling


class NPUScheduling(SIMDScheduling):
    def generate_kernel_code_from_nodes(self, nodes, benchmark_kernel=False):
        return "npu:" + ",".join(str(n) for n in nodes)
'''

DOWN_HINTS = '''\
"""NPU performance hints."""
from torch._inductor.utils import get_device_tflops


def npu_tflops():
    return get_device_tflops("float16") * 2
'''

DOWN_PATCH = '''\
"""Patches applied when the backend loads."""
from torch._inductor import codecache


def npu_compile_file(inputs, output):
    return f"npu-cc {inputs} -o {output}"


codecache.compile_file = npu_compile_file
'''

DOWN_TESTS = {
    "tests/test_lowering.py": """\
import npu_like.lowering  # noqa: F401
from torch._inductor.graph import GraphLowering


def test_expand_lowering():
    assert GraphLowering().run([("aten.expand", (1, (2,)), {})]) == [[1, 1]]
""",
    "tests/test_scheduling.py": """\
from npu_like.scheduling import NPUScheduling
from torch._inductor.scheduler import Scheduler


def test_codegen():
    assert Scheduler(NPUScheduling()).codegen([["a", "b"]]) == ["npu:a,b"]
""",
    "tests/test_hints.py": """\
from npu_like.hints import npu_tflops


def test_tflops():
    assert npu_tflops() == 200.0
""",
    "tests/test_compile.py": """\
import npu_like.patch  # noqa: F401
from torch._inductor.graph import GraphLowering


def test_compile_to_module():
    assert GraphLowering().compile_to_module("k.c").startswith("npu-cc k.c")
""",
    "tests/test_add.py": """\
from torch._inductor.graph import GraphLowering


def test_add():
    assert GraphLowering().run([("aten.add", (1, 2), {})]) == [3]
""",
}

#: which upstream PR breaks which downstream test
EXPECTED = {
    "tests/test_lowering.py::test_expand_lowering": 201,
    "tests/test_scheduling.py::test_codegen": 202,
    "tests/test_hints.py": 203,  # a collection error: the module does not import
    "tests/test_compile.py::test_compile_to_module": 204,
}


def build_upstream(root: Path) -> RepoBuilder:
    repo = RepoBuilder(root)
    files = {
        "torch/__init__.py": TORCH_INIT,
        "torch/_inductor/__init__.py": "",
        "torch/_inductor/lowering.py": LOWERING,
        "torch/_inductor/graph.py": GRAPH,
        "torch/_inductor/codecache.py": CODECACHE,
        "torch/_inductor/scheduler.py": SCHEDULER,
        "torch/_inductor/utils.py": UTILS,
        "torch/_inductor/config.py": CONFIG,
        "torch/_inductor/runtime/__init__.py": "",
        "torch/_inductor/codegen/__init__.py": "",
        "torch/_inductor/codegen/simd.py": SIMD,
    }
    for rel, text in files.items():
        repo.write(rel, text)
    repo.commit("base")
    repo.tag("v1")

    lowering = LOWERING.replace("def expand(x, sizes):", "def expand(x, sizes, *, implicit=False):")
    graph = GRAPH.replace(
        "        return lowerings[target](*args, **kwargs)",
        '        if target == "aten.expand":\n'
        '            kwargs = {**kwargs, "implicit": False}\n'
        "        return lowerings[target](*args, **kwargs)",
    )
    repo.write("torch/_inductor/lowering.py", lowering)
    repo.write("torch/_inductor/graph.py", graph)
    repo.commit("[inductor] expand lowering takes implicit (#201)")

    repo.write(
        "torch/_inductor/codegen/simd.py",
        SIMD.replace("benchmark_kernel=False):", "benchmark_kernel=False, hint_override=None):"),
    )
    repo.write(
        "torch/_inductor/scheduler.py",
        SCHEDULER.replace("benchmark_kernel=False)", "benchmark_kernel=False, hint_override=None)"),
    )
    repo.commit("[inductor] pass hint_override to kernel codegen (#202)")

    repo.write(
        "torch/_inductor/utils.py",
        UTILS.replace("def get_device_tflops(dtype):\n    return 100.0\n\n\n", ""),
    )
    repo.write(
        "torch/_inductor/runtime/hints.py",
        '"""Hardware hints."""\n\n\ndef get_device_tflops(dtype):\n    return 100.0\n',
    )
    repo.commit("[inductor] move get_device_tflops to runtime.hints (#203)")

    repo.write(
        "torch/_inductor/codecache.py",
        CODECACHE.replace(
            'def compile_file(inputs, output):\n    return f"cc {inputs} -o {output}"',
            'def compile_file(inputs, output, cmd):\n    return f"{cmd} {inputs} -o {output}"',
        ),
    )
    graph = graph.replace(
        'codecache.compile_file(source, "out.so")', 'codecache.compile_file(source, "out.so", "cc")'
    )
    repo.write("torch/_inductor/graph.py", graph)
    repo.commit("[inductor] compile_file takes the compiler command (#204)")

    repo.write("torch/_inductor/config.py", "fallback_random = True\n")
    repo.write(
        "torch/_inductor/codegen/simd.py",
        (repo.path / "torch/_inductor/codegen/simd.py")
        .read_text()
        .replace(
            "    def flush(self):\n        return None", "    def flush(self):\n        return 0"
        ),
    )
    repo.write(
        "torch/_inductor/utils.py",
        (repo.path / "torch/_inductor/utils.py")
        .read_text()
        .replace("return -(a // -b)", "return (a + b - 1) // b"),
    )
    repo.commit("[inductor] flip fallback_random, flush returns 0, ceildiv (#205)")
    repo.tag("v2")
    return repo


def build_downstream(root: Path) -> Path:
    files = {
        "npu_like/__init__.py": "",
        "npu_like/lowering.py": DOWN_LOWERING,
        "npu_like/scheduling.py": DOWN_SCHEDULING,
        "npu_like/hints.py": DOWN_HINTS,
        "npu_like/patch.py": DOWN_PATCH,
        **DOWN_TESTS,
    }
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def checkout(repo: RepoBuilder, rev: str, dest: Path) -> Path:
    """The upstream's files at ``rev`` in ``dest`` (what an installed torch would be)."""
    repo.git("worktree", "add", "-q", "--detach", str(dest), rev)
    return dest


def without_shipped_suites(report: Path) -> None:
    """Leave out of an impact report the tests that run in instep's shipped suites (the
    OpInfo cases and the smoke cases a report suggests): this fixture's upstream is a
    small torch written for the test, on which those suites, written for the real one,
    cannot run. The downstream's own tests, which the culprits are about, stay. (The
    suggestions themselves: tests/impact/test_runnable_suggestions.py.)"""
    doc = json.loads(report.read_text(encoding="utf-8"))
    for unit in doc["units"]:
        unit["suggested_tests"] = [
            t for t in unit["suggested_tests"] if not t.startswith(("instep:", "opinfo:"))
        ]
    report.write_text(json.dumps(doc), encoding="utf-8")
