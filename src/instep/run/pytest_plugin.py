"""instep's pytest plugin: one structured outcome per test item, from hooks, never from text.

:class:`OutcomeRecorder` is registered in the worker processes of ``instep run``. For each
item it keeps the setup/call/teardown reports, the exception info of a failing phase
(turned into a whole exception chain with frames), skip and xfail reasons, the warnings
recorded during the item, and the compile counters torch exposes (Dynamo's ``counters``,
Inductor's ``metrics``, ``compilation_time_metrics``) as deltas over the item, when torch
was imported. It announces each phase through ``on_phase`` so the process that forked
the worker knows the stage a crash happened in. It does not run, schedule or store
anything: the worker host does that.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable
from typing import Any

import pytest
from _pytest.unittest import TestCaseFunction

from instep.run.exception_chain import MAX_MESSAGE, exception_chain

MAX_WARNINGS = 50
MAX_LONGREPR = 20_000
#: How pytest fails a passing ``unittest.expectedFailure`` test, and how PyTorch's own
#: device-type ``expectedFailure`` decorator fails one: both are unexpected successes.
UNEXPECTED_SUCCESS = ("Unexpected success", "expected test to fail, but it passed")
#: the original error of a ``unittest.expectedFailure`` test that failed as expected
_XFAIL_CAUSE = pytest.StashKey[BaseException]()


def compile_counters() -> dict[str, float]:
    """A flat snapshot of torch's compile counters; empty when torch is not imported."""
    snap: dict[str, float] = {}
    utils = sys.modules.get("torch._dynamo.utils")
    if utils is not None:
        for group, counter in getattr(utils, "counters", {}).items():
            for key, value in counter.items():
                if isinstance(value, (int, float)):
                    snap[f"{group}.{key}"] = value
        for key, times in getattr(utils, "compilation_time_metrics", {}).items():
            snap[f"time.{key}"] = float(sum(times))
            snap[f"timecount.{key}"] = len(times)
    metrics = sys.modules.get("torch._inductor.metrics")
    if metrics is not None:
        for key in (
            "generated_kernel_count",
            "generated_cpp_vec_kernel_count",
            "ir_nodes_pre_fusion",
        ):
            value = getattr(metrics, key, None)
            if isinstance(value, int):
                snap[f"inductor_metrics.{key}"] = value
    return snap


def counter_delta(before: dict[str, float], after: dict[str, float]) -> dict[str, Any]:
    """What changed during one item, summarised; tests that reset counters count from 0."""
    delta: dict[str, float] = {}
    for key, value in after.items():
        old = before.get(key, 0)
        diff = value - old if value >= old else value
        if diff:
            delta[key] = round(diff, 6) if isinstance(diff, float) else diff
    if not delta:
        return {}
    counters = {k: v for k, v in delta.items() if not k.startswith(("time.", "timecount."))}
    return {
        "graph_breaks": sum(v for k, v in counters.items() if k.startswith("graph_break.")),
        "generated_kernels": counters.get("inductor_metrics.generated_kernel_count", 0),
        "fallbacks": sum(v for k, v in counters.items() if "fallback" in k.lower()),
        "unique_graphs": counters.get("stats.unique_graphs", 0),
        "counters": counters,
    }


def stage_times(delta_source: tuple[dict[str, float], dict[str, float]]) -> dict[str, float]:
    before, after = delta_source
    out: dict[str, float] = {}
    for key, value in after.items():
        if key.startswith("time."):
            diff = value - before.get(key, 0.0)
            if diff < 0:
                diff = value
            if diff > 0:
                out[key[len("time.") :]] = round(diff, 6)
    return out


