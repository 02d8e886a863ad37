"""Balancing by stored durations, chunk sizes, and how many standbys a host keeps."""

from __future__ import annotations

from tests.run.cases import show, write

from instep.run.balancing import MAX_STANDBYS, longest_first, standbys_per_host
from instep.run.worker_pool import WorkItem, WorkQueue


def test_without_durations_the_collection_order_stays():
    cases = [("a.py::x", "a.py"), ("a.py::y", "a.py"), ("b.py::z", "b.py")]
    assert longest_first(cases, {}) == [(n, f, None) for n, f in cases]


def test_longest_first_within_files_and_files_by_their_total():
    cases = [
        ("a.py::short", "a.py"),
        ("a.py::long", "a.py"),
        ("b.py::mid", "b.py"),
        ("b.py::new", "b.py"),  # never ran: the median of the known (2.5) stands in
    ]
    durations = {"a.py::short": 1.0, "a.py::long": 3.0, "b.py::mid": 2.5}
    assert longest_first(cases, durations) == [
        ("b.py::mid", "b.py", 2.5),  # b.py: 5.0 s in all, a.py: 4.0 s
        ("b.py::new", "b.py", 2.5),  # a tie keeps the collection's order
        ("a.py::long", "a.py", 3.0),
        ("a.py::short", "a.py", 1.0),
    ]


def test_chunks_shrink_with_the_estimated_time_left():
    queue = WorkQueue()
    queue.push([WorkItem(f"t.py::c{i}", "t.py", estimate=1.0) for i in range(16)])
    # 16 s left over 2 hosts: a chunk is a 1/8 share of what is left, 2 s at first
    sizes = []
    while queue:
        sizes.append(len(queue.pop_chunk(hosts=2, max_size=32)))
    assert sizes[0] == 2 and sizes[-1] == 1 and sum(sizes) == 16
    assert sizes == sorted(sizes, reverse=True)
    # without estimates: a share of the count, never more than max_size
    queue.push([WorkItem(f"t.py::n{i}", "t.py") for i in range(400)])
    assert len(queue.pop_chunk(hosts=2, max_size=32)) == 32
    assert len(queue.pop_chunk(hosts=2, max_size=1)) == 1


def test_a_host_gets_cases_of_the_file_its_standbys_prepared():
    queue = WorkQueue()
    queue.push([WorkItem("a.py::1", "a.py"), WorkItem("b.py::1", "b.py")])
    queue.push([WorkItem("a.py::2", "a.py")])
    assert [i.nodeid for i in queue.pop_chunk(1, 1, prefer="b.py")] == ["b.py::1"]
    assert [i.nodeid for i in queue.pop_chunk(1, 1, prefer="b.py")] == ["a.py::1"]
    queue.push([WorkItem("b.py::retry", "b.py")], front=True)  # handed back: first
    assert [i.nodeid for i in queue.pop_chunk(1, 1)] == ["b.py::retry"]
    assert [i.nodeid for i in queue] == ["a.py::2"] and len(queue) == 1


def test_standbys_per_host():
    # a replacement under shared is a fork: no standby
    assert standbys_per_host("case", "shared", 2, cpus=64) == 0
    # --isolate case: enough preparing processes to fill the CPUs, at least one
    assert standbys_per_host("case", "fork", 2, cpus=2) == 1
    assert standbys_per_host("case", "fork", 12, cpus=16) == 2
    assert standbys_per_host("case", "spawn", 1, cpus=64) == MAX_STANDBYS
    # --isolate worker: one where a CPU is idle
    assert standbys_per_host("worker", "fork", 2, cpus=2) == 0
    assert standbys_per_host("worker", "fork", 12, cpus=16) == 1


SLEEPS = """
import os
import time

import pytest


@pytest.mark.parametrize("s", [0.05, 0.6, 0.2, 0.4])
def test_sleep(s):
    with open(os.path.join(os.path.dirname(__file__), "order.txt"), "a") as fh:
        fh.write(f"{s}\\n")
    time.sleep(s)
"""


def test_a_second_run_hands_out_the_longest_cases_first(instep, tmp_path):
    write(tmp_path, "test_sleeps.py", SLEEPS)
    order = {}
    for name in ("first", "second"):
        result = instep("run", "test_sleeps.py", "--preimport", "none", "-n", "1", "--run", name)
        assert result.code == 0, result.err
        order[name] = (tmp_path / "order.txt").read_text().split()
        (tmp_path / "order.txt").unlink()
    assert order["first"] == ["0.05", "0.6", "0.2", "0.4"]  # the collection's order
    assert order["second"] == ["0.6", "0.4", "0.2", "0.05"]  # longest first
    assert len(show(instep, "second")["outcomes"]) == 4
