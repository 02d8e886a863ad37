"""A Ray task's time limit counts from when it starts running, not from its submission.

On a busy cluster a task waits in Ray's queue until another job gives the resource back.
Here a real one-node Ray cluster has one unit of a resource, and another job's task holds
it for longer than the run's tasks may take: the run must wait and then pass, not record
its cases as crashed (the task limits are shrunk to seconds so that the test is short).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

BLOCK_S = 14.0  # how long the other job holds the only unit of the resource
SUITE = "def test_a():\n    pass\n\n\ndef test_b():\n    pass\n"
PROFILE = """
[profiles.slot]
extends = "base"
device_type = "npu"
visible_devices_env = "ASCEND_RT_VISIBLE_DEVICES"
device_resource = "SLOT"
default_isolation = "case"
"""


@pytest.fixture(scope="module")
def one_slot():
    ray = pytest.importorskip("ray")
    from ray.cluster_utils import Cluster

    cluster = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 2, "resources": {"SLOT": 1}, "include_dashboard": False},
    )
    cluster.wait_for_nodes()
    yield cluster
    if ray.is_initialized():
        ray.shutdown()
    cluster.shutdown()


def _run_on_slot(cluster, root: Path, *args: str) -> int:
    """``instep run ARGS --engine ray`` on the one-slot cluster, from ``root``, into
    ``root/s.db``."""
    from instep.cli import run as cli_run

    old = os.getcwd()
    os.chdir(root)
    try:
        return cli_run(
            [
                "run",
                *args,
                "--engine",
                "ray",
                "--address",
                cluster.address,
                "--profile",
                "slot",
                "--preimport",
                "none",
                "--db",
                str(root / "s.db"),
            ]
        )
    finally:
        os.chdir(old)


def test_tasks_queued_behind_another_job_are_not_timed_out(one_slot, tmp_path, monkeypatch, caplog):
    import ray

    from instep.run import ray_engine

    # a task may take 6 s (plus its cases' limits) once it runs: enough to start a host
    # and collect, far less than the other job holds the resource
    monkeypatch.setattr(ray_engine, "STARTUP_ALLOWANCE_S", 6.0)
    monkeypatch.setattr(ray_engine, "HOST_GRACE_S", 0.0)
    (tmp_path / "test_q.py").write_text(SUITE)
    (tmp_path / "instep.toml").write_text(PROFILE)
    ray.init(address=one_slot.address, namespace="other-job", log_to_driver=False)

    def hold_slot(flag: str, seconds: float) -> float:  # local: Ray ships it by value
        Path(flag).touch()
        time.sleep(seconds)
        return seconds

    flag = tmp_path / "holding"
    other_job = (
        ray.remote(hold_slot).options(num_cpus=0, resources={"SLOT": 1}).remote(str(flag), BLOCK_S)
    )
    deadline = time.monotonic() + 60
    while not flag.exists():
        assert time.monotonic() < deadline, "the other job never got the resource"
        time.sleep(0.05)
    held_from = time.monotonic()
    code = _run_on_slot(one_slot, tmp_path, "test_q.py", "--timeout", "1", "--run", "queued")
    waited = time.monotonic() - held_from
    cancelled = [r.getMessage() for r in caplog.records if "past its time limit" in r.getMessage()]
    assert cancelled == [], "a task queued behind the other job was cancelled"
    assert ray.get(other_job) == BLOCK_S
    assert waited >= BLOCK_S - 1.0, "the run did not have to wait: the test proves nothing"
    from instep.store import Store

    store = Store(str(tmp_path / "s.db"))
    try:
        rows = store.outcome_rows(store.get_run("queued").id, final_only=False)
    finally:
        store.close()
    assert code == 0, json.dumps(rows, default=str)[:2000]
    assert sorted((r["case"].rsplit("::", 1)[1], r["status"]) for r in rows) == [
        ("test_a", "passed"),
        ("test_b", "passed"),
    ]


def test_bisect_runs_the_ladder_on_the_cluster(one_slot, tmp_path):
    """``--engine ray --bisect``: the re-runs go where the resource is, not to the driver."""
    from instep.store import Store

    (tmp_path / "test_f.py").write_text("def test_fails():\n    assert 'npu' == 'cpu'\n")
    (tmp_path / "instep.toml").write_text(PROFILE)
    code = _run_on_slot(one_slot, tmp_path, "test_f.py", "--run", "b", "--bisect")
    assert code == 1
    store = Store(str(tmp_path / "s.db"))
    try:
        (row,) = store.outcome_rows(store.get_run("b").id)
    finally:
        store.close()
    ladder = row["evidence"]["ladder"]
    eager = ladder["rungs"]["eager"]
    # the same failure on the first rung, run by a Ray task (which names its node)
    assert (eager["status"], ladder["first_rung"]) == ("failed", "eager")
    assert eager["node"] == row["evidence"]["node"]["host"]
