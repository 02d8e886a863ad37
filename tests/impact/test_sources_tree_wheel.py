"""Tree and wheel snapshots, and the diff of two snapshots, on real files."""

from __future__ import annotations

import base64
import hashlib
import logging
import os
import zipfile
from pathlib import Path

import pytest

from instep.errors import BadInput, MissingInput
from instep.impact.upstream.sources import (
    DEFAULT_MAX_BYTES,
    TreeSnapshot,
    WheelSnapshot,
    diff_snapshots,
    sha256_digest,
)
from instep.impact.upstream.sources import wheel as wheel_module


@pytest.fixture
def warnings_logged(caplog, monkeypatch):
    """``caplog`` for the sources' warnings, also after a CLI test in this process has
    routed the ``instep`` logger to its own handler (``propagate = False``)."""
    monkeypatch.setattr(logging.getLogger("instep"), "propagate", True)
    caplog.set_level(logging.WARNING, logger="instep.impact.upstream.sources")
    return caplog


def _write(root: Path, rel: str, data: str | bytes) -> Path:
    file = root / rel
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_bytes(data.encode() if isinstance(data, str) else data)
    return file


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _wheel(path: Path, files: dict[str, bytes], *, record: bool = True, fake: dict | None = None):
    """A real wheel made with zipfile; ``fake`` overrides RECORD hashes for some members."""
    fake = fake or {}
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("pkg/", b"")  # a directory entry
        rows = []
        for name, data in files.items():
            zf.writestr(name, data)
            rows.append(f"{name},{fake.get(name, _record_hash(data))},{len(data)}")
        zf.writestr("pkg-1.0.dist-info/METADATA", "Name: pkg\nVersion: 1.0\n")
        if record:
            rows.append("pkg-1.0.dist-info/RECORD,,")
            zf.writestr("pkg-1.0.dist-info/RECORD", "\n".join(rows) + "\n")
    return path


# -- trees ----------------------------------------------------------------------------


def test_tree_lists_python_files_sorted_and_reads_bytes(tmp_path):
    _write(tmp_path, "torch/_inductor/lowering.py", "def expand(x):\n    pass\n")
    _write(tmp_path, "torch/__init__.py", "")
    _write(tmp_path, "torch/latin1.py", b"# caf\xe9\n")  # not UTF-8: fine, bytes come back
    _write(tmp_path, "torch/data.json", "{}")
    _write(tmp_path, "torch/__pycache__/x.cpython-311.py", "cached = 1\n")
    _write(tmp_path, ".git/hooks/hook.py", "hook = 1\n")
    snap = TreeSnapshot(tmp_path)
    assert snap.label == str(tmp_path)
    assert snap.paths() == ["torch/__init__.py", "torch/_inductor/lowering.py", "torch/latin1.py"]
    assert snap.read("torch/latin1.py") == b"# caf\xe9\n"
    assert snap.digest("torch/latin1.py") == _record_hash(b"# caf\xe9\n")
    with pytest.raises(KeyError):
        snap.read("torch/data.json")


@pytest.mark.timeout(20)
def test_symlink_loop_pointing_up_the_tree_neither_hangs_nor_duplicates(tmp_path, warnings_logged):
    root = tmp_path / "tree"
    _write(root, "pkg/mod.py", "A = 1\n")
    _write(root, "pkg/sub/deep.py", "B = 2\n")
    os.symlink("../..", root / "pkg" / "sub" / "up")  # loops back to the root
    os.symlink("sub", root / "pkg" / "alias")  # a second name for a sibling
    paths = TreeSnapshot(root).paths()
    assert paths == ["pkg/mod.py", "pkg/sub/deep.py"]
    assert "pkg/sub/up" in warnings_logged.text and "loop" in warnings_logged.text
    assert "pkg/alias" in warnings_logged.text


def test_symlinks_to_outside_files_and_directories_are_followed(tmp_path, warnings_logged):
    outside = tmp_path / "outside"
    _write(outside, "ext.py", "E = 1\n")
    root = tmp_path / "tree"
    _write(root, "pkg/own.py", "O = 1\n")
    os.symlink(outside, root / "pkg" / "vendored")
    os.symlink(outside / "ext.py", root / "pkg" / "linked.py")
    os.symlink(tmp_path / "missing.py", root / "pkg" / "broken.py")
    snap = TreeSnapshot(root)
    assert snap.paths() == ["pkg/linked.py", "pkg/own.py", "pkg/vendored/ext.py"]
    assert snap.read("pkg/vendored/ext.py") == b"E = 1\n"
    assert "broken.py" in warnings_logged.text


def test_binary_and_huge_files_are_skipped_with_a_warning_naming_them(tmp_path, warnings_logged):
    _write(tmp_path, "ok.py", "x = 1\n")
    _write(tmp_path, "compiled.py", b"\x7fELF\x00\x00binary")
    _write(tmp_path, "generated.py", "x = 1\n" * 50)
    assert TreeSnapshot(tmp_path, max_bytes=100).paths() == ["ok.py"]
    assert "compiled.py" in warnings_logged.text and "binary" in warnings_logged.text
    assert "generated.py" in warnings_logged.text and "100-byte limit" in warnings_logged.text
    # The default limit (8 MiB) keeps the 300-byte file.
    assert DEFAULT_MAX_BYTES == 8 * 1024 * 1024
    assert TreeSnapshot(tmp_path).paths() == ["generated.py", "ok.py"]


