"""When a case process is replaced, and the standby that replaces it.

Real runs of the ``fork`` process model (the device profiles' model) on CPU, with the
``fakedev`` stand-in runtime of ``test_process_models``: each case process imports the
test module itself, which logs its process id, so the tests count imports and see which
process ran which case. The reuse rule itself (``instep.run.reuse_rule``) is also checked
on outcome records directly.
"""

from __future__ import annotations

import pytest
from tests.run.cases import by_case, show, write
from tests.run.test_process_models import FAKEDEV

from instep.run.reuse_rule import replace_reason

PROFILE = """
[profiles.fakedev]
extends = "cpu"
device_type = "fakedev"

[profiles.fakedev.runtime]
fork = "before_init"
initialized = "fakedev.is_initialized"
fatal_errors = ["FAKEDEV error"]
healthy = "fakedev.healthy"
"""

#: fakedev with a health probe: a case can break the device without an error of its own
HEALTH = """
broken = False


def healthy():
    return not broken
"""

REUSE_TESTS = """
import os

import fakedev

fakedev.init()
with open(os.environ["IMPORT_LOG"], "a") as fh:
    fh.write(f"{os.getpid()}\\n")


def _note(name):
    with open(os.environ["CASE_LOG"], "a") as fh:
        fh.write(f"{name} {os.getpid()}\\n")


def test_1_passes():
    _note("1")


def test_2_assertion_fails():
    _note("2")
    assert 1 == 2


def test_3_passes():
    _note("3")


def test_4_device_error():
    _note("4")
    raise RuntimeError("FAKEDEV error: an illegal memory access was encountered")


def test_5_passes():
    _note("5")


def test_6_breaks_the_device_then_fails():
    _note("6")
    fakedev.broken = True
    raise ValueError("an ordinary failure, but the device no longer works")


def test_7_passes():
    _note("7")


def test_8_crashes():
    _note("8")
    os._exit(3)


def test_9_passes():
    _note("9")
"""


@pytest.fixture
def reuse_suite(tmp_path, monkeypatch):
    site = tmp_path.parent / f"{tmp_path.name}-site"
    write(site, "fakedev.py", FAKEDEV + HEALTH)
    write(tmp_path, "test_reuse.py", REUSE_TESTS)
    write(tmp_path, "instep.toml", PROFILE)
    monkeypatch.setenv("PYTHONPATH", str(site))
    monkeypatch.setenv("IMPORT_LOG", str(tmp_path / "imports.txt"))
    monkeypatch.setenv("CASE_LOG", str(tmp_path / "cases.txt"))
    monkeypatch.syspath_prepend(str(site))
    return tmp_path


def _case_pids(root) -> dict[str, int]:
    pairs = (line.split() for line in (root / "cases.txt").read_text().splitlines())
    return {name: int(pid) for name, pid in pairs}


def _imports(root) -> list[int]:
    return [int(x) for x in (root / "imports.txt").read_text().split()]


def test_a_failure_keeps_the_process_and_a_device_error_or_a_crash_replaces_it(instep, reuse_suite):
    result = instep(
        "run", "test_reuse.py", "--profile", "fakedev", "--preimport", "none",
        "-n", "1", "--isolate", "worker", "--standbys", "0", "--run", "r",
    )  # fmt: skip
    assert result.code == 1, result.err
    outcomes = by_case(show(instep, "r"))
    assert [outcomes[n]["status"] for n in sorted(outcomes)] == [
        "passed", "failed", "passed", "failed", "passed", "failed", "passed", "crashed",
        "passed",
    ]  # fmt: skip
    pids = _case_pids(reuse_suite)
    # an assertion failure keeps the process: cases 1 to 4 in one, the module imported once
    assert pids["1"] == pids["2"] == pids["3"] == pids["4"]
    # a device error replaces it, and says why
    assert pids["5"] != pids["4"]
    replaced = outcomes["test_4_device_error"]["evidence"]["process_replaced"]
    assert replaced == "a device error (FAKEDEV error: an illegal memory access was encountered)"
    assert "process_replaced" not in outcomes["test_2_assertion_fails"]["evidence"]
    # an ordinary failure after which the health probe says no replaces it too
    assert pids["6"] == pids["5"] and pids["7"] != pids["6"]
    why = outcomes["test_6_breaks_the_device_then_fails"]["evidence"]["process_replaced"]
    assert why == "the device no longer works here (fakedev.healthy() is false)"
    # a crash leaves no process: the next case runs in a new one
    assert pids["8"] == pids["7"] and pids["9"] != pids["8"]
    assert _imports(reuse_suite) == sorted(set(pids.values()), key=list(pids.values()).index)


