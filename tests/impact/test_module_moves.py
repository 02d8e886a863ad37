"""Module moves and deletions in commit mode, and merge-based histories (issue #19).

Each test builds a real upstream git history (a package ``pkg``, not torch: its top-level
packages are found from the tree) and a downstream tree in a temp dir, and runs
``instep impact --upstream-git ... --format json`` as a user would.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from tests.impact.gitrepo import RepoBuilder

from instep.cli import run as cli_run

CORE = "def make_x(n):\n    return [n] * n\n\n\nclass X:\n    size = 1\n"


def _downstream(root: Path, files: dict[str, str]) -> Path:
    down = root / "down"
    for rel, text in {"plugin/__init__.py": "", **files}.items():
        (down / rel).parent.mkdir(parents=True, exist_ok=True)
        (down / rel).write_text(text, encoding="utf-8")
    return down


def _impact(root: Path, repo: Path, rev_range: str, down: Path, *extra: str) -> dict:
    out = root / "impact.json"
    args = ["impact", "--upstream-git", str(repo), "--range", rev_range, "--downstream"]
    args += [str(down), "--format", "json", "--out", str(out), "--no-cache", *extra]
    assert cli_run(args) == 0
    return json.loads(out.read_text(encoding="utf-8"))


def _upstream(root: Path, files: dict[str, str]) -> RepoBuilder:
    up = RepoBuilder(root / "upstream")
    for rel, text in {"pkg/__init__.py": "", **files}.items():
        up.write(rel, text)
    up.commit("base")
    up.tag("v1")
    return up


def _couplings(report: dict, at: str) -> list[dict]:
    return [c for u in report["units"] for c in u["couplings"] if c["downstream"] == at]


def test_renamed_module_breaks_the_old_import_with_the_new_path(tmp_path: Path) -> None:
    up = _upstream(tmp_path, {"pkg/b.py": CORE})
    up.move("pkg/b.py", "pkg/_impl/b.py")
    up.write("pkg/_impl/__init__.py", "")
    sha = up.commit("Make b private (#785)")
    up.tag("v2")
    down = _downstream(tmp_path, {"plugin/use.py": "from pkg.b import X\n\nSIZE = X.size\n"})
    report = _impact(tmp_path, up.path, "v1..v2", down)
    (c,) = [c for c in _couplings(report, "plugin/use.py:1")]
    assert (c["action"], c["rule"], c["upstream"]) == ("Shim", "removed.breaks", "pkg/b.py::X")
    unit = next(u for u in report["units"] if u["couplings"])
    assert unit["pr"] == 785 and unit["action"] == "Shim"
    assert (
        f"pkg/b.py (defined X) moved to pkg/_impl/b.py in commit {sha[:12]} (#785)"
        in (unit["rationale"])
    )
    assert "X is now in pkg/_impl/b.py" in unit["rationale"]
    # the rule text names the upstream package, not torch, in both languages
    assert "a stale patch on the new pkg" in unit["rationale"]
    assert "torch" not in unit["rationale"]
    zh = _impact(tmp_path, up.path, "v1..v2", down, "--lang", "zh")
    zh_unit = next(u for u in zh["units"] if u["couplings"])
    assert "新 pkg 上" in zh_unit["rationale"] and "torch" not in zh_unit["rationale"]


def test_split_module_names_each_new_home(tmp_path: Path) -> None:
    two = "def alpha():\n    return 1\n\n\ndef beta():\n    return 2\n"
    up = _upstream(tmp_path, {"pkg/b.py": two})
    up.remove("pkg/b.py")
    up.write("pkg/_alpha.py", "def alpha():\n    return 1\n")
    up.write("pkg/_beta.py", "def beta():\n    return 2\n")
    up.commit("Split b")
    up.tag("v2")
    down = _downstream(tmp_path, {"plugin/use.py": "from pkg.b import beta\n"})
    report = _impact(tmp_path, up.path, "v1..v2", down)
    (c,) = _couplings(report, "plugin/use.py:1")
    assert c["action"] == "Shim" and c["upstream"] == "pkg/b.py::beta"
    changes = [ch for u in report["units"] for ch in u["changes"]]
    (change,) = [ch for ch in changes if ch["symbol"] == c["upstream"]]
    assert change["change"] == "removed"
    assert change["detail"].endswith("beta is now in pkg/_beta.py")


def test_deleted_reexport_module_breaks_its_imports(tmp_path: Path) -> None:
    up = _upstream(
        tmp_path, {"pkg/_core.py": CORE, "pkg/compat.py": "from pkg._core import X, make_x\n"}
    )
    up.remove("pkg/compat.py")
    up.commit("Drop the compat module")
    up.tag("v2")
    down = _downstream(tmp_path, {"plugin/use.py": "from pkg.compat import make_x\n"})
    report = _impact(tmp_path, up.path, "v1..v2", down)
    (c,) = _couplings(report, "plugin/use.py:1")
    assert (c["action"], c["upstream"]) == ("Shim", "pkg/compat.py::make_x")
    unit = next(u for u in report["units"] if u["couplings"])
    assert "pkg/compat.py (re-exported pkg._core.make_x) deleted in commit" in unit["rationale"]
    assert "make_x is now in pkg/_core.py" not in unit["rationale"]  # not added: no new home


def test_guarded_import_whose_fallback_works_is_not_shim(tmp_path: Path) -> None:
    up = _upstream(tmp_path, {"pkg/b.py": CORE})
    up.move("pkg/b.py", "pkg/_b.py")
    up.commit("Make b private")
    up.tag("v2")
    guarded = "try:\n    from pkg.b import X\nexcept ImportError:\n    from pkg._b import X\n"
    down = _downstream(tmp_path, {"plugin/use.py": guarded})
    report = _impact(tmp_path, up.path, "v1..v2", down)
    (c,) = _couplings(report, "plugin/use.py:2")
    assert (c["action"], c["rule"]) == ("Test", "removed.guarded")


def test_use_after_a_try_of_the_old_path_follows_the_fallback(tmp_path: Path) -> None:
    # httpx 0.11 -> 0.12 shape: the try imports the OLD path, the handler imports the name
    # from the package, which still re-exports it; a second module binds it from a fallback
    # module that the same commit deletes, so its fallback fails too
    init = "from pkg.b import X\n"
    up = _upstream(tmp_path, {"pkg/__init__.py": init, "pkg/b.py": CORE, "pkg/c.py": init})
    up.move("pkg/b.py", "pkg/_b.py")
    up.remove("pkg/c.py")
    up.write("pkg/__init__.py", "from pkg._b import X\n")
    up.commit("Make b private (#785)")
    up.tag("v2")
    try_old = "try:\n    from pkg.b import X\nexcept ImportError:\n    from pkg import {}\n"
    use = "\n\ndef make():\n    return X()\n"
    down = _downstream(
        tmp_path,
        {
            "plugin/works.py": try_old.format("X") + use,
            "plugin/fails.py": try_old.replace("from pkg import", "from pkg.c import").format("X")
            + use,
        },
    )
    report = _impact(tmp_path, up.path, "v1..v2", down)
    (use_ok,) = _couplings(report, "plugin/works.py:8")
    assert (use_ok["action"], use_ok["rule"]) == ("Test", "removed.guarded")
    assert _couplings(report, "plugin/works.py:4") == []  # pkg still binds X
    (fallback,) = _couplings(report, "plugin/fails.py:4")
    assert (fallback["action"], fallback["upstream"]) == ("Shim", "pkg/c.py::X")


def test_src_layout_modules_are_imported_without_src(tmp_path: Path) -> None:
    # werkzeug's shape: the package sits under src/, the downstream imports pkg.b
    up = RepoBuilder(tmp_path / "upstream")
    up.write("src/pkg/__init__.py", "")
    up.write("src/pkg/b.py", CORE)
    up.write("src/pkg/keep.py", "def keep():\n    return 1\n")
    up.commit("base")
    up.tag("v1")
    up.move("src/pkg/b.py", "src/pkg/_b.py")
    up.write("src/pkg/keep.py", "def keep():\n    return 2\n")
    up.commit("Make b private (#9)")
    up.tag("v2")
    use = "from pkg.b import X\nfrom pkg.keep import keep\n\nSIZE = keep()\n"
    down = _downstream(tmp_path, {"plugin/use.py": use})
    report = _impact(tmp_path, up.path, "v1..v2", down)
    assert report["warnings"] == []  # the downstream names the upstream package pkg
    (c,) = _couplings(report, "plugin/use.py:1")
    assert (c["action"], c["upstream"]) == ("Shim", "src/pkg/b.py::X")
    (kept,) = _couplings(report, "plugin/use.py:4")
    assert kept["upstream"] == "src/pkg/keep.py::keep" and kept["action"] != "Shim"


def _dropping_gone(root: Path, extra: dict[str, str]) -> RepoBuilder:
    """werkzeug 2.1.0's shape: ``pkg/sub/__init__.py`` re-exports ``Gone`` and ``Kept``;
    the change (not committed yet) deletes ``Gone``'s module and its re-export."""
    init = "from pkg.sub.old import Gone\nfrom pkg.sub.kept import Kept\n"
    files = {
        "pkg/sub/__init__.py": init,
        "pkg/sub/old.py": "class Gone:\n    pass\n",
        "pkg/sub/kept.py": "class Kept:\n    pass\n",
    }
    up = _upstream(root, {**files, **extra})
    up.remove("pkg/sub/old.py")
    up.write("pkg/sub/__init__.py", "from pkg.sub.kept import Kept\n")
    return up


