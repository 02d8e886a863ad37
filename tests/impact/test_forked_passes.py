"""Join passes in forked children (``join/forked_passes.py``): the forked path, the
inline one (``--jobs 1``) and the fallback after a child died give the same couplings
(the runner's order of adds: ``test_pass_registry.py``)."""

from __future__ import annotations

import json
import logging
import os

import pytest

from instep.impact.join import forked_passes
from instep.impact.join.hook_names import HookNames

from .test_hook_names import hook_commit

fork_only = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")


def _pid_and(value):
    return lambda: (os.getpid(), value)


@fork_only
def test_each_pass_runs_in_a_child_and_gives_its_result():
    got = forked_passes.start(2, {"a": _pid_and([1, 2]), "b": _pid_and({"x": 3})})
    (pid_a, a), (pid_b, b) = got["a"](), got["b"]()
    assert (a, b) == ([1, 2], {"x": 3})
    assert os.getpid() not in (pid_a, pid_b)


@fork_only
def test_no_more_children_than_the_cpus_the_parent_leaves():
    """jobs - 1 children at most (issue #32: each child holds the parent's pages it
    touched; one more than the CPUs only waits); a child runs its passes in turn."""
    work = {name: _pid_and(name) for name in ("a", "b", "c")}
    for jobs, most in ((2, 1), (3, 2)):
        got = {name: result() for name, result in forked_passes.start(jobs, work).items()}
        assert {name: value for name, (_, value) in got.items()} == {n: n for n in work}
        pids = {pid for pid, _ in got.values()}
        assert os.getpid() not in pids and 1 <= len(pids) <= most


def test_with_one_job_nothing_is_forked():
    got = forked_passes.start(1, {"a": _pid_and("done")})
    assert got["a"]() == (os.getpid(), "done")


@fork_only
def test_a_child_that_dies_is_replaced_by_the_work_done_here(caplog):
    parent = os.getpid()

    def dies_in_a_child():
        if os.getpid() != parent:
            os._exit(1)  # as the kernel's OOM killer would
        return "done here"

    with caplog.at_level(logging.WARNING, logger=forked_passes.__name__):
        got = forked_passes.start(2, {"hook names": dies_in_a_child})
        assert got["hook names"]() == "done here"
    assert "the hook names child died" in caplog.text


def _hook_report(root, jobs: int, monkeypatch, dies: bool = False) -> tuple[dict, set[int]]:
    """The report of test_hook_names' commit, and the pids that ran ``HookNames.find``
    (written to files: a child's memory does not come back)."""
    find = HookNames.find
    parent = os.getpid()

    def recorded(self):
        (root / f"find-{os.getpid()}").write_text("")
        if dies and os.getpid() != parent:
            os._exit(1)
        return find(self)

    monkeypatch.setattr(HookNames, "find", recorded)
    doc = hook_commit(root, ("--jobs", str(jobs)))
    monkeypatch.undo()
    pids = {int(p.name.split("-")[1]) for p in root.glob("find-*")}
    doc.pop("generated_at")
    doc["stats"].pop("timings_s")
    return doc, pids


@fork_only
def test_forked_inline_and_fallback_hook_passes_give_the_same_report(tmp_path, monkeypatch):
    inline, inline_pids = _hook_report(tmp_path / "inline", 1, monkeypatch)
    forked, forked_pids = _hook_report(tmp_path / "forked", 2, monkeypatch)
    fallback, fallback_pids = _hook_report(tmp_path / "fallback", 2, monkeypatch, dies=True)
    assert inline_pids == {os.getpid()}
    assert os.getpid() not in forked_pids and len(forked_pids) == 1
    assert os.getpid() in fallback_pids and len(fallback_pids) == 2  # the child, then here
    kinds = [c["kind"] for u in inline["units"] for c in u["couplings"]]
    assert kinds.count("hook_name") >= 4 and inline["stats"]["hook_name_couplings"] >= 4
    # the report says the child died (a log warning); nothing else differs. The children
    # share one pool: a child still at work when another dies is lost with it and its
    # pass runs here too (fork detection, when it had not ended first)
    said = [w for w in fallback.pop("warnings") if w.endswith("died; running it in this process")]
    died = "the hook names child died; running it in this process"
    assert died in said
    assert set(said) <= {died, "the fork detection child died; running it in this process"}
    assert inline.pop("warnings") == []
    assert forked.pop("warnings") == []
    # the paths of the temporary trees apart, the same JSON
    for doc, root in ((forked, "forked"), (fallback, "fallback")):
        text = json.dumps(doc, sort_keys=True).replace(str(tmp_path / root), "ROOT")
        assert text == json.dumps(inline, sort_keys=True).replace(str(tmp_path / "inline"), "ROOT")


@fork_only
def test_a_child_reads_a_wheel_through_a_handle_of_its_own(tmp_path):
    from .test_sources_tree_wheel import WheelSnapshot, _wheel

    files = {"pkg/a.py": b"A = 1\n" * 1000, "pkg/b.py": b"B = 2\n" * 1000}
    snap = WheelSnapshot(_wheel(tmp_path / "p.whl", files))
    assert snap.read("pkg/a.py") == b"A = 1\n" * 1000
    mine = snap._zip.fp.fileno()

    def read_in_child():
        # b.py was not read before the fork: the child decompresses it itself
        return snap.read("pkg/b.py"), snap._zip.fp.fileno()

    data, theirs = forked_passes.start(2, {"read": read_in_child})["read"]()
    assert data == b"B = 2\n" * 1000
    assert theirs != mine  # the shared file offset is left to the parent
    assert snap.read("pkg/b.py") == data and snap._zip.fp.fileno() == mine


@fork_only
def test_a_child_reads_git_objects_through_a_cat_file_of_its_own(tmp_path):
    import subprocess

    from instep.impact.upstream.sources import GitRepo

    from .gitrepo import RepoBuilder

    b = RepoBuilder(tmp_path / "up")
    b.write("torch/a.py", "A = 1\n")
    b.commit("a")
    blob = subprocess.run(
        ["git", "-C", str(b.path), "rev-parse", "HEAD:torch/a.py"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    with GitRepo(b.path) as repo:
        assert repo.read_object(blob) == b"A = 1\n"
        mine = repo._cat.proc.pid

        def read_in_child():
            return repo.read_object(blob), repo._cat.proc.pid

        data, theirs = forked_passes.start(2, {"read": read_in_child})["read"]()
        assert (data, theirs != mine) == (b"A = 1\n", True)
        # the parent's process was neither used nor stopped by the child
        assert repo.read_object(blob) == b"A = 1\n" and repo._cat.proc.pid == mine
        assert repo._cat.proc.poll() is None