def test_under_the_shared_model_every_failure_replaces_the_process(instep, reuse_suite):
    # hosts import the tests and fork case processes from them: a fresh one costs a fork
    instep(
        "run", "test_reuse.py::test_1_passes", "test_reuse.py::test_2_assertion_fails",
        "test_reuse.py::test_3_passes", "--profile", "fakedev", "--preimport", "none",
        "--process-model", "shared", "-n", "1", "--isolate", "worker", "--run", "s",
    )  # fmt: skip
    pids = _case_pids(reuse_suite)
    assert pids["1"] == pids["2"] != pids["3"]
    outcome = by_case(show(instep, "s"))["test_2_assertion_fails"]
    assert outcome["evidence"]["process_replaced"].startswith("a failure (under the shared")


WAITING_TESTS = """
import os
import time

import fakedev

fakedev.init()
with open(os.environ["IMPORT_LOG"], "a") as fh:
    fh.write(f"{os.getpid()}\\n")


def _successor_imported():
    # a case process started after this one has imported the module: a prepared standby
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with open(os.environ["IMPORT_LOG"]) as fh:
            pids = [int(x) for x in fh.read().split()]
        if pids.index(os.getpid()) < len(pids) - 1:
            return True
        time.sleep(0.05)
    return False


def _note(name):
    with open(os.environ["CASE_LOG"], "a") as fh:
        fh.write(f"{name} {os.getpid()}\\n")
"""

CRASH_AFTER_STANDBY = """

def test_1_crashes_once_its_successor_is_ready():
    _note("1")
    assert _successor_imported(), "no standby was prepared while this case ran"
    os._exit(3)


def test_2_runs_in_the_standby():
    _note("2")
"""


def test_the_successor_of_a_crashed_process_imported_the_module_before_the_crash(
    instep, reuse_suite
):
    write(reuse_suite, "test_standby.py", WAITING_TESTS + CRASH_AFTER_STANDBY)
    instep(
        "run", "test_standby.py", "--profile", "fakedev", "--preimport", "none",
        "-n", "1", "--isolate", "worker", "--standbys", "1", "--run", "sb",
    )  # fmt: skip
    outcomes = by_case(show(instep, "sb"))
    assert outcomes["test_1_crashes_once_its_successor_is_ready"]["status"] == "crashed"
    assert outcomes["test_2_runs_in_the_standby"]["status"] == "passed"
    pids, imports = _case_pids(reuse_suite), _imports(reuse_suite)
    # the case after the crash ran in the process that had imported while case 1 ran
    assert imports == [pids["1"], pids["2"]]


EACH_CASE_WAITS = """

@pytest.mark.parametrize("i", range(4))
def test_case(i):
    _note(str(i))
    if i < 3:  # the last one has no successor to wait for
        assert _successor_imported(), "no process was prepared while this case ran"
"""


def test_with_isolate_case_the_next_process_imports_while_a_case_runs(instep, reuse_suite):
    text = WAITING_TESTS.replace("import time\n", "import time\n\nimport pytest\n")
    write(reuse_suite, "test_pipeline.py", text + EACH_CASE_WAITS)
    result = instep(
        "run", "test_pipeline.py", "--profile", "fakedev", "--preimport", "none",
        "-n", "1", "--isolate", "case", "--standbys", "1", "--run", "pl",
    )  # fmt: skip
    outcomes = show(instep, "pl")["outcomes"]
    assert result.code == 0, [o["message"] for o in outcomes if o["status"] != "passed"]
    pids = _case_pids(reuse_suite)
    assert len(set(pids.values())) == 4  # a fresh process per case
    # every case process but the first collecting one was prepared ahead, and none was
    # prepared for nothing: one import per case
    assert sorted(_imports(reuse_suite)) == sorted(pids.values())


@pytest.mark.parametrize(
    ("data", "settings", "reason"),
    [
        ({"status": "passed"}, {"model": "fork"}, None),
        ({"status": "failed", "message": "assert 1 == 2"}, {"model": "fork"}, None),
        ({"status": "skipped"}, {"model": "fork", "isolate": "case"}, "--isolate case"),
        (
            {"status": "failed"},
            {"model": "shared"},
            "a failure (under the shared model a fresh process costs a fork)",
        ),
        (
            {"status": "error", "exception_chain": [{"type": "torch.OutOfMemoryError"}]},
            {"model": "fork"},
            "out of memory (OutOfMemoryError)",
        ),
        (
            {
                "status": "failed",
                "message": "outer",
                "exception_chain": [
                    {"type": "BackendCompilerFailed", "message": "outer"},
                    {"type": "RuntimeError", "message": "x\nCUDA error: misaligned address"},
                ],
            },
            {"model": "spawn", "fatal_errors": ["CUDA error"]},
            "a device error (CUDA error: misaligned address)",
        ),
    ],
)
def test_the_reuse_rule_on_outcome_records(data, settings, reason):
    # a device error quotes the line of the error that matched
    assert replace_reason(data, {"isolate": "worker", **settings}) == reason
