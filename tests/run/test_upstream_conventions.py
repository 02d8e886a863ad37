"""PyTorch's own test conventions, as upstream test files use them, run for real.

``unittest.expectedFailure`` (what OpInfo's ``xfail`` decorates with), PyTorch's
device-type ``expectedFailure`` and ``instantiate_device_type_tests`` classes: a stale
expected-failure mark is an unexpected success to remove, not a failure, and an expected
failure keeps the error it failed with, in both process models.
"""

from __future__ import annotations

import importlib.util

import pytest
from tests.run.cases import by_case, show, write

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch not installed"),
]

UPSTREAM_STYLE = """
import unittest

import torch
from torch.testing._internal.common_device_type import (
    expectedFailure,
    instantiate_device_type_tests,
)
from torch.testing._internal.common_utils import TestCase, run_tests


class TestKernels(TestCase):
    @unittest.expectedFailure
    def test_stale_unittest_mark(self, device):
        self.assertEqual(torch.ones(2, device=device).sum().item(), 2.0)

    @unittest.expectedFailure
    def test_still_broken(self, device):
        raise NotImplementedError("aten::frobnicate has no kernel for this device")

    @expectedFailure("cpu")
    def test_stale_device_mark(self, device):
        self.assertTrue(torch.zeros(1, device=device).eq(0).all())

    def test_passes(self, device):
        self.assertEqual(torch.arange(3, device=device).tolist(), [0, 1, 2])


instantiate_device_type_tests(TestKernels, globals(), only_for="cpu")

if __name__ == "__main__":
    run_tests()
"""


@pytest.mark.parametrize("model", ["shared", "fork"])
def test_expected_failure_conventions(instep, tmp_path, model):
    write(tmp_path, "test_upstream_style.py", UPSTREAM_STYLE)
    result = instep(
        "run", "test_upstream_style.py", "--run", "u", "--process-model", model, "-n", "2"
    )
    assert result.code == 0, result.err  # an unexpected success fails no run
    out = by_case(show(instep, "u"))
    assert {name: o["status"] for name, o in out.items()} == {
        "test_stale_unittest_mark_cpu": "xpassed",
        "test_still_broken_cpu": "xfailed",
        "test_stale_device_mark_cpu": "xpassed",
        "test_passes_cpu": "passed",
    }
    stale = out["test_stale_unittest_mark_cpu"]
    assert stale["skip_reason"] == "Unexpected success"
    assert stale["evidence"]["unexpected_success"] is True
    assert stale["layer"] is None and stale["exception_chain"] == []
    device_mark = out["test_stale_device_mark_cpu"]
    assert device_mark["skip_reason"] == "expected test to fail, but it passed"

    broken = out["test_still_broken_cpu"]  # the error it was expected to fail with
    assert broken["exception_type"] == "NotImplementedError"
    assert "aten::frobnicate" in broken["message"]
    assert broken["category"] and broken["signature"]

    check = instep("tier", "check", "u")
    assert check.code == 0, check.err
    assert (
        "UNEXPECTED SUCCESS - remove its expected-failure mark:"
        " test_upstream_style.py::TestKernelsCPU::test_stale_unittest_mark_cpu"
    ) in check.out
    assert "2 unexpected successes" in check.out


def test_a_listed_expected_failure_that_fails_differently_is_reported(instep, tmp_path):
    write(tmp_path, "test_upstream_style.py", UPSTREAM_STYLE)
    assert instep("run", "test_upstream_style.py", "--run", "u").code == 0
    listed = tmp_path / "expected.toml"
    listed.write_text(
        '[[case]]\ncase = "TestKernelsCPU::test_still_broken_cpu"\n'
        'reason = "missing lowering"\ncategory = "lowering.missing_operator"\n'
    )
    check = instep("tier", "check", "u", "--expected", str(listed))
    assert check.code == 0, check.err
    assert "FAILS DIFFERENTLY: test_upstream_style.py::TestKernelsCPU::test_still_broken_cpu" in (
        check.out
    )
    assert "listed as lowering.missing_operator, now" in check.out


def test_an_80_column_terminal_shows_node_ids_by_their_tail(tmp_path, monkeypatch):
    import io

    from rich.console import Console

    from instep.profiles import load_profile
    from instep.run.progress import ProgressReporter
    from instep.run.runner import RunOptions, execute_run
    from instep.triage.classifier import Classifier

    monkeypatch.chdir(tmp_path)
    write(
        tmp_path,
        "test_torchinductor_opinfo_like.py",
        "class TestInductorOpInfoCPU:\n"
        "    def test_comprehensive_nn_functional_interpolate_bilinear_cpu_float32(self):\n"
        "        raise AssertionError('Tensor-likes are not close!')\n",
    )
    screen = io.StringIO()
    reporter = ProgressReporter(Console(file=screen, width=80, force_terminal=False))
    execute_run(
        str(tmp_path / "s.db"),
        load_profile("cpu"),
        RunOptions(paths=["test_torchinductor_opinfo_like.py"], preimport=[]),
        reporter,
        classifier=Classifier,
    )
    text = screen.getvalue()
    assert "…al_interpolate_bilinear_cpu_float32 │ failed" in text, text
    assert max(len(line) for line in text.splitlines()) <= 80