class OutcomeRecorder:
    """Collects one outcome dict per item; :meth:`begin` and :meth:`finish` bracket it."""

    def __init__(self, on_phase: Callable[[str, str], None] | None = None) -> None:
        self.on_phase = on_phase
        self._nodeid: str | None = None
        self._reset()

    def _reset(self) -> None:
        self._reports: dict[str, pytest.TestReport] = {}
        self._chains: dict[str, list[dict[str, Any]]] = {}
        self._warnings: list[dict[str, Any]] = []
        self._counters_before: dict[str, float] = {}
        self._unexpected_success: str | None = None
        self._started = time.time()

    def begin(self, nodeid: str) -> None:
        self._nodeid = nodeid
        self._reset()
        self._counters_before = compile_counters()

    # -- hooks ---------------------------------------------------------------------------

    def _phase(self, item: pytest.Item, phase: str) -> None:
        if self.on_phase is not None:
            self.on_phase(item.nodeid, phase)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        self._phase(item, "setup")

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_call(self, item: pytest.Item) -> None:
        self._phase(item, "call")

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_teardown(self, item: pytest.Item) -> None:
        self._phase(item, "teardown")

    def pytest_configure(self, config: pytest.Config) -> None:
        _keep_unittest_xfail_causes()

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo):  # type: ignore[no-untyped-def]
        report = yield
        excinfo = call.excinfo
        if excinfo is None or item.nodeid != self._nodeid:
            return report
        error: BaseException | None = None
        if report.failed:
            error = excinfo.value
            if _is_unexpected_success(error):
                self._unexpected_success = str(error).strip().splitlines()[0]
        elif report.skipped and getattr(report, "wasxfail", None) is not None:
            # an expected failure: keep what it failed with, so that a list can tell
            # when it fails for another reason (unittest's is stashed: pytest drops it)
            error = item.stash.get(_XFAIL_CAUSE, None) or excinfo.value
        if error is not None:
            try:
                self._chains[call.when] = exception_chain(error)
            except Exception as exc:  # never lose the outcome over the chain
                self._chains[call.when] = [
                    {"type": type(exc).__name__, "message": f"chain unreadable: {exc}"}
                ]
        return report

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.nodeid == self._nodeid:
            self._reports[report.when] = report

    def pytest_warning_recorded(self, warning_message, when, nodeid, location) -> None:  # type: ignore[no-untyped-def]
        if nodeid and nodeid != self._nodeid:
            return
        if len(self._warnings) >= MAX_WARNINGS:
            return
        self._warnings.append(
            {
                "category": getattr(
                    warning_message.category, "__name__", str(warning_message.category)
                ),
                "message": str(warning_message.message)[:500],
                "file": warning_message.filename,
                "line": warning_message.lineno,
                "when": when,
            }
        )

    # -- the outcome ----------------------------------------------------------------------

    def finish(self) -> dict[str, Any]:
        """The outcome of the item begun last (status, chain, timings, counters...)."""
        reports = self._reports
        setup, call, teardown = (reports.get(w) for w in ("setup", "call", "teardown"))
        status, phase = _status(setup, call, teardown)
        failing = reports.get(phase) if phase else None
        chain = self._chains.get(phase or "", [])
        after = compile_counters()
        data: dict[str, Any] = {
            "status": status,
            "stage": phase if status in ("failed", "error") else None,
            "duration": round(sum(r.duration for r in reports.values()), 6),
            "timings": {w: round(r.duration, 6) for w, r in reports.items()},
            "stage_timings": stage_times((self._counters_before, after)),
            "metrics": counter_delta(self._counters_before, after),
            "exception_chain": chain,
            "warnings": self._warnings,
            "skip_reason": None,
            "exception_type": None,
            "message": None,
            "longrepr": None,
        }
        if chain:
            data["exception_type"] = chain[0]["type"]
            data["message"] = chain[0]["message"]
        if failing is not None and failing.failed:
            text = str(failing.longrepr)
            data["longrepr"] = text[-MAX_LONGREPR:]
            if not chain:
                data["message"] = (
                    text.strip().splitlines()[-1][:MAX_MESSAGE] if text.strip() else None
                )
        skipped = next((r for r in (setup, call) if r is not None and r.skipped), None)
        if skipped is not None:
            wasxfail = getattr(skipped, "wasxfail", None)
            if wasxfail is not None:
                data["skip_reason"] = wasxfail or "xfail"
            elif isinstance(skipped.longrepr, tuple) and len(skipped.longrepr) == 3:
                reason = str(skipped.longrepr[2])
                data["skip_reason"] = reason.removeprefix("Skipped: ")
        if call is not None and getattr(call, "wasxfail", None) and call.passed:
            data["skip_reason"] = call.wasxfail or "xfail"
        if self._unexpected_success is not None and status == "failed" and phase == "call":
            # not a failure: a stale expected-failure mark ("fixed - remove it")
            data.update(
                status="xpassed",
                stage=None,
                skip_reason=self._unexpected_success,
                exception_chain=[],
                exception_type=None,
                message=None,
                longrepr=None,
            )
            data.setdefault("evidence", {})["unexpected_success"] = True
        return data


def _is_unexpected_success(error: BaseException) -> bool:
    """PyTorch's ``TestCase`` appends a "To execute this test, run…" hint: the first line
    is the message."""
    lines = str(error).strip().splitlines()
    first = lines[0] if lines else ""
    return any(first == mark or first.startswith(mark + ":") for mark in UNEXPECTED_SUCCESS)


def _keep_unittest_xfail_causes() -> None:
    """Stash the original error of a ``unittest.expectedFailure`` test on its item.

    pytest's ``TestCaseFunction.addExpectedFailure`` turns it into an ``XFailed`` and drops
    the error; the wrapper keeps it (once per process, idempotent)."""
    original = TestCaseFunction.addExpectedFailure
    if getattr(original, "_instep", False):
        return

    def add_expected_failure(self, testcase, rawexcinfo, reason=""):  # type: ignore[no-untyped-def]
        with contextlib.suppress(Exception):
            self.stash[_XFAIL_CAUSE] = rawexcinfo[1]
        return original(self, testcase, rawexcinfo, reason)

    add_expected_failure._instep = True  # type: ignore[attr-defined]
    TestCaseFunction.addExpectedFailure = add_expected_failure  # type: ignore[method-assign]


def _status(setup, call, teardown) -> tuple[str, str | None]:  # type: ignore[no-untyped-def]
    """pytest's verdict for an item from its phase reports, and the phase that decided it."""
    if setup is None:
        return "error", None
    if setup.failed:
        return "error", "setup"
    if setup.skipped:
        return ("xfailed" if getattr(setup, "wasxfail", None) is not None else "skipped"), "setup"
    status, phase = "passed", "call"
    if call is not None:
        if call.failed:
            status = "failed"
        elif call.skipped:
            status = "xfailed" if getattr(call, "wasxfail", None) is not None else "skipped"
        elif getattr(call, "wasxfail", None) is not None:
            status = "xpassed"
    if teardown is not None and teardown.failed and status not in ("failed",):
        return "error", "teardown"
    return status, phase
