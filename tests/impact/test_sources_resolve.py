"""From a command-line word to a snapshot: trees, wheels, PATH@REV, pip requirements."""

from __future__ import annotations

import sys
import textwrap
import time
import zipfile
from pathlib import Path

import pytest

from instep.errors import BadInput, MissingInput
from instep.impact.upstream.sources import (
    GitSnapshot,
    TreeSnapshot,
    WheelSnapshot,
    download_wheel,
    is_pip_requirement,
    open_snapshot,
)
from instep.impact.upstream.sources.pip_spec import cache_key

from .gitrepo import RepoBuilder

# A stand-in for pip: writes a one-file wheel for the requested spec into --dest, or fails
# the way pip does when told to (the spec contains 'fail').
FAKE_PIP = textwrap.dedent(
    """
    import sys, zipfile
    args = sys.argv[1:]
    assert args[0] == "download", args
    assert "--no-deps" in args and args[args.index("--only-binary") + 1] == ":all:", args
    dest, spec = args[args.index("--dest") + 1], args[-1]
    if "fail" in spec:
        print("Looking in indexes: https://example.invalid/simple")
        print("ERROR: Could not find a version that satisfies the requirement " + spec,
              file=sys.stderr)
        print("ERROR: No matching distribution found for " + spec, file=sys.stderr)
        sys.exit(1)
    name, version = spec.split("==")
    with zipfile.ZipFile(f"{dest}/{name}-{version}-py3-none-any.whl", "w") as zf:
        zf.writestr(f"{name}/__init__.py", f"VERSION = {version!r}\\n")
    """
)


@pytest.fixture
def fake_pip(tmp_path) -> list[str]:
    script = tmp_path / "fake_pip.py"
    script.write_text(FAKE_PIP)
    return [sys.executable, str(script)]


FAILING_PIP = [sys.executable, "-c", "import sys; sys.exit(3)"]


def test_download_once_then_reuse_without_pip(tmp_path, fake_pip):
    cache = tmp_path / "cache"
    wheel = download_wheel("demo==1.2", cache, pip=fake_pip)
    assert wheel.parent == cache / "wheels" / cache_key("demo==1.2")
    assert wheel.name == "demo-1.2-py3-none-any.whl"
    assert zipfile.ZipFile(wheel).read("demo/__init__.py") == b"VERSION = '1.2'\n"
    # A second call does not run pip: this "pip" would fail.
    assert download_wheel("demo==1.2", cache, pip=FAILING_PIP) == wheel
    assert [p.name for p in (cache / "wheels").iterdir()] == [wheel.parent.name]


def test_failed_download_is_one_line_naming_the_spec_and_leaves_no_cache_entry(tmp_path, fake_pip):
    cache = tmp_path / "cache"
    with pytest.raises(MissingInput) as err:
        download_wheel("willfail==9.9", cache, pip=fake_pip)
    assert str(err.value) == (
        "cannot download willfail==9.9 with pip: "
        "ERROR: No matching distribution found for willfail==9.9"
    )
    assert list((cache / "wheels").iterdir()) == []  # no half-made entry, no temp folder


def test_download_rejects_what_is_not_a_requirement(tmp_path):
    with pytest.raises(BadInput, match=r"not a pip requirement"):
        download_wheel("torch", tmp_path, pip=FAILING_PIP)


@pytest.mark.parametrize(
    ("spec", "ok"),
    [
        ("torch==2.13.0", True),
        ("torch-npu==2.13.0", True),
        ("torch_npu==2.13.0.post1", True),
        ("torch>=2.13,<2.15", True),
        ("torch[opt-einsum]==2.13.0", True),
        ("torch", False),
        ("./torch==2.13.0", False),
        ("torch==", False),
    ],
)
def test_is_pip_requirement(spec, ok):
    assert is_pip_requirement(spec) is ok


@pytest.mark.slow
def test_unknown_package_is_missing_input_quickly(tmp_path):
    """The real pip, asked for a name that does not exist (offline it fails as well)."""
    started = time.monotonic()
    with pytest.raises(MissingInput) as err:
        download_wheel("instep-no-such-package-xyz==1.0", tmp_path)
    assert time.monotonic() - started < 60
    message = str(err.value)
    assert message.startswith("cannot download instep-no-such-package-xyz==1.0")
    assert "\n" not in message


# -- open_snapshot --------------------------------------------------------------------


def test_open_snapshot_dispatches_on_the_form(tmp_path, fake_pip):
    tree = tmp_path / "tree"
    (tree / "pkg").mkdir(parents=True)
    (tree / "pkg" / "m.py").write_text("M = 1\n")
    snap = open_snapshot(str(tree), tmp_path / "cache")
    assert isinstance(snap, TreeSnapshot) and snap.paths() == ["pkg/m.py"]

    wheel = tmp_path / "w-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("w/__init__.py", "W = 1\n")
    with open_snapshot(str(wheel), tmp_path / "cache") as snap:
        assert isinstance(snap, WheelSnapshot) and snap.paths() == ["w/__init__.py"]

    b = RepoBuilder(tmp_path / "repo")
    b.write("torch/x.py", "X = 1\n")
    b.commit("init")
    b.tag("v2.13.0")
    with open_snapshot(f"{b.path}@v2.13.0", tmp_path / "cache") as snap:
        assert isinstance(snap, GitSnapshot)
        assert snap.label == "repo@v2.13.0"
        assert snap.read("torch/x.py") == b"X = 1\n"

    # A pip requirement already in the cache opens without running pip.
    download_wheel("demo==1.2", tmp_path / "cache", pip=fake_pip)
    with open_snapshot("demo==1.2", tmp_path / "cache") as snap:
        assert isinstance(snap, WheelSnapshot)
        assert snap.label == "demo==1.2"
        assert snap.read("demo/__init__.py") == b"VERSION = '1.2'\n"


@pytest.mark.parametrize(
    ("word", "error", "pattern"),
    [
        ("not a source at all", BadInput, r"expected a source directory, a \.whl file, PATH@REV"),
        ("./absent/tree", MissingInput, r"path does not exist: \./absent/tree"),
        ("absent.whl", MissingInput, r"path does not exist: absent\.whl"),
        ("/absent/repo@v1", MissingInput, r"git repository path does not exist: /absent/repo"),
        ("", BadInput, r"empty source"),
    ],
)
def test_open_snapshot_bad_words(tmp_path, word, error, pattern):
    with pytest.raises(error, match=pattern):
        open_snapshot(word, tmp_path)


def test_open_snapshot_file_that_is_not_a_wheel_and_repo_errors(tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("x")
    with pytest.raises(BadInput, match=r"notes\.txt is a file but not a \.whl wheel"):
        open_snapshot(str(notes), tmp_path)
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(BadInput, match=r"plain is not a git repository"):
        open_snapshot(f"{plain}@v1", tmp_path)
    b = RepoBuilder(tmp_path / "repo")
    b.write("a.py", "")
    b.commit("init")
    with pytest.raises(MissingInput, match=r"unknown revision 'v9'"):
        open_snapshot(f"{b.path}@v9", tmp_path)
    assert Path(b.path).is_dir()
