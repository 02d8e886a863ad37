"""Per-commit change units from real git repositories built in tmp dirs."""

from __future__ import annotations

import logging
import subprocess

import pytest

from instep.errors import BadInput, MissingDependency, MissingInput
from instep.impact.upstream.sources import (
    GitRepo,
    GitSnapshot,
    TreeSnapshot,
    diff_snapshots,
    iter_commits,
    mark_reverts,
    read_message,
)
from instep.impact.upstream.sources import git_repo as git_repo_module

from .gitrepo import RepoBuilder

LOWERING_V1 = "def expand(x, sizes):\n    return x.expand(sizes)\n"
LOWERING_V2 = "def expand(x, sizes, *, implicit=False):\n    return x.expand(sizes)\n"
# Big enough for git's rename detection to pair the move with its small edit.
OLD_NAME = "".join(f"def helper_{i}(a, b):\n    return a + b * {i}\n\n" for i in range(40))


@pytest.fixture
def warnings_logged(caplog, monkeypatch):
    """``caplog`` for the sources' warnings, also after a CLI test in this process has
    routed the ``instep`` logger to its own handler (``propagate = False``)."""
    monkeypatch.setattr(logging.getLogger("instep"), "propagate", True)
    caplog.set_level(logging.WARNING, logger="instep.impact.upstream.sources")
    return caplog


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    """v1 .. v2: a PR with a test, a rename, add/remove with a non-Python file, a revert."""
    b = RepoBuilder(tmp_path_factory.mktemp("upstream"))
    b.write("torch/_inductor/lowering.py", LOWERING_V1)
    b.write("torch/old_name.py", OLD_NAME)
    b.write("torch/gone.py", "GONE = 1\n")
    b.write("torch/stays.py", OLD_NAME.replace("helper", "stay"))
    b.write("README.md", "upstream\n")
    shas = {"base": b.commit("Initial import")}
    b.tag("v1")
    b.write("torch/_inductor/lowering.py", LOWERING_V2)
    b.write("test/inductor/test_expand.py", "def test_expand():\n    pass\n")
    b.write("README.md", "upstream, now with implicit\n")
    shas["pr101"] = b.commit(
        "[inductor] Add implicit to expand (#101)\n\nLonger description.\n\n"
        "Pull Request resolved: https://github.com/pytorch/pytorch/pull/101\n"
        "Approved by: https://github.com/someone"
    )
    b.move("torch/old_name.py", "torch/new_name.py")
    b.write("torch/new_name.py", OLD_NAME + "def extra():\n    pass\n")
    shas["pr102"] = b.commit("Move old_name to new_name (#102)")
    b.write("torch/added.py", "ADDED = True\n")
    b.remove("torch/gone.py")
    b.write("docs/notes.txt", "not python\n")
    b.move("torch/stays.py", "torch/sub/stays.py")  # a pure rename
    shas["pr103"] = b.commit("Add added.py, drop gone.py (#103)")
    shas["revert"] = b.revert(
        shas["pr101"],
        'Revert "[inductor] Add implicit to expand (#101)"\n\n'
        f"This reverts commit {shas['pr101']}.\n\n"
        "Reverted https://github.com/pytorch/pytorch/pull/101 on behalf of "
        "https://github.com/someone due to breaks trunk",
    )
    b.tag("v2")
    return b, shas


def test_one_unit_per_commit_oldest_first_with_pr_numbers(history):
    b, shas = history
    with GitRepo(b.path) as repo:
        units = list(iter_commits(repo, "v1..v2"))
    assert [u.sha for u in units] == [shas["pr101"], shas["pr102"], shas["pr103"], shas["revert"]]
    assert [u.pr for u in units] == [101, 102, 103, None]
    assert units[0].subject == "[inductor] Add implicit to expand (#101)"
    assert "Longer description." in units[0].body
    assert units[0].author == "Test Author <author@example.invalid>"
    assert units[0].date.startswith("2026-01-01T")
    assert units[0].parents == [shas["base"]]


