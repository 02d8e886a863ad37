"""``instep run --engine ray`` on a real two-node Ray cluster, into a real PostgreSQL store.

One run over a suite of plain pytest cases (passes, a failure, an ``os._exit`` crash, a
time-out) while the second node is removed mid-run: every planned case must end with
exactly one outcome, crashes and time-outs recorded as such, the finished outcomes of the
lost node kept, its unfinished cases run on the head. ``instep show`` and
``instep compare`` and ``instep report`` then read the Ray run back from PostgreSQL.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

PASSES = 20
SUITE = f"""
import os, time
import pytest

@pytest.mark.parametrize("i", range({PASSES}))
def test_pass(i):
    print("visible", os.environ.get("ASCEND_RT_VISIBLE_DEVICES"))
    time.sleep(0.25)

def test_fail():
    assert "npu" == "cpu"

def test_crash():
    os._exit(3)

@pytest.mark.timeout(1)
def test_timeout():
    time.sleep(60)
"""

# The NPU profile's device keys without its probes, which import torch_npu (seconds each).
FAKE_NPU_PROFILE = """
[profiles.fakenpu]
extends = "base"
device_type = "npu"
visible_devices_env = "ASCEND_RT_VISIBLE_DEVICES"
device_resource = "NPU"
default_isolation = "case"
"""


def _node_outcomes(url: str, run_name: str) -> list[dict]:
    from instep.store import Store, outcome_dict

    store = Store(url)
    try:
        run = store.get_run(run_name)
        return [outcome_dict(o) for o in store.outcomes(run.id, final_only=False)]
    finally:
        store.close()


class _NodeKiller(threading.Thread):
    """Removes the second node as soon as the store holds one outcome it produced."""

    def __init__(self, nodes, url: str, run_name: str) -> None:
        super().__init__(daemon=True)
        self.nodes, self.url, self.run_name = nodes, url, run_name
        self.stored_at_kill: int | None = None
        self.killed_at: datetime | None = None
        self.error: BaseException | None = None

    def run(self) -> None:
        doomed = self.nodes.doomed.node_id
        deadline = time.monotonic() + 120
        try:
            while time.monotonic() < deadline:
                try:
                    outcomes = _node_outcomes(self.url, self.run_name)
                except Exception:  # the run is not created yet
                    outcomes = []
                if any(_node_id(o) == doomed for o in outcomes):
                    self.stored_at_kill = len(outcomes)
                    self.nodes.cluster.remove_node(self.nodes.doomed, allow_graceful=False)
                    self.killed_at = datetime.now(timezone.utc).replace(tzinfo=None)
                    return
                time.sleep(0.1)
        except BaseException as exc:  # reported by the test
            self.error = exc


def _node_id(outcome: dict) -> str | None:
    return ((outcome.get("evidence") or {}).get("node") or {}).get("node_id")


def _host_processes_in(root: Path) -> list[int]:
    """Worker hosts (and their case processes) still running in the suite's directory."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if Path(os.readlink(entry / "cwd")) == root:
                cmdline = (entry / "cmdline").read_bytes()
                if b"instep.run.worker_host" in cmdline:
                    pids.append(int(entry.name))
        except OSError:
            continue
    return pids


@pytest.fixture(scope="module")
def ray_run(ray_cluster, postgres_url, tmp_path_factory):
    from instep.cli import run as cli_run

    root = tmp_path_factory.mktemp("scale_out").resolve()
    (root / "test_scale.py").write_text(SUITE)
    (root / "instep.toml").write_text(FAKE_NPU_PROFILE)
    killer = _NodeKiller(ray_cluster, postgres_url, "scale")
    killer.start()
    old = os.getcwd()
    os.chdir(root)
    began = time.monotonic()
    try:
        code = cli_run(
            [
                "run",
                "test_scale.py",
                "--engine",
                "ray",
                "--address",
                ray_cluster.address,
                "--profile",
                "fakenpu",
                "--preimport",
                "none",
                "--db",
                postgres_url,
                "--run",
                "scale",
                "--reruns",
                "1",
            ]
        )
    finally:
        os.chdir(old)
    wall = time.monotonic() - began
    killer.join(timeout=5)
    return {"code": code, "killer": killer, "root": root, "wall": wall}


