"""A new upstream call that passes a keyword a downstream replacement never accepted.

torch-npu 2.14.0 puts ``NPUDeviceBenchmarkMixin`` first in the bases of upstream's
``ExternKernelGPUBenchmarkRequest`` (``ExternKernelGPUBenchmarkRequest.__bases__ =
(NPUDeviceBenchmarkMixin, ExternKernelBenchmarkRequest)``), so its ``do_bench(self, fn,
*input_tensors, output_tensor=None)`` replaces upstream's unchanged ``do_bench(self, fn,
*input_tensors, out=None)``. torch 2.14.1 called ``self.do_bench(fn, *input_tensors,
out)``; torch 2.15.0's new ``benchmark_run_fn`` passes ``out=out``: a TypeError, though no
signature changed. The break is a coupling of the caller's change, at the ``__bases__``
line and at the mixin's def; an override of the method is found the same way.

Negative cases: a mixin that takes ``out=``; a changed caller whose old body already
passed the keyword; a new call only under a CUDA-only branch (Test).
"""

from __future__ import annotations

import pytest

from .gitrepo import impact_of_commit

UP_V1 = """\
class BenchmarkRequest:
    def do_bench(self, fn, *input_tensors, out=None):
        raise NotImplementedError

    def benchmark(self, *input_tensors, out=None):
        fn = self.make_run_fn()
        return self.do_bench(fn, *input_tensors, out)

    def check(self, fn):
        return self.do_bench(fn, out=None)


class GPUDeviceBenchmarkMixin:
    def do_bench(self, fn, *input_tensors, out=None):
        return fn()


class ExternKernelBenchmarkRequest(BenchmarkRequest):
    def make_run_fn(self, *input_tensors, out=None):
        return lambda: 0


class ExternKernelGPUBenchmarkRequest(GPUDeviceBenchmarkMixin, ExternKernelBenchmarkRequest):
    pass
"""

UP_V2 = UP_V1.replace(
    "        return self.do_bench(fn, *input_tensors, out)\n",
    "        return self.benchmark_run_fn(fn, *input_tensors, out=out)\n\n"
    "    def benchmark_run_fn(self, fn, *input_tensors, out=None):\n"
    "        return self.do_bench(fn, *input_tensors, out=out)\n\n"
    "    def warmup(self, fn, device):\n"
    '        if device.type == "cuda":\n'
    "            self.do_bench(fn, out=None)\n",
).replace(
    "    def check(self, fn):\n        return",
    "    def check(self, fn):\n        fn = fn or (lambda: 0)\n        return",
)
# an added module function calls make_run_fn on a receiver whose type is not written down
UP_V2 += "\n\ndef rerun(req):\n    return req.make_run_fn(out=None)\n"

MIXIN = """\
from torch._inductor.autotune_process import (
    ExternKernelBenchmarkRequest,
    ExternKernelGPUBenchmarkRequest,
)


def patch_tuning_process():
    ExternKernelGPUBenchmarkRequest.__bases__ = (
        NPUDeviceBenchmarkMixin,
        ExternKernelBenchmarkRequest,
    )


class NPUDeviceBenchmarkMixin:
    def do_bench(self, fn, *input_tensors, output_tensor=None):
        return fn()
"""

OVERRIDE = """\
from torch._inductor.autotune_process import ExternKernelBenchmarkRequest


class NPUExternRequest(ExternKernelBenchmarkRequest):
    def do_bench(self, fn, *input_tensors, output_tensor=None):
        return fn()

    def make_run_fn(self, *input_tensors, output_tensor=None):
        return lambda: 0
"""


@pytest.fixture(scope="module")
def couplings(tmp_path_factory) -> dict[str, dict]:
    doc = impact_of_commit(
        tmp_path_factory.mktemp("newcalls"),
        {"torch/_inductor/autotune_process.py": UP_V1},
        {"torch/_inductor/autotune_process.py": UP_V2},
        "benchmark_run_fn",
        {
            "torch_npu/_inductor/autotune_process.py": MIXIN,
            "torch_npu/_inductor/fits.py": MIXIN.replace("output_tensor=None", "out=None"),
            "torch_npu/_inductor/override.py": OVERRIDE,
        },
    )
    out: dict[str, dict] = {}
    for unit in doc["units"]:
        for c in unit["couplings"]:
            if c["rule"].startswith("call.new_"):
                out[f"{c['upstream'].split('::')[1]}@{c['downstream']}"] = c
    return out


def test_a_mixin_put_into_upstream_bases_breaks_on_a_new_keyword_call(couplings):
    for line in (8, 15):  # the __bases__ assignment, the mixin's def
        c = couplings[
            f"BenchmarkRequest.benchmark_run_fn@torch_npu/_inductor/autotune_process.py:{line}"
        ]
        assert (c["action"], c["rule"]) == ("Shim", "call.new_breaking_call")
        assert "torch/_inductor/autotune_process.py:10" in c["evidence"]
        assert "never accepted `out=`" in c["evidence"]
        assert "`BenchmarkRequest.benchmark_run_fn` is added" in c["evidence"]


def test_an_override_breaks_the_same_way(couplings):
    c = couplings["BenchmarkRequest.benchmark_run_fn@torch_npu/_inductor/override.py:5"]
    assert (c["action"], c["kind"]) == ("Shim", "subclass_override")


def test_a_replacement_that_takes_the_keyword_is_not_coupled(couplings):
    assert not [k for k in couplings if "fits.py" in k]


def test_a_caller_that_passed_the_keyword_before_is_not_new(couplings):
    assert not [k for k in couplings if k.startswith("BenchmarkRequest.check@")]


def test_a_new_call_under_a_cuda_only_branch_is_test(couplings):
    c = couplings["BenchmarkRequest.warmup@torch_npu/_inductor/autotune_process.py:8"]
    assert (c["action"], c["rule"]) == ("Test", "call.new_conditional_call")
    assert "a device type the backend never has" in c["evidence"]


def test_a_new_call_through_an_untyped_receiver_is_not_claimed(couplings):
    # `req.make_run_fn(out=None)`: only BenchmarkRequest's hierarchy defines make_run_fn,
    # but which of its classes `req` is is not written down
    assert not [k for k in couplings if k.startswith("rerun@")]
