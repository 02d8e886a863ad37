"""A work item's environment is set in its case's process for that case only.

Real worker hosts (fork servers) over a real test file, in both isolation modes: with
``--isolate worker`` one child runs all three cases, so the first case's variable must
be gone when the second runs and the third's own value must be seen.
"""

from __future__ import annotations

import pytest

from instep.run.worker_pool import HostConfig, WorkerPool, WorkItem

SUITE = """
import os


def test_a():
    print("SEEN", os.environ.get("INSTEP_CASE_ENV"), os.getpid())


def test_b():
    print("SEEN", os.environ.get("INSTEP_CASE_ENV"), os.getpid())


def test_c():
    print("SEEN", os.environ.get("INSTEP_CASE_ENV"), os.getpid())
"""


@pytest.mark.parametrize("isolate", ["case", "worker"])
def test_each_case_sees_only_its_own_environment(tmp_path, isolate):
    (tmp_path / "test_env.py").write_text(SUITE)
    path = str(tmp_path / "test_env.py")
    config = HostConfig(paths=[path], k=None, isolate=isolate, timeout=60.0, preimport=[])
    items = [
        WorkItem(f"{path}::test_a", path, env={"INSTEP_CASE_ENV": "first"}),
        WorkItem(f"{path}::test_b", path),
        WorkItem(f"{path}::test_c", path, env={"INSTEP_CASE_ENV": "third"}),
    ]
    seen: dict[str, tuple[str, str]] = {}
    with WorkerPool(config, 1) as pool:
        pool.start()
        submitted = False
        for event in pool.events():
            if event.kind == "collected" and not submitted:
                ids = {c["nodeid"].rsplit("::", 1)[1]: c["nodeid"] for c in event.data["cases"]}
                pool.submit(
                    [WorkItem(ids[i.nodeid.rsplit("::", 1)[1]], i.file, env=i.env) for i in items]
                )
                submitted = True
            elif event.kind == "outcome" and event.item is not None:
                assert event.data["status"] == "passed", event.data
                line = next(x for x in event.data["stdout_tail"].splitlines() if "SEEN" in x)
                _, value, pid = line.split()
                seen[event.item.nodeid.rsplit("::", 1)[1]] = (value, pid)
    assert {k: v for k, (v, _) in seen.items()} == {
        "test_a": "first",
        "test_b": "None",
        "test_c": "third",
    }
    pids = {pid for _, pid in seen.values()}
    assert len(pids) == (3 if isolate == "case" else 1)
