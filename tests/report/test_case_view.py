"""What the pages say about a failing case, on real torch errors (``report/case_view.py``).

A real ``torch.compile`` on CPU whose backend raises gives torch's own wrapper message
(``backend='…' raised:``) and exception chain; a real triad (``suites/triad.py``) whose
device leg differs records its legs in torch's counters as the suites do.
"""

from __future__ import annotations

import inspect

import pytest

from instep.report.case_view import headline, triad_legs, user_frame
from instep.run.exception_chain import exception_chain, exception_message

torch = pytest.importorskip("torch")


def _failing_backend(gm, example_inputs):  # type: ignore[no-untyped-def]
    raise NotImplementedError("npu lowering for aten.sin is missing")


def test_headline_skips_torch_wrapper_and_names_the_users_line():
    def fn(x):  # type: ignore[no-untyped-def]
        return torch.sin(x) + 1

    torch._dynamo.reset()
    with pytest.raises(Exception) as caught:
        torch.compile(fn, backend=_failing_backend)(torch.ones(3))
    message = exception_message(caught.value)
    assert message.splitlines()[0].startswith("backend=")  # the wrapper torch writes first
    outcome = {"message": message, "exception_chain": exception_chain(caught.value)}
    assert headline(outcome) == "NotImplementedError: npu lowering for aten.sin is missing"
    lines, start = inspect.getsourcelines(_failing_backend)
    raising = start + next(i for i, t in enumerate(lines) if "raise" in t)
    assert user_frame(outcome) == f"{__file__}:{raising}"


def test_a_leg_that_did_not_run_says_why():
    from torch._dynamo.utils import counters

    from instep.suites.triad import DeviceEagerMismatch, check_triad

    def differs(result, reference):  # type: ignore[no-untyped-def]
        raise AssertionError("off by one")

    counters.clear()
    with pytest.raises(DeviceEagerMismatch):
        check_triad(torch.sin, [torch.ones(2)], "cpu", compare=differs)
    stored = {f"instep.{k}": v for k, v in counters["instep"].items()}
    outcome = {"status": "failed", "layer": "eager", "metrics": {"counters": stored}}
    legs = {leg["leg"]: leg for leg in triad_legs(outcome)}
    assert legs["eager_cpu"]["state"] == "ok" and legs["eager_cpu"]["why"] is None
    assert legs["eager_device"]["state"] == "mismatch"
    assert legs["compiled_device"]["state"] is None
    assert legs["compiled_device"]["why"] == "eager device differed from eager CPU first"
    crashed = {"status": "crashed", "metrics": {"counters": {"instep.triad.eager_cpu.ok": 1}}}
    assert triad_legs(crashed)[1]["why"] == "the case crashed before this leg ended"