def test_package_init_that_stops_reexporting_a_name_breaks_its_import(tmp_path: Path) -> None:
    # werkzeug 2.1.0's shape: wrappers/__init__.py stays and drops BaseRequest; a plain
    # module that drops an import (helpers.py) exports nothing by it
    helpers = "from pkg.sub.kept import Kept\n\n\ndef helper():\n    return Kept\n"
    up = _dropping_gone(tmp_path, {"pkg/helpers.py": helpers})
    up.write("pkg/helpers.py", "def helper():\n    return None\n")
    sha = up.commit("Drop Gone (#12)")
    up.tag("v2")
    use = "from pkg.sub import Gone, Kept\nfrom pkg.helpers import Kept as K2\n"
    down = _downstream(tmp_path, {"plugin/use.py": use})
    report = _impact(tmp_path, up.path, "v1..v2", down)
    found = {(c["upstream"], c["action"]) for c in _couplings(report, "plugin/use.py:1")}
    assert ("pkg/sub/__init__.py::Gone", "Shim") in found
    assert not any(u.endswith("::Kept") for u, _ in found)  # still re-exported
    unit = next(u for u in report["units"] if u["couplings"])
    assert (
        f"pkg/sub/__init__.py no longer re-exports pkg.sub.old.Gone since commit {sha[:12]}"
        in (unit["rationale"])
    )
    changes = {ch["symbol"] for u in report["units"] for ch in u["changes"]}
    assert "pkg/helpers.py::Kept" not in changes  # a plain module's import is not an export


