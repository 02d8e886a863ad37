"""Linked-symbol coupling end to end: instep impact on real shared objects built here
(native_fixture: a two-version C++ upstream laid out as torch, a downstream package whose
extension module loads a library linked against v1), as trees and as wheels."""

from __future__ import annotations

import csv
import io
import json
import shutil

import pytest

from instep.impact.analysis import ImpactRequest, analyse
from instep.impact.export import render
from instep.impact.model import Action, NativeCheck

from .gitrepo import RepoBuilder
from .native_fixture import IMPORT_LINE, build_native_trees

LIB = "dpkg/lib/libdown.so"


@pytest.fixture(scope="module")
def trees(tmp_path_factory):
    return build_native_trees(tmp_path_factory.mktemp("native"))


def _analyse(old, new, down, cache=None, **kw):
    return analyse(
        ImpactRequest(
            downstream=str(down),
            upstream_old=str(old),
            upstream_new=str(new),
            cache_dir=cache,
            use_cache=cache is not None,
            **kw,
        )
    )


@pytest.fixture(scope="module")
def report(trees):
    return _analyse(trees.old, trees.new, trees.down)


def _native(report):
    units = [u for u in report.units if u.change.unit_kind == "library"]
    assert len(units) == 1, [u.change.id for u in units]
    return units[0]


def _by_name(unit):
    return {c.upstream.split("::", 1)[1]: c for c in unit.couplings}


def test_each_symbol_s_fate(report):
    unit = _native(report)
    assert unit.change.id == f"{LIB} (linked symbols)"
    found = _by_name(unit)
    assert set(found) == {"ns::f(int)", "ns::g()", "ns::k()", "ns::m()", "ns::w()"}  # not h
    changes = {c.qualname: c for c in unit.change.changes}
    assert str(changes["ns::g()"].kind) == "removed"
    assert str(changes["ns::f(int)"].kind) == "signature"
    assert changes["ns::f(int)"].detail == "signature: (int) -> (int, bool)"
    assert str(changes["ns::m()"].kind) == "renamed" and changes["ns::m()"].path == (
        "torch/lib/libup2.so"
    )
    assert changes["ns::k()"].path == "torch/lib/libelse.so"


def test_verdicts_from_the_rules(report):
    found = _by_name(_native(report))
    rules = {name: (str(c.action), c.rule) for name, c in found.items()}
    assert rules == {
        "ns::f(int)": ("Shim", "linked_symbol.fails_at_import"),
        "ns::g()": ("Shim", "linked_symbol.fails_at_import"),
        "ns::k()": ("Shim", "linked_symbol.fails_at_import"),  # moved where nothing loads it
        "ns::m()": ("Check", "linked_symbol.moved_still_loaded"),  # v2's libup.so needs libup2
        "ns::w()": ("Test", "linked_symbol.weak_reference"),
    }
    assert _native(report).action is Action.SHIM


def test_the_shim_names_the_so_the_python_place_and_the_declarations(report):
    g = _by_name(_native(report))["ns::g()"]
    assert g.downstream == f"dpkg/__init__.py:{IMPORT_LINE}"
    assert g.snippet == "from dpkg import _C  # loads lib/libdown.so through DT_NEEDED"
    assert g.evidence == f"{LIB}: undefined symbol: _ZN2ns1gEv"
    assert "declared in torch/include/up/api.h:4 (torch 1.0), in no header of torch 2.0" in (
        g.detail
    )
    assert "through DT_NEEDED dpkg/_C" in g.detail and g.detail.rstrip().endswith(LIB)
    f = _by_name(_native(report))["ns::f(int)"]
    assert "torch/include/up/api.h:3 (torch 1.0), torch/include/up/api.h:3 (torch 2.0)" in (
        f.detail
    )
    md = render(report, "md")
    line = next(x for x in md.splitlines() if "ns::f(int)" in x and x.startswith("- **"))
    assert f"**dpkg/__init__.py:{IMPORT_LINE}**" in line
    assert "at torch/include/up/api.h:3 (signature); signature `(int) -> (int, bool)`" in line


def test_the_scope_counts_what_was_read(report):
    s = report.scope
    assert s is not None and s.native is NativeCheck.CHECKED
    assert (s.python_files, s.shared_objects, s.linked_symbols) == (1, 2, 6)
    assert (s.missing_symbols, s.moved_symbols) == (4, 1)  # f g k w missing; m moved; h fine
    assert s.upstream_libraries == ("torch/lib/libup.so",) and s.registered_kernels is None
    md = render(report, "md").splitlines()
    assert md[2] == (
        "> Read: 1 Python files; 2 shared objects, 6 linked upstream symbols checked (4 missing,"
        " 1 moved to another library they still load); registered kernels not read."
    )
    assert json.loads(render(report, "json"))["scope"]["linked_symbols"] == 6
    rows = list(csv.reader(io.StringIO(render(report, "csv"))))
    assert rows[0][0].startswith("# Read: 1 Python files; 2 shared objects")
    assert rows[1][0] == "ID"
    assert '<div id="scope"' in render(report, "html")
    zh = render(_zh(report), "md")
    assert "已读取：1 个 Python 文件；2 个共享对象，检查了 6 个链接的上游符号" in zh