def test_tree_bad_input(tmp_path):
    with pytest.raises(MissingInput, match=r"source tree does not exist: .*absent"):
        TreeSnapshot(tmp_path / "absent")
    file = _write(tmp_path, "f.py", "")
    with pytest.raises(BadInput, match=r"not a directory"):
        TreeSnapshot(file)


# -- wheels ---------------------------------------------------------------------------


def test_wheel_members_and_record_digests_without_extracting(tmp_path):
    files = {
        "pkg/__init__.py": b"",
        "pkg/lowering.py": b"def expand(x, sizes):\n    pass\n",
        "pkg/lib.so": b"\x7fELF",
        "pkg-1.0.data/purelib/extra_mod.py": b"X = 1\n",
    }
    fake = {"pkg/lowering.py": "sha256=RECORD-says-so"}
    wheel = _wheel(tmp_path / "pkg-1.0-py3-none-any.whl", files, fake=fake)
    snap = WheelSnapshot(wheel)
    assert snap.label == wheel.name
    assert snap.paths() == ["extra_mod.py", "pkg/__init__.py", "pkg/lowering.py"]
    # The digest is RECORD's word, not a hash of the member (which would differ here).
    assert snap.digest("pkg/lowering.py") == "sha256=RECORD-says-so"
    assert snap.digest("pkg/__init__.py") == sha256_digest(b"")
    assert snap.read("extra_mod.py") == b"X = 1\n"
    assert not list(tmp_path.glob("pkg/*"))  # nothing extracted next to the wheel
    snap.close()


def test_a_wheel_member_is_decompressed_once(tmp_path):
    wheel = _wheel(tmp_path / "p.whl", {"pkg/a.py": b"A = 1\n", "pkg/b.py": b"B = 2\n"})
    with WheelSnapshot(wheel) as snap:
        opened: list[str] = []
        original = snap._zip.read
        snap._zip.read = lambda info: opened.append(info.filename) or original(info)  # type: ignore[method-assign]
        assert [snap.read("pkg/a.py") for _ in range(3)] == [b"A = 1\n"] * 3
        assert snap.read("pkg/b.py") == b"B = 2\n"
        assert opened == ["pkg/a.py", "pkg/b.py"]
        # a forked child opens a handle of its own but keeps what was read before
        snap._pid = -1
        assert snap.read("pkg/a.py") == b"A = 1\n" and opened == ["pkg/a.py", "pkg/b.py"]


def test_a_wheel_keeps_only_the_latest_members_it_read(tmp_path, monkeypatch):
    """The memo holds the latest READ_BUDGET bytes (issue #32: every member a release read
    was kept, 120+ MiB in every process); one read again is decompressed again."""
    monkeypatch.setattr(wheel_module, "READ_BUDGET", 30)
    files = {f"pkg/m{k}.py": f"V{k} = {k}\n".encode() * 2 for k in range(5)}  # 14 bytes each
    with WheelSnapshot(_wheel(tmp_path / "p.whl", files)) as snap:
        opened: list[str] = []
        original = snap._zip.read
        snap._zip.read = lambda info: opened.append(info.filename) or original(info)  # type: ignore[method-assign]
        assert [snap.read(p) for p in files] == list(files.values())
        assert list(snap._read) == ["pkg/m3.py", "pkg/m4.py"] and snap._read_bytes == 28
        assert snap.read("pkg/m4.py") == files["pkg/m4.py"]  # kept: not opened again
        assert snap.read("pkg/m0.py") == files["pkg/m0.py"]  # dropped: opened again
        assert opened == [*files, "pkg/m0.py"]
        assert list(snap._read) == ["pkg/m4.py", "pkg/m0.py"]


def test_a_lazy_diff_holds_no_bytes_and_reads_them_when_asked(tmp_path, warnings_logged):
    old = _wheel(
        tmp_path / "old.whl",
        {"pkg/changed.py": b"v = 1\n", "pkg/gone.py": b"g = 1\n", "pkg/bin.py": b"b = 1\n"},
    )
    new = _wheel(
        tmp_path / "new.whl",
        {"pkg/changed.py": b"v = 2\n", "pkg/added.py": b"a = 1\n", "pkg/bin.py": b"\x00\x01"},
    )
    old_snap, new_snap = WheelSnapshot(old), WheelSnapshot(new)
    changes = diff_snapshots(old_snap, new_snap, lazy=True, keep=lambda p: p != "pkg/gone.py")
    assert [(c.path, c.status, c.has_old, c.has_new) for c in changes] == [
        ("pkg/added.py", "added", False, True),
        ("pkg/changed.py", "modified", True, True),
    ]
    assert "pkg/bin.py" in warnings_logged.text and "binary" in warnings_logged.text
    # nothing was decompressed whole (the binary test reads a member's head), none is held
    assert not old_snap._read and not new_snap._read
    assert not any(isinstance(v, bytes) for c in changes for v in vars(c).values())
    assert (changes[1].old, changes[1].new) == (b"v = 1\n", b"v = 2\n")
    assert (changes[0].old, changes[0].new) == (None, b"a = 1\n")
    read_now = diff_snapshots(old_snap, new_snap, keep=lambda p: p != "pkg/gone.py")
    assert [(c.path, c.old, c.new) for c in changes] == [(c.path, c.old, c.new) for c in read_now]