def test_files_carry_old_and_new_python_content_only(history):
    b, _ = history
    with GitRepo(b.path) as repo:
        pr101, pr102, pr103, _ = iter_commits(repo, "v1..v2")
    # The PR touches lowering.py, a new test and README.md: README is not Python.
    assert sorted(f.path for f in pr101.files) == [
        "test/inductor/test_expand.py",
        "torch/_inductor/lowering.py",
    ]
    lowering = next(f for f in pr101.files if f.path.endswith("lowering.py"))
    assert (lowering.old, lowering.new, lowering.old_path) == (
        LOWERING_V1.encode(),
        LOWERING_V2.encode(),
        None,
    )
    assert pr101.test_files == ["test/inductor/test_expand.py"]
    # A rename with an edit is one change that knows where it came from.
    (moved,) = pr102.files
    assert (moved.path, moved.old_path, moved.status) == (
        "torch/new_name.py",
        "torch/old_name.py",
        "renamed",
    )
    assert moved.old == OLD_NAME.encode()
    assert moved.new.endswith(b"def extra():\n    pass\n")
    # Added and removed files; the non-Python file is not a file change.
    by_path = {f.path: f for f in pr103.files}
    assert set(by_path) == {"torch/added.py", "torch/gone.py", "torch/sub/stays.py"}
    stays = by_path["torch/sub/stays.py"]
    assert (stays.old_path, stays.status) == ("torch/stays.py", "renamed")
    assert stays.old == stays.new == OLD_NAME.replace("helper", "stay").encode()
    assert by_path["torch/added.py"].old is None
    assert by_path["torch/added.py"].new == b"ADDED = True\n"
    assert by_path["torch/gone.py"].old == b"GONE = 1\n"
    assert by_path["torch/gone.py"].new is None
    assert pr103.test_files == []


def test_pytorch_bot_revert_is_marked_on_both_sides(history):
    b, shas = history
    with GitRepo(b.path) as repo:
        units = list(iter_commits(repo, "v1..v2"))
    revert = units[-1]
    assert (revert.reverts_sha, revert.reverts_pr) == (shas["pr101"], 101)
    assert revert.reverts_subject == "[inductor] Add implicit to expand (#101)"
    assert all(u.reverted_by is None for u in units)
    mark_reverts(units)
    assert units[0].reverted_by == shas["revert"]
    assert [u.reverted_by for u in units[1:]] == [None, None, None]
    # The revert's files undo the PR's change.
    lowering = next(f for f in revert.files if f.path.endswith("lowering.py"))
    assert (lowering.old, lowering.new) == (LOWERING_V2.encode(), LOWERING_V1.encode())


def test_revert_found_by_pr_number_prefers_latest_unreverted_land(tmp_path):
    """PyTorch relands under the same PR number; each revert pairs with the land before it."""
    b = RepoBuilder(tmp_path / "r")
    b.write("torch/a.py", "A = 0\n")
    start = b.commit("init")
    b.write("torch/a.py", "A = 1\n")
    land = b.commit("Make A one (#200)")
    b.write("torch/a.py", "A = 0\n")
    revert1 = b.commit(
        'Revert "Make A one (#200)"\n\nReverted https://github.com/pytorch/pytorch/pull/200 '
        "on behalf of https://github.com/x due to breaking"
    )
    b.write("torch/a.py", "A = 1\n")
    reland = b.commit("Make A one (#200)")
    b.write("torch/a.py", "A = 0\n")
    revert2 = b.commit('Revert "Make A one (#200)"')  # subject only: found by subject
    with GitRepo(b.path) as repo:
        units = list(iter_commits(repo, f"{start}..HEAD"))
    mark_reverts(units)
    by_sha = {u.sha: u for u in units}
    assert by_sha[land].reverted_by == revert1
    assert by_sha[reland].reverted_by == revert2
    assert by_sha[revert1].reverts_sha == land
    assert by_sha[revert2].reverts_sha == reland
    assert by_sha[revert2].reverts_pr == 200
    assert by_sha[revert1].pr is None  # the (#200) names the reverted PR, not its own