def test_name_still_bound_at_the_old_path_is_not_gone(tmp_path: Path) -> None:
    # b.py becomes a package whose __init__ re-exports X (the commit's new end), and a
    # deleted module comes back later in the range (the range's end)
    up = _upstream(tmp_path, {"pkg/b.py": CORE, "pkg/compat.py": "from pkg.b import X\n"})
    up.move("pkg/b.py", "pkg/b/_impl.py")
    up.write("pkg/b/__init__.py", "from pkg.b._impl import X\n")
    up.remove("pkg/compat.py")
    up.commit("b becomes a package; drop compat")
    up.write("pkg/compat.py", "from pkg.b import X\n")
    up.commit("Restore compat")
    up.tag("v2")
    uses = "from pkg.b import X\nfrom pkg.compat import X as Y\n"
    down = _downstream(tmp_path, {"plugin/use.py": uses})
    report = _impact(tmp_path, up.path, "v1..v2", down)
    gone = {ch["symbol"] for u in report["units"] for ch in u["changes"]}
    assert "pkg/compat.py::X" in gone  # the deletion is reported as a change...
    assert "pkg/b.py::X" not in gone  # ...the re-exported X of the new package is not
    shims = [c for u in report["units"] for c in u["couplings"] if c["action"] == "Shim"]
    assert shims == []  # ...and compat is back at the end of the range


def test_first_parent_gives_one_unit_per_merged_pr(tmp_path: Path) -> None:
    up = _upstream(tmp_path, {"pkg/b.py": CORE})
    up.git("checkout", "-q", "-b", "feature")
    up.move("pkg/b.py", "pkg/_b.py")
    up.commit("Make b private")
    up.write("pkg/_b.py", CORE + "\n\ndef extra():\n    return 0\n")
    up.commit("Add extra")
    up.git("checkout", "-q", "main")
    up.git("merge", "-q", "--no-ff", "-m", "Merge pull request #42 from someone/feature", "feature")
    up.tag("v2")
    down = _downstream(tmp_path, {"plugin/use.py": "from pkg.b import X\n"})
    merged = _impact(tmp_path, up.path, "v1..v2", down, "--first-parent")
    assert [(u["pr"], u["title"]) for u in merged["units"]] == [
        (42, "Merge pull request #42 from someone/feature")
    ]
    assert merged["units"][0]["action"] == "Shim"
    assert (
        "in commit" in merged["units"][0]["rationale"]
        and "(#42)" in merged["units"][0]["rationale"]
    )
    every = _impact(tmp_path, up.path, "v1..v2", down)
    assert [u["title"] for u in every["units"]] == ["Make b private", "Add extra"]


