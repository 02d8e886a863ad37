"""End to end: the runner classifies as outcomes arrive; the fault-injection self-test.

The self-test compiles for real on CPU (one compile per layer, 13 cases, ~40 s warm with
two workers): marked slow, sharing one Inductor cache dir for the session.
"""

from __future__ import annotations

import importlib.util
import json

import pytest

from instep.profiles import load_profile

FAILURES = """
def test_registration():
    device_op_overrides_dict = {}
    device = "cpu"
    return device_op_overrides_dict[device]

def test_acl_dtype():
    raise RuntimeError(
        "AclNN_Parameter_Error(EZ1001): Tensor selfRef expected dtype is DT_FLOAT but found"
        " DT_FLOAT16."
    )

def test_passes():
    pass
"""


def test_runner_classifies_each_failure_before_storing(instep, tmp_path):
    (tmp_path / "test_npu_like.py").write_text(FAILURES)
    (tmp_path / "test_broken.py").write_text("import expecttest_not_installed_here\n")
    db = str(tmp_path / "s.db")
    args = ["run", "test_npu_like.py", "test_broken.py", "--profile", "npu", "--preimport", "none"]
    args += ["--db", db]
    result = instep(*args, "--run", "r1", "--isolate", "worker")
    assert result.code == 1, result.err
    shown = json.loads(instep("show", "r1", "--db", db, "--format", "json").out)
    out = {o["case"].rsplit("::", 1)[-1]: o for o in shown["outcomes"]}
    reg = out["test_registration"]
    assert (reg["layer"], reg["category"]) == (
        "registration",
        "registration.device_op_overrides_cpu",
    )
    assert reg["signature"] == "KeyError: 'cpu'" and reg["confidence"] > 0
    assert reg["evidence"]["triage"]["rule"]["reference"] == "seed 000 6.2"
    acl = out["test_acl_dtype"]
    assert (acl["layer"], acl["category"]) == ("runtime", "runtime.acl_param_dtype")
    assert out["test_passes"]["layer"] is None and out["test_passes"]["signature"] is None
    broken = next(o for o in shown["outcomes"] if o["case"].startswith("test_broken.py"))
    assert (broken["layer"], broken["category"]) == ("env", "env.collection_error")
    assert "No module named" in broken["signature"]


def test_selftest_rejects_unknown_cases(instep):
    result = instep("selftest", "--only", "test_nothing")
    assert result.code == 2 and "not a self-test case" in result.err


@pytest.fixture(scope="session")
def inductor_cache(tmp_path_factory):
    return tmp_path_factory.mktemp("inductor-cache")


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch not installed")
def test_every_injected_fault_lands_in_its_layer(inductor_cache):
    from instep.triage.selftest import run_selftest
    from instep.triage.selftest.matrix import EXPECTED

    result = run_selftest(load_profile("cpu"), workers=2, inductor_cache_dir=inductor_cache)
    wrong = [(r.case, r.expected, r.layer, r.status) for r in result.rows if not r.ok]
    assert wrong == []
    assert result.accuracy == 1.0 and len(result.rows) == len(EXPECTED)
    rows = {r.case: r for r in result.rows}
    assert rows["test_crash"].status == "crashed"
    assert rows["test_hang"].status == "timeout"
    assert rows["test_missing_lowering"].category == "lowering.missing_operator"
    assert rows["test_wrong_numerics"].category == "numerics.index_alias"