def test_plain_git_revert_message_is_found_by_sha(tmp_path):
    b = RepoBuilder(tmp_path / "r")
    b.write("m.py", "x = 1\n")
    start = b.commit("init")
    b.write("m.py", "x = 2\n")
    change = b.commit("Change x")
    revert = b.revert(change)  # git's own message: Revert "Change x" / This reverts commit ...
    with GitRepo(b.path) as repo:
        units = list(iter_commits(repo, f"{start}..HEAD"))
    mark_reverts(units)
    assert units[1].sha == revert
    assert units[1].reverts_sha == change
    assert units[0].reverted_by == revert


def test_revert_of_a_commit_outside_the_range_keeps_its_reference(history):
    b, shas = history
    with GitRepo(b.path) as repo:
        units = list(iter_commits(repo, f"{shas['pr103']}..v2"))
    mark_reverts(units)
    assert len(units) == 1
    assert units[0].reverts_sha == shas["pr101"]
    assert units[0].reverts_pr == 101


PULL = "https://github.com/pytorch/pytorch/pull"


@pytest.mark.parametrize(
    ("subject", "body", "pr", "reverts_pr"),
    [
        ("Fix a thing (#123)", "", 123, None),
        ("Fix a thing", f"Pull Request resolved: {PULL}/77", 77, None),
        ("Fix #12 in the middle", "", None, None),
        ('Revert "Fix a thing (#123)"', "This reverts commit abcdef1.", None, 123),
        ('Revert "Fix a thing (#123)" (#124)', "", 124, 123),
    ],
)
def test_read_message(subject, body, pr, reverts_pr):
    facts = read_message(subject, body)
    assert (facts.pr, facts.reverts_pr) == (pr, reverts_pr)


def test_git_snapshot_uses_blob_ids_and_matches_the_work_tree(history):
    b, _ = history
    with GitRepo(b.path) as repo:
        v1, v2 = GitSnapshot(repo, "v1"), GitSnapshot(repo, "v2")
        assert v2.label.endswith("@v2")
        assert v1.paths() == [
            "torch/_inductor/lowering.py",
            "torch/gone.py",
            "torch/old_name.py",
            "torch/stays.py",
        ]
        blob = b.git("rev-parse", "v1:torch/gone.py")
        assert v1.digest("torch/gone.py") == f"git:{blob}"
        assert v1.read("torch/gone.py") == b"GONE = 1\n"
        # The revert undid PR 101 (lowering.py and its test): neither shows up.
        changes = {c.path: c.status for c in diff_snapshots(v1, v2)}
        assert changes == {
            "torch/added.py": "added",
            "torch/gone.py": "removed",
            "torch/new_name.py": "added",
            "torch/old_name.py": "removed",
            "torch/stays.py": "removed",
            "torch/sub/stays.py": "added",
        }
        # Different digest schemes (git blob vs sha256): compared by content, still equal.
        assert diff_snapshots(v2, TreeSnapshot(b.path)) == []


def _git_verb(cmd: list[str]) -> str:
    args = iter(cmd[1:])
    for arg in args:
        if arg in ("-c", "-C"):
            next(args)
        elif not arg.startswith("-"):
            return arg
    return ""


def test_one_git_log_and_one_cat_file_process_for_a_range(history, monkeypatch):
    b, _ = history
    started: list[list[str]] = []
    real_popen = subprocess.Popen

    class CountingPopen(real_popen):  # type: ignore[misc, valid-type]
        def __init__(self, args, *a, **kw):
            started.append(list(args))
            super().__init__(args, *a, **kw)

    monkeypatch.setattr(git_repo_module.subprocess, "Popen", CountingPopen)
    repo = GitRepo(b.path)
    started.clear()  # construction checks the repository; count the range only
    units = list(iter_commits(repo, "v1..v2"))
    assert sum(len(u.files) for u in units) >= 7
    verbs = [_git_verb(cmd) for cmd in started]
    assert verbs.count("log") == 1
    assert verbs.count("cat-file") == 1
    cat = repo._cat
    assert cat is not None and cat.proc.poll() is None
    repo.close()
    assert cat.proc.poll() is not None  # closed deterministically, not left to the GC