def test_wheel_without_record_hashes_members(tmp_path):
    wheel = _wheel(tmp_path / "p.whl", {"pkg/a.py": b"A = 1\n"}, record=False)
    with WheelSnapshot(wheel) as snap:
        assert not snap.has_record
        assert snap.digest("pkg/a.py") == _record_hash(b"A = 1\n")


def test_diff_of_two_wheels_reads_only_changed_members(tmp_path):
    same = b"UNCHANGED = 1\n" * 10
    old = _wheel(
        tmp_path / "old.whl",
        {"pkg/same.py": same, "pkg/changed.py": b"v = 1\n", "pkg/gone.py": b"g = 1\n"},
    )
    new = _wheel(
        tmp_path / "new.whl",
        {"pkg/same.py": same, "pkg/changed.py": b"v = 2\n", "pkg/added.py": b"a = 1\n"},
    )
    old_snap, new_snap = WheelSnapshot(old), WheelSnapshot(new)
    read: list[str] = []
    for snap in (old_snap, new_snap):
        original = snap.read
        snap.read = lambda p, original=original: read.append(p) or original(p)  # type: ignore[method-assign]
    changes = diff_snapshots(old_snap, new_snap)
    assert [(c.path, c.status) for c in changes] == [
        ("pkg/added.py", "added"),
        ("pkg/changed.py", "modified"),
        ("pkg/gone.py", "removed"),
    ]
    assert changes[1].old == b"v = 1\n" and changes[1].new == b"v = 2\n"
    assert "pkg/same.py" not in read


def test_diff_across_digest_schemes_compares_content(tmp_path):
    tree = tmp_path / "tree"
    _write(tree, "pkg/a.py", "A = 1\n")
    _write(tree, "pkg/b.py", "B = 2\n")
    wheel = _wheel(
        tmp_path / "w.whl", {"pkg/a.py": b"A = 1\n", "pkg/b.py": b"B = 3\n"}, record=False
    )
    changes = diff_snapshots(TreeSnapshot(tree), WheelSnapshot(wheel))
    assert [(c.path, c.old, c.new) for c in changes] == [("pkg/b.py", b"B = 2\n", b"B = 3\n")]


def test_diff_skips_a_file_that_became_binary(tmp_path, warnings_logged):
    old, new = tmp_path / "old", tmp_path / "new"
    _write(old, "a.py", "A = 1\n")
    _write(old, "b.py", "B = 1\n")
    _write(new, "a.py", "A = 2\n")
    _write(new, "b.py", "B = 1\n")
    wheel = _wheel(tmp_path / "w.whl", {"a.py": b"A = 2\n", "b.py": b"\x00\x00"}, record=False)
    assert [c.path for c in diff_snapshots(TreeSnapshot(old), TreeSnapshot(new))] == ["a.py"]
    assert [c.path for c in diff_snapshots(TreeSnapshot(old), WheelSnapshot(wheel))] == ["a.py"]
    assert "b.py" in warnings_logged.text and "binary" in warnings_logged.text


def test_wheel_bad_input(tmp_path):
    with pytest.raises(MissingInput, match=r"wheel file does not exist"):
        WheelSnapshot(tmp_path / "absent.whl")
    bogus = _write(tmp_path, "bogus.whl", "not a zip")
    with pytest.raises(BadInput, match=r"bogus\.whl is not a readable wheel"):
        WheelSnapshot(bogus)


def test_wheel_skips_huge_members_with_a_warning(tmp_path, warnings_logged):
    wheel = _wheel(tmp_path / "w.whl", {"pkg/big.py": b"x = 1\n" * 100, "pkg/s.py": b"s = 1\n"})
    assert WheelSnapshot(wheel, max_bytes=100).paths() == ["pkg/s.py"]
    assert "pkg/big.py" in warnings_logged.text


@pytest.mark.realworld
def test_real_torch_wheels_diff_by_record(real_wheels):
    with WheelSnapshot(real_wheels["old"]) as old, WheelSnapshot(real_wheels["new"]) as new:
        assert old.has_record and new.has_record
        changes = {c.path: c for c in diff_snapshots(old, new)}
    lowering = changes["torch/_inductor/lowering.py"]
    assert b"\ndef expand(x, sizes):\n" in lowering.old
    assert b"\ndef expand(x, sizes, *, implicit=False):\n" in lowering.new
    # Unchanged members are left out (RECORD hashes agree), changed ones come with bytes.
    assert "torch/_inductor/await_utils.py" not in changes
    assert all((c.old or c.new) for c in changes.values())
