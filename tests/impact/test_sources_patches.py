"""Patch directories (git format-patch and plain diff -u) applied in memory to a base."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from instep.errors import BadInput, MissingInput
from instep.impact.upstream.sources import (
    GitRepo,
    GitSnapshot,
    PatchedSnapshot,
    TreeSnapshot,
    diff_snapshots,
    iter_patch_units,
)

from .gitrepo import RepoBuilder

A_V1 = "".join(f"def f{i}(x):\n    return x + {i}\n\n" for i in range(30))
B_V1 = "".join(f"class C{i}:\n    value = {i}\n\n" for i in range(30))


def _diff_u(old: Path, new: Path, cwd: Path) -> bytes:
    """The real ``diff -u`` (exit 1 means 'files differ')."""
    proc = subprocess.run(
        ["diff", "-u", str(old.relative_to(cwd)), str(new.relative_to(cwd))],
        cwd=cwd,
        capture_output=True,
        check=False,
    )
    assert proc.returncode == 1, proc.stderr
    return proc.stdout


@pytest.fixture(scope="module")
def series(tmp_path_factory):
    """A repo at v1 plus three commits exported with git format-patch, and a plain diff."""
    root = tmp_path_factory.mktemp("patches")
    b = RepoBuilder(root / "repo")
    b.write("torch/a.py", A_V1)
    b.write("torch/b.py", B_V1)
    b.write("torch/c.py", "C = 1\n")
    b.write("torch/d.py", B_V1.replace("class", "class D"))
    b.write("torch/tail.py", "no_newline = True")  # no newline at end of file
    b.write("README.md", "hello\n")
    b.commit("init")
    b.tag("v1")
    b.write("torch/a.py", A_V1.replace("return x + 3\n", "return x + 3 * 1\n"))
    b.write("README.md", "hello again\n")
    b.commit(
        "[inductor] Fix f3 (#301)\n\n"
        "Pull Request resolved: https://github.com/pytorch/pytorch/pull/301"
    )
    b.move("torch/b.py", "torch/b2.py")
    b.write("torch/b2.py", B_V1 + "class Extra:\n    pass\n")
    b.commit("Rename b to b2 (#302)")
    b.write("torch/new.py", "NEW = 1\n")
    b.remove("torch/c.py")
    b.write("torch/tail.py", "no_newline = False")
    b.move("torch/d.py", "torch/sub/d.py")  # a pure rename: no hunks in the patch
    b.commit("Add new.py, drop c.py, flip tail (#303)")
    b.tag("v2")
    patch_dir = root / "patches"
    b.git("format-patch", "-q", "-o", str(patch_dir), "v1..v2")
    # A plain `diff -u` on top, made from two real files, old/ and new/ prefixes (-p1).
    work = root / "plain"
    old_a = work / "old" / "torch" / "a.py"
    new_a = work / "new" / "torch" / "a.py"
    for path in (old_a, new_a):
        path.parent.mkdir(parents=True)
    text = A_V1.replace("return x + 3\n", "return x + 3 * 1\n")
    old_a.write_text(text)
    new_a.write_text(text.replace("return x + 20\n", "return x + 20  # twenty\n"))
    (patch_dir / "0004-plain.diff").write_bytes(
        b"Annotate f20 in a.py\n\n" + _diff_u(old_a, new_a, work)
    )
    return b, patch_dir


def test_format_patch_series_and_plain_diff_apply_cumulatively(series):
    b, patch_dir = series
    with GitRepo(b.path) as repo:
        base = GitSnapshot(repo, "v1")
        units = list(iter_patch_units(base, patch_dir))
        assert [u.id for u in units] == [
            "0001-inductor-Fix-f3-301.patch",
            "0002-Rename-b-to-b2-302.patch",
            "0003-Add-new.py-drop-c.py-flip-tail-303.patch",
            "0004-plain.diff",
        ]
        assert [u.title for u in units] == [
            "[inductor] Fix f3 (#301)",
            "Rename b to b2 (#302)",
            "Add new.py, drop c.py, flip tail (#303)",
            "Annotate f20 in a.py",
        ]
        assert [u.pr for u in units] == [301, 302, 303, None]
        fix, rename, add_drop, plain = units
        # README.md is in the patch but is not Python.
        assert [(f.path, f.status) for f in fix.files] == [("torch/a.py", "modified")]
        assert fix.files[0].old == A_V1.encode()
        assert b"return x + 3 * 1\n" in fix.files[0].new
        assert [(f.path, f.old_path) for f in rename.files] == [("torch/b2.py", "torch/b.py")]
        assert rename.files[0].old == B_V1.encode()
        assert {(f.path, f.status) for f in add_drop.files} == {
            ("torch/c.py", "removed"),
            ("torch/new.py", "added"),
            ("torch/sub/d.py", "renamed"),
            ("torch/tail.py", "modified"),
        }
        moved = next(f for f in add_drop.files if f.path == "torch/sub/d.py")
        assert moved.old_path == "torch/d.py"
        assert moved.old == moved.new == B_V1.replace("class", "class D").encode()
        tail = next(f for f in add_drop.files if f.path == "torch/tail.py")
        assert (tail.old, tail.new) == (b"no_newline = True", b"no_newline = False")
        # The plain diff applied on top of patch 1 (its context has 'x + 3 * 1').
        assert plain.files[0].old == fix.files[0].new
        assert b"return x + 20  # twenty\n" in plain.files[0].new


def test_patched_snapshot_equals_the_commit_the_patches_came_from(series, tmp_path):
    b, patch_dir = series
    only_git = tmp_path / "only_git"
    only_git.mkdir()
    for patch in sorted(patch_dir.glob("*.patch")):
        (only_git / patch.name).write_bytes(patch.read_bytes())
    with GitRepo(b.path) as repo:
        patched = PatchedSnapshot(GitSnapshot(repo, "v1"), only_git)
        v2 = GitSnapshot(repo, "v2")
        assert patched.paths() == v2.paths()
        assert diff_snapshots(patched, v2) == []
        assert [c.path for c in diff_snapshots(GitSnapshot(repo, "v1"), patched)] == [
            "torch/a.py",
            "torch/b.py",
            "torch/b2.py",
            "torch/c.py",
            "torch/d.py",
            "torch/new.py",
            "torch/sub/d.py",
            "torch/tail.py",
        ]
        assert len(patched.units) == 3


def test_stdout_series_in_one_file_gives_one_unit_per_message(series, tmp_path):
    b, _ = series
    one = tmp_path / "one"
    one.mkdir()
    (one / "series.patch").write_text(b.git("format-patch", "--stdout", "v1..v2") + "\n")
    with GitRepo(b.path) as repo:
        units = list(iter_patch_units(GitSnapshot(repo, "v1"), one))
    assert [u.id for u in units] == ["series.patch#1", "series.patch#2", "series.patch#3"]
    assert [u.pr for u in units] == [301, 302, 303]


def test_hunk_applies_when_the_base_has_shifted_lines(tmp_path):
    """``diff -u torch/a.py.orig torch/a.py`` (-p0) made against an older file still applies
    to the existing name when only line numbers moved."""
    base = tmp_path / "base"
    (base / "torch").mkdir(parents=True)
    (base / "torch" / "a.py").write_text("# a new header line\n# and another\n" + A_V1)
    work = tmp_path / "work"
    (work / "torch").mkdir(parents=True)
    (work / "torch" / "a.py.orig").write_text(A_V1)
    (work / "torch" / "a.py").write_text(A_V1.replace("x + 10\n", "x + 10.0\n"))
    diff = _diff_u(work / "torch" / "a.py.orig", work / "torch" / "a.py", work)
    assert diff.startswith(b"--- torch/a.py.orig\t")
    patches = tmp_path / "p"
    patches.mkdir()
    (patches / "shift.diff").write_bytes(diff)
    (unit,) = iter_patch_units(TreeSnapshot(base), patches)
    assert unit.title == "shift"
    assert [(f.path, f.old_path) for f in unit.files] == [("torch/a.py", None)]
    assert unit.files[0].new.startswith(b"# a new header line\n# and another\n")
    assert b"return x + 10.0\n" in unit.files[0].new
    assert b"return x + 10\n" not in unit.files[0].new


def test_non_applying_hunk_names_the_patch_and_target_line(series, tmp_path):
    b, patch_dir = series
    broken = tmp_path / "broken"
    broken.mkdir()
    text = (patch_dir / "0001-inductor-Fix-f3-301.patch").read_text()
    assert " def f3(x):\n" in text
    (broken / "0001-fix.patch").write_text(text.replace(" def f3(x):\n", " def f3(y):\n"))
    with GitRepo(b.path) as repo:
        units = iter_patch_units(GitSnapshot(repo, "v1"), broken)
        with pytest.raises(BadInput) as err:
            list(units)
    message = str(err.value)
    assert "0001-fix.patch" in message
    assert "does not apply to torch/a.py:" in message
    assert message.split("torch/a.py:")[1].split()[0].isdigit()


def test_patch_for_a_file_the_base_lacks(tmp_path):
    base = tmp_path / "base"
    base.mkdir()
    patches = tmp_path / "p"
    patches.mkdir()
    (patches / "x.diff").write_text("--- a/pkg/m.py\n+++ b/pkg/m.py\n@@ -1 +1 @@\n-a = 1\n+a = 2\n")
    with pytest.raises(BadInput, match=r"x\.diff: pkg/m\.py: the file to patch does not exist"):
        PatchedSnapshot(TreeSnapshot(base), patches)


def test_patch_dir_bad_input(tmp_path):
    base = TreeSnapshot(tmp_path)
    with pytest.raises(MissingInput, match=r"patch directory does not exist"):
        iter_patch_units(base, tmp_path / "absent")
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.txt").write_text("not a patch")
    with pytest.raises(BadInput, match=r"holds no \*\.patch or \*\.diff files"):
        iter_patch_units(base, empty)
    junk = tmp_path / "junk"
    junk.mkdir()
    (junk / "junk.patch").write_text("this is not a diff at all\n")
    with pytest.raises(BadInput, match=r"junk\.patch holds no unified diff"):
        list(iter_patch_units(base, junk))
    truncated = tmp_path / "truncated"
    truncated.mkdir()
    (truncated / "t.diff").write_text("--- a/m.py\n+++ b/m.py\n@@ -1,3 +1,3 @@\n a\n-b\n")
    with pytest.raises(BadInput, match=r"t\.diff: hunk #1 for b/m\.py is truncated"):
        list(iter_patch_units(base, truncated))