def test_binary_and_oversized_python_files_are_skipped_with_a_warning(tmp_path, warnings_logged):
    b = RepoBuilder(tmp_path / "r")
    b.write("ok.py", "x = 1\n")
    start = b.commit("init")
    b.write("blob.py", b"\x00\x01binary")
    b.write("big.py", "y = 2\n" * 100)
    b.write("ok.py", "x = 2\n")
    b.commit("add odd files")
    with GitRepo(b.path) as repo:
        (unit,) = iter_commits(repo, f"{start}..HEAD", max_bytes=300)
    assert [f.path for f in unit.files] == ["ok.py"]
    assert "blob.py" in warnings_logged.text and "binary" in warnings_logged.text
    assert "big.py" in warnings_logged.text and "300-byte limit" in warnings_logged.text


# -- bad input ------------------------------------------------------------------------


def test_missing_path(tmp_path):
    with pytest.raises(MissingInput, match=r"git repository path does not exist: .*nope"):
        GitRepo(tmp_path / "nope")


def test_not_a_git_repository(tmp_path):
    (tmp_path / "plain").mkdir()
    with pytest.raises(BadInput, match=r"plain is not a git repository"):
        GitRepo(tmp_path / "plain")


def test_subdirectory_of_a_repository_is_refused_with_the_top_level(history):
    b, _ = history
    with pytest.raises(BadInput, match=r"inside the git repository .* pass "):
        GitRepo(b.path / "torch")


def test_unknown_revision_is_named(history):
    b, _ = history
    with GitRepo(b.path) as repo:
        with pytest.raises(MissingInput, match=r"unknown revision 'v9\.9'"):
            repo.resolve("v9.9")
        with pytest.raises(MissingInput, match=r"unknown revision 'nope'"):
            iter_commits(repo, "v1..nope")
        with pytest.raises(BadInput, match=r"not a git revision"):
            repo.resolve("--all")


def test_empty_range(history):
    b, _ = history
    with GitRepo(b.path) as repo, pytest.raises(BadInput, match=r"v2\.\.v2 holds no commits"):
        iter_commits(repo, "v2..v2")


def test_reversed_range_says_so_and_suggests_the_right_one(history):
    b, _ = history
    with GitRepo(b.path) as repo, pytest.raises(BadInput) as err:
        iter_commits(repo, "v2..v1")
    assert "reversed" in str(err.value)
    assert "did you mean v1..v2?" in str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("bad", ["v1", "v1...v2", "..v2", "v1..v2..v3"])
def test_malformed_range(history, bad):
    b, _ = history
    with GitRepo(b.path) as repo, pytest.raises(BadInput, match=r"range"):
        iter_commits(repo, bad)


def test_merge_commits_carry_files_only_in_first_parent_mode(tmp_path):
    b = RepoBuilder(tmp_path / "r")
    b.write("m.py", "x = 1\n")
    start = b.commit("init")
    b.git("checkout", "-q", "-b", "feature")
    b.write("f.py", "f = 1\n")
    b.commit("feature work")
    b.git("checkout", "-q", "main")
    b.write("m.py", "x = 2\n")
    b.commit("main work")
    b.git("merge", "-q", "--no-ff", "-m", "Merge feature (#7)", "feature")
    with GitRepo(b.path) as repo:
        every = list(iter_commits(repo, f"{start}..main"))
        merges = list(iter_commits(repo, f"{start}..main", first_parent=True))
    assert len(every) == 3 and every[-1].subject == "Merge feature (#7)"
    assert every[-1].files == []  # its changes belong to the commits it merges
    assert [u.subject for u in merges] == ["main work", "Merge feature (#7)"]
    assert [f.path for f in merges[-1].files] == ["f.py"]
    assert merges[-1].pr == 7


def test_git_cli_missing_is_a_missing_dependency(tmp_path, monkeypatch):
    b = RepoBuilder(tmp_path / "r")
    b.write("m.py", "x = 1\n")
    b.commit("init")
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    with pytest.raises(MissingDependency, match=r"needs 'git', which is not installed"):
        GitRepo(b.path)
