"""The runner survives what test cases do to their process, and records each of them right."""

from __future__ import annotations

import pytest
from tests.run.cases import COLLECTION_ERROR, RELIABILITY, by_case, show, write


@pytest.fixture(scope="module", params=["shared", "fork"])
def reliability_run(tmp_path_factory, request):
    """One run over every misbehaving case (plus a file that fails to collect), in the
    process model of the CPU profile (hosts import the tests) and in the one of device
    profiles (each case process imports its test module)."""
    import os

    from instep.cli import run as cli_run

    root = tmp_path_factory.mktemp("reliability")
    write(root, "test_misbehave.py", RELIABILITY)
    write(root, "test_broken_import.py", COLLECTION_ERROR)
    old = os.getcwd()
    os.chdir(root)
    try:
        code = cli_run(
            [
                "run",
                ".",
                "--preimport",
                "none",
                "--workers",
                "2",
                "--isolate",
                "worker",
                "--memory-limit",
                "1024",
                "--run",
                "rel",
                "--junit-xml",
                "junit.xml",
                "--process-model",
                request.param,
            ]
        )
    finally:
        os.chdir(old)
    return root, code


@pytest.fixture
def outcomes(reliability_run, instep, monkeypatch):
    root, _ = reliability_run
    monkeypatch.chdir(root)
    return by_case(show(instep, "rel"))


def test_run_completes_and_fails(reliability_run, outcomes):
    _, code = reliability_run
    assert code == 1
    assert outcomes["test_passes"]["status"] == "passed"
    assert outcomes["test_last_one_still_runs"]["status"] == "passed"
    assert len(outcomes) == 13  # 12 cases + the file that failed to collect


def test_segfault_is_a_crash_with_signal_stage_and_frames(outcomes):
    out = outcomes["test_segfault"]
    assert out["status"] == "crashed"
    assert out["signal"] == "SIGSEGV"
    assert out["stage"] == "call"
    assert "Segmentation fault" in out["stderr_tail"]
    functions = [f["function"] for f in out["exception_chain"][0]["frames"]]
    assert functions[-2:] == ["test_segfault", "string_at"]


def test_os_exit_is_a_crash_with_its_status(outcomes):
    out = outcomes["test_os_exit"]
    assert out["status"] == "crashed"
    assert out["exit_code"] == 3
    assert out["signal"] is None


@pytest.mark.parametrize("name", ["test_hang_in_c", "test_hang_in_python"])
def test_hangs_time_out_with_a_stack_dump(outcomes, name):
    out = outcomes[name]
    assert out["status"] == "timeout"
    assert out["stage"] == "call"
    assert out["evidence"]["timeout_s"] == 1.5
    assert 1.4 < out["duration"] < 10
    functions = [f["function"] for f in out["exception_chain"][0]["frames"]]
    assert functions[-1] == name  # where it hung, read from faulthandler's dump


def test_memory_past_the_limit_fails_that_case_only(outcomes):
    out = outcomes["test_memory_past_limit"]
    assert out["status"] == "failed"
    assert out["exception_type"] == "MemoryError"


def test_huge_output_is_kept_as_a_bounded_tail(outcomes):
    out = outcomes["test_prints_100_mb"]
    assert out["status"] == "passed"
    assert out["stdout_tail"].endswith("THE END\n")
    assert len(out["stdout_tail"]) < 70_000
    assert out["evidence"]["output_bytes"][0] > 100 * 1024 * 1024


def test_non_utf8_output_is_decoded_with_replacement(outcomes):
    out = outcomes["test_non_utf8_output"]
    assert out["status"] == "passed"
    assert "bad \ufffd\ufffd bytes" in out["stdout_tail"]
    assert "\ufffd( also bad" in out["stderr_tail"]


def test_failure_keeps_the_whole_exception_chain(outcomes):
    out = outcomes["test_fails_with_chain"]
    assert out["status"] == "failed"
    assert out["stage"] == "call"
    assert out["exception_type"] == "ValueError"
    assert out["message"] == "outer failure"
    chain = out["exception_chain"]
    assert [(c["type"], c["relation"]) for c in chain] == [
        ("ValueError", None),
        ("KeyError", "cause"),
    ]
    last = chain[0]["frames"][-1]
    assert last["function"] == "test_fails_with_chain"
    assert last["module"] == "test_misbehave"
    assert last["file"].endswith("test_misbehave.py")


def test_skip_and_xfail_reasons(outcomes):
    assert outcomes["test_skipped"]["status"] == "skipped"
    assert outcomes["test_skipped"]["skip_reason"] == "not on this backend"
    assert outcomes["test_xfailed"]["status"] == "xfailed"
    assert outcomes["test_xfailed"]["skip_reason"] == "known bug"


def test_collection_error_is_an_env_outcome(outcomes):
    out = outcomes["test_broken_import.py"]
    assert out["status"] == "error"
    assert out["layer"] == "env"
    assert out["stage"] == "collect"
    assert "this_module_does_not_exist_anywhere" in out["message"]


def test_junit_xml_lists_every_case(reliability_run):
    import xml.etree.ElementTree as ET

    root, _ = reliability_run
    suite = ET.parse(root / "junit.xml").getroot().find("testsuite")
    assert suite.get("tests") == "13"
    assert suite.get("failures") == "2"  # the chained failure and the MemoryError
    assert suite.get("skipped") == "2"
    errors = {c.get("name") for c in suite.iter("testcase") if c.find("error") is not None}
    assert {"test_segfault", "test_os_exit", "test_hang_in_c", "test_hang_in_python"} <= errors


def test_conftest_that_raises_is_an_env_outcome(instep, tmp_path):
    write(tmp_path, "suite/conftest.py", "raise RuntimeError('conftest exploded')\n")
    write(tmp_path, "suite/test_a.py", "def test_a():\n    pass\n")
    result = instep("run", "suite", "--preimport", "none", "--run", "c1")
    assert result.code == 1
    data = show(instep, "c1")
    [out] = data["outcomes"]
    assert out["case"] == "suite"
    assert out["status"] == "error"
    assert out["layer"] == "env"
    assert "conftest exploded" in out["longrepr"]


def test_a_case_that_kills_its_worker_host_is_a_crash_and_the_run_goes_on(instep, tmp_path):
    test = (
        "import os, signal\n\n"
        "def test_kills_host():\n"
        "    os.kill(os.getppid(), signal.SIGKILL)\n"
        "    signal.pause()\n\n"
        "def test_after_host_death():\n"
        "    pass\n"
    )
    write(tmp_path, "test_host.py", test)
    result = instep("run", "test_host.py", "--preimport", "none", "--run", "h", "--timeout", "20")
    assert result.code == 1
    out = by_case(show(instep, "h"))
    assert out["test_kills_host"]["status"] == "crashed"
    assert "worker host" in out["test_kills_host"]["message"]
    assert out["test_after_host_death"]["status"] == "passed"