def test_first_parent_merge_of_the_branch_the_start_was_tagged_on(tmp_path: Path) -> None:
    # werkzeug 2.0.3..2.1.0's shape: 2.0.3 is tagged on the 2.0.x branch, which main merges
    # later; the merge brings a file the start already had (no change of the range) and
    # one the start did not (main had edited it)
    two = "def make_x(n):\n    return n\n"
    up = _upstream(tmp_path, {"pkg/b.py": CORE, "pkg/c.py": two})
    up.git("checkout", "-q", "-b", "maint")
    fixed = CORE.replace("def make_x(n):", "def make_x(n, fill=0):")
    up.write("pkg/b.py", fixed)
    up.write("pkg/c.py", two.replace("(n)", "(n, k=1)"))
    up.commit("Fix make_x and c")
    up.tag("v1.0.1")
    up.git("checkout", "-q", "main")
    up.write("pkg/c.py", two + "\n\ndef other():\n    return 2\n")
    up.commit("Add other")
    up.git("merge", "-q", "--no-ff", "-m", "Merge branch 'maint'", "maint")
    up.tag("v2")
    use = "from pkg.b import make_x\nfrom pkg.c import make_x as c_make\n"
    down = _downstream(tmp_path, {"plugin/use.py": use})
    report = _impact(tmp_path, up.path, "v1.0.1..v2", down, "--first-parent")
    merge = next(u for u in report["units"] if u["title"] == "Merge branch 'maint'")
    assert "pkg/b.py" not in merge["files"]  # equal to v1.0.1's after the merge
    assert "pkg/c.py" in merge["files"]  # main's edit and the fix met only in the merge
    assert _couplings(report, "plugin/use.py:1") == []


def test_downstream_naming_no_upstream_symbol_is_warned(tmp_path: Path) -> None:
    up = _upstream(tmp_path, {"pkg/b.py": CORE})
    up.write("pkg/b.py", CORE + "\n\ndef extra():\n    return 0\n")
    up.commit("Add extra")
    up.tag("v2")
    down = _downstream(tmp_path, {"plugin/use.py": "import torch\n\nX = torch.ones(1)\n"})
    report = _impact(tmp_path, up.path, "v1..v2", down)
    (warning,) = [w for w in report["warnings"] if "names no symbol" in w]
    assert "upstream package pkg" in warning and "--upstream-package" in warning
    # naming the package the downstream really uses: no warning
    named = _impact(tmp_path, up.path, "v1..v2", down, "--upstream-package", "torch")
    assert not [w for w in named["warnings"] if "names no symbol" in w]


def test_bare_clone_is_read(tmp_path: Path) -> None:
    up = _upstream(tmp_path, {"pkg/b.py": CORE})
    up.move("pkg/b.py", "pkg/_b.py")
    up.commit("Make b private")
    up.tag("v2")
    bare = tmp_path / "bare.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(up.path), str(bare)], check=True)
    down = _downstream(tmp_path, {"plugin/use.py": "from pkg.b import X\n"})
    report = _impact(tmp_path, bare, "v1..v2", down)
    assert [c["action"] for c in _couplings(report, "plugin/use.py:1")] == ["Shim"]


@pytest.mark.parametrize("cached", [False, True])
def test_release_mode_reads_moves_from_the_symbol_diffs_indexes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cached: bool
) -> None:
    # a release diff (two revisions, no history) hands the symbol diff's indexes to the
    # module-move step, from memory (--no-cache) or from the cache: the same moves either way
    monkeypatch.setenv("INSTEP_CACHE_DIR", str(tmp_path / "cache"))
    up = _dropping_gone(tmp_path, {"pkg/b.py": CORE})
    up.move("pkg/b.py", "pkg/_impl/b.py")
    up.commit("Drop Gone, move b")
    up.tag("v2")
    use = "from pkg.sub import Gone, Kept\nfrom pkg.b import make_x\n"
    down = _downstream(tmp_path, {"plugin/use.py": use})
    out = tmp_path / "impact.json"
    args = ["impact", "--upstream-old", f"{up.path}@v1", "--upstream-new", f"{up.path}@v2"]
    args += ["--downstream", str(down), "--format", "json", "--out", str(out)]
    assert cli_run(args + ([] if cached else ["--no-cache"])) == 0
    report = json.loads(out.read_text(encoding="utf-8"))
    found = {(c["upstream"], c["action"]) for c in _couplings(report, "plugin/use.py:1")}
    assert ("pkg/sub/__init__.py::Gone", "Shim") in found
    assert not any(u.endswith("::Kept") for u, _ in found)
    moved = {(c["upstream"], c["action"]) for c in _couplings(report, "plugin/use.py:2")}
    assert ("pkg/b.py::make_x", "Shim") in moved
    details = [ch["detail"] for u in report["units"] for ch in u["changes"]]
    assert any("pkg/b.py (defined make_x) moved to pkg/_impl/b.py" in d for d in details)