def _zh(report):
    import copy

    other = copy.copy(report)
    other.lang = "zh"
    return other


def test_wheels_give_the_same_answer(trees, tmp_path):
    old, new = trees.up_wheel("old", tmp_path), trees.up_wheel("new", tmp_path)
    wheel = _analyse(old, new, trees.down_wheel(tmp_path), cache=tmp_path / "cache")
    unit = _native(wheel)
    assert {k: str(c.action) for k, c in _by_name(unit).items()} == {
        "ns::f(int)": "Shim",
        "ns::g()": "Shim",
        "ns::k()": "Shim",
        "ns::m()": "Check",
        "ns::w()": "Test",
    }
    assert wheel.stats["native_reads"] > 0
    # warm: the libraries' facts come from the cache (the report memo is bypassed by a
    # changed request: another language)
    again = _analyse(old, new, trees.down_wheel(tmp_path), cache=tmp_path / "cache", lang="zh")
    assert again.stats["native_reads"] == 0 and again.scope == wheel.scope


def test_an_unreadable_shared_object_is_said_first(trees, tmp_path):
    down = tmp_path / "down"
    shutil.copytree(trees.down, down, symlinks=True)
    (down / "dpkg/lib/libbroken.so").write_text("INPUT(-lfoo)\n")  # a linker script
    report = _analyse(trees.old, trees.new, down)
    s = report.scope
    assert [(u.path, u.reason) for u in s.unreadable] == [
        ("dpkg/lib/libbroken.so", "not an ELF file")
    ]
    md = render(report, "md").splitlines()
    assert md[2].startswith("> Not read: 1 shared object(s) of the downstream")
    assert "dpkg/lib/libbroken.so (not an ELF file)" in md[2]
    assert md[3].startswith("> Read:")


def test_nothing_missing_is_said_plainly_and_no_shim_names_what_was_not_read(trees, tmp_path):
    report = _analyse(trees.old, trees.old, trees.down)  # the same upstream on both sides
    s = report.scope
    assert (s.linked_symbols, s.missing_symbols) == (6, 0)
    assert not [u for u in report.units if u.change.unit_kind == "library"]
    md = render(report, "md")
    assert "No Shim in what was read; not checked: the registered kernels." in md


def test_a_python_only_downstream_says_no_shared_objects(trees, tmp_path):
    down = tmp_path / "py"
    (down / "dpkg").mkdir(parents=True)
    (down / "dpkg/__init__.py").write_text("import torch\n")
    s = _analyse(trees.old, trees.new, down).scope
    assert s.native is NativeCheck.NO_SHARED_OBJECTS and s.shared_objects == 0


def test_git_mode_says_the_symbol_check_needs_releases(trees, tmp_path):
    repo = RepoBuilder(tmp_path / "up")
    repo.write("torch/__init__.py", "x = 1\n")
    repo.git("add", "-A")
    repo.git("commit", "-qm", "one")
    repo.git("tag", "v1")
    repo.write("torch/__init__.py", "x = 2\n")
    repo.git("commit", "-qam", "two")
    report = analyse(
        ImpactRequest(
            downstream=str(trees.down),
            upstream_git=str(repo.path),
            rev_range="v1..HEAD",
            use_cache=False,
        )
    )
    assert report.scope.native is NativeCheck.NEEDS_RELEASES
    md = render(report, "md")
    assert "linked symbols not checked: a git range or patches have no built libraries" in md
    assert (
        "No Shim in what was read; not checked: the linked symbols, the registered kernels." in md
    )


def test_a_source_tree_upstream_says_the_check_needs_releases(trees, tmp_path):
    src = tmp_path / "src"
    shutil.copytree(trees.new, src)
    shutil.rmtree(src / "torch/lib")
    s = _analyse(trees.old, src, trees.down).scope
    assert s.native is NativeCheck.UPSTREAM_NOT_BUILT and "new upstream" in s.detail


def test_a_changed_library_is_not_answered_from_the_remembered_report(trees, tmp_path):
    cache = tmp_path / "cache"
    down = tmp_path / "down"
    shutil.copytree(trees.down, down, symlinks=True)
    first = _analyse(trees.old, trees.new, down, cache=cache)
    assert first.scope.missing_symbols == 4
    # the downstream rebuilt against v2: same Python files, other shared objects
    shutil.copy(trees.old / "torch/lib/libup.so", down / "dpkg/lib/libdown.so")
    second = _analyse(trees.old, trees.new, down, cache=cache)
    assert second.stats.get("report_memo") != "hit"
    assert second.scope.missing_symbols == 0


def test_the_cli_summary_opens_with_the_scope(trees, instep):
    res = instep(
        "impact",
        "--upstream-old",
        str(trees.old),
        "--upstream-new",
        str(trees.new),
        "--downstream",
        str(trees.down),
        "--no-cache",
        "--format",
        "json",
    )
    assert res.code == 0, res.err
    err = " ".join(res.err.split())
    assert "Read: 1 Python files; 2 shared objects, 6 linked upstream symbols checked" in err
    assert err.index("Read: 1 Python files") < err.index(" units: ")
    assert json.loads(res.out)["scope"]["shared_objects"] == 2