def test_every_case_has_one_outcome_after_a_node_is_lost(ray_run, ray_cluster, postgres_url):
    killer = ray_run["killer"]
    assert killer.error is None
    planned = PASSES + 3
    assert killer.stored_at_kill is not None, "the second node never ran a case"
    assert killer.stored_at_kill < planned, "the node was removed when the run had finished"
    assert ray_run["code"] == 1  # a failure, a crash and a time-out

    every = _node_outcomes(postgres_url, "scale")
    assert len({(o["case"], o["attempt"]) for o in every}) == len(every)  # no duplicate
    outcomes = [o for o in every if o["final"]]
    per_case = Counter(o["case"] for o in outcomes)
    assert len(per_case) == planned
    assert set(per_case.values()) == {1}  # one final outcome each: nothing lost
    attempts = {o["case"].split("::")[1]: [] for o in every}
    for o in every:
        attempts[o["case"].split("::")[1]].append((o["attempt"], o["status"]))
    assert sorted(attempts.pop("test_fail")) == [(1, "failed"), (2, "failed")]  # --reruns 1
    assert sorted(attempts.pop("test_crash")) == [(1, "crashed"), (2, "crashed")]
    assert sorted(attempts.pop("test_timeout")) == [(1, "timeout"), (2, "timeout")]
    assert all(runs == [(1, "passed")] for runs in attempts.values())

    by_id = {o["case"]: o for o in outcomes}
    crash = by_id["test_scale.py::test_crash"]  # the final attempt
    assert crash["exit_code"] == 3 and crash["stage"] == "call"
    timeout = by_id["test_scale.py::test_timeout"]
    assert timeout["message"].startswith("Timed out after 1s")

    doomed, head = ray_cluster.doomed.node_id, ray_cluster.head.node_id
    nodes = Counter(_node_id(o) for o in every)
    assert set(nodes) <= {doomed, head}
    assert nodes[doomed] >= 1  # what the lost node finished stayed in the store
    killed = killer.killed_at.isoformat(timespec="seconds") + "Z"
    started = [(o["started_at"], _node_id(o)) for o in every]
    assert all(at <= killed for at, node in started if node == doomed)
    assert any(at > killed for at, node in started if node == head)  # the rest


def test_each_case_ran_pinned_to_the_npu_ray_granted(ray_run, postgres_url):
    passes = [o for o in _node_outcomes(postgres_url, "scale") if "test_pass" in o["case"]]
    for outcome in passes:
        node = outcome["evidence"]["node"]
        assert node["resource"] == "NPU"
        assert outcome["device"] == ",".join(node["device_ids"])
        assert f"visible {outcome['device']}\n" in outcome["stdout_tail"]
    slots = {(o["evidence"]["node"]["node_id"], o["device"]) for o in passes}
    assert len(slots) >= 2  # the head's NPU and at least one of the second node's


def test_no_worker_host_outlives_the_run(ray_run):
    deadline = time.monotonic() + 20  # Ray ends the job's workers shortly after the driver
    while _host_processes_in(ray_run["root"]) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert _host_processes_in(ray_run["root"]) == []


def test_show_and_compare_read_the_ray_run_from_postgres(ray_run, postgres_url, instep, tmp_path):
    (tmp_path / "test_scale.py").write_text(SUITE)
    (tmp_path / "instep.toml").write_text(FAKE_NPU_PROFILE)  # compare reads run profiles
    base = instep(
        "run",
        "test_scale.py",
        "-k",
        "test_fail or test_crash",
        "--profile",
        "cpu",
        "--preimport",
        "none",
        "--db",
        postgres_url,
        "--run",
        "local-base",
    )
    assert base.code == 1, base.err
    shown = instep("show", "scale", "--db", postgres_url, "--format", "json")
    assert shown.code == 0, shown.err
    data = json.loads(shown.out)
    assert data["run"]["status"] == "finished"
    assert data["run"]["version_matrix"]["ray_node"]  # read on a node of the cluster
    assert len(data["outcomes"]) == PASSES + 3
    compared = instep("compare", "local-base", "scale", "--db", postgres_url, "--format", "json")
    assert compared.code == 1, compared.err  # the time-out is a new failure
    cases = json.loads(compared.out)["cases"]
    new = {m["case"] for m in cases["new"]}
    still = {m["case"] for m in cases["still_failing"]}
    assert new == {"test_scale.py::test_timeout"}
    assert still == {"test_scale.py::test_fail", "test_scale.py::test_crash"}

    # the dashboard and the weekly summary read the PostgreSQL store like a SQLite file
    weekly = instep("report", "scale", "--db", postgres_url, "--format", "md")
    assert weekly.code == 0, weekly.err
    assert "| time-outs | 1 |" in weekly.out
    assert "| crashes (signal) | 1 |" in weekly.out
    html = instep("report", "scale", "--db", postgres_url, "--out", str(tmp_path / "dash"))
    assert html.code == 0, html.err
    pages = {p.name for p in (tmp_path / "dash" / "cases").iterdir()}
    assert len(pages) == 3  # the failure, the crash and the time-out


def test_a_cluster_without_the_resource_is_one_clear_error(ray_cluster):
    from instep.errors import InstepError
    from instep.run.ray_engine import RayPool
    from instep.run.worker_pool import HostConfig

    config = HostConfig(paths=["x"], k=None, isolate="case", timeout=5.0, preimport=[])
    pool = RayPool(config, address=ray_cluster.address, resource="TPU_V9", capacity_wait_s=0.5)
    with pytest.raises(InstepError, match="offers no 'TPU_V9' resource"):
        pool.start()
    import ray

    assert not ray.is_initialized()  # the failed start let go of the cluster
