"""`instep impact` end to end on real git repositories and trees built in a temp dir."""

from __future__ import annotations

import json

import pytest

from .e2e_fixture import build_downstream, build_upstream


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    root = tmp_path_factory.mktemp("e2e")
    up = build_upstream(root / "pytorch")
    down = build_downstream(root / "torch_npu")
    return up.path, down


def _run_json(instep, *args: str) -> dict:
    res = instep(*args, "--format", "json")
    assert res.code == 0, res.err
    return json.loads(res.out)


def _unit(doc: dict, pr: int) -> dict:
    return next(u for u in doc["units"] if u["pr"] == pr)


def _kinds(unit: dict) -> set[str]:
    return {c["kind"] for c in unit["couplings"]}


@pytest.fixture(scope="module")
def commit_doc(pair, tmp_path_factory):
    from instep.cli import run as cli_run

    up, down = pair
    out = tmp_path_factory.mktemp("out") / "impact.json"
    code = cli_run(
        [
            "impact",
            "--upstream-git",
            str(up),
            "--range",
            "v1..v2",
            "--downstream",
            str(down),
            "--format",
            "json",
            "--out",
            str(out),
            "--no-cache",
        ]
    )
    assert code == 0
    return json.loads(out.read_text(encoding="utf-8"))


def test_one_unit_per_commit_with_pr_and_revert(commit_doc):
    prs = [u["pr"] for u in commit_doc["units"]]
    numbered = [p for p in prs if p in (101, 102, 103, 104, 105)]
    assert numbered[0] == 101 and numbered[-1] == 105
    assert sorted(set(numbered)) == [101, 102, 103, 104, 105]
    fix = _unit(commit_doc, 102)
    assert fix["reverted_by"]
    revert = next(u for u in commit_doc["units"] if u["title"].startswith("Revert"))
    assert revert["reverts"]


def test_expand_signature_is_shim_through_fork_and_registration(commit_doc):
    unit = _unit(commit_doc, 101)
    assert unit["action"] == "Shim" and unit["risk"] == "high" and unit["code_change"] == "yes"
    shim = [c for c in unit["couplings"] if c["action"] == "Shim"]
    assert any(c["downstream"].startswith("torch_npu/_inductor/lowering_fx.py:") for c in shim)
    assert any("implicit" in c["detail"] for c in shim)
    assert "registration" in _kinds(unit)
    # the test function the commit added, not its whole file (test_expand is unchanged)
    assert "test/inductor/test_lowering.py::test_expand_implicit" in unit["suggested_tests"]
    assert "test/inductor/test_lowering.py" not in unit["suggested_tests"]
    touched = next(t for t in unit["tests"] if t["test"].endswith("::test_expand_implicit"))
    assert (touched["kind"], touched["rule"]) == ("upstream", "commit.touched")
    # then the downstream test importing the module that registers its own expand
    assert unit["suggested_tests"][-1] == "test/_inductor/test_lowering_fx.py"
    assert "test/test_unrelated.py" not in unit["suggested_tests"]


def test_replacing_monkeypatch_masks_fix_and_revert_is_noted(commit_doc):
    unit = _unit(commit_doc, 102)
    patch = [c for c in unit["couplings"] if c["kind"] == "monkeypatch"]
    assert patch and patch[0]["downstream"].startswith("torch_npu/_inductor/plugin.py:")
    assert patch[0]["rule"] == "patch.replaces"
    assert "reverted" in unit["rationale"]


def test_config_default_change_reaches_config_writer(commit_doc):
    unit = _unit(commit_doc, 103)
    assert "config" in _kinds(unit)
    assert unit["action"] == "Test"


def test_removed_symbol_imported_downstream_is_shim(commit_doc):
    unit = _unit(commit_doc, 104)
    removed = [
        c for c in unit["couplings"] if c["upstream"] == "torch/_inductor/lowering.py::old_helper"
    ]
    assert removed and removed[0]["action"] == "Shim" and removed[0]["rule"] == "removed.breaks"
    assert removed[0]["downstream"].startswith("torch_npu/utils/dyn.py:")


def test_inherited_call_path_into_changed_helper(commit_doc):
    unit = _unit(commit_doc, 104)
    paths = [
        c for c in unit["couplings"] if c["upstream"] == "torch/_inductor/lowering.py::_validate"
    ]
    assert paths and all(c["kind"] == "inherited_path" for c in paths)
    assert any("make_fallback" in " ".join(c["chain"]) for c in paths)


def test_subclass_override_and_inherited_method(commit_doc):
    unit = _unit(commit_doc, 105)

    def kinds_of(up: str) -> dict[str, str]:
        return {c["kind"]: c["downstream"] for c in unit["couplings"] if c["upstream"] == up}

    load = kinds_of("torch/_inductor/codegen/triton.py::TritonKernel.load")
    assert load["subclass_override"].startswith("torch_npu/_inductor/codegen/triton.py:")
    body = kinds_of("torch/_inductor/codegen/simd.py::SIMDKernel.codegen_body")
    assert "inherited_path" in body
    # a downstream test importing the changed upstream module itself
    assert "test/_inductor/test_kernel.py" in unit["suggested_tests"]
    assert "test/test_unrelated.py" not in unit["suggested_tests"]


def test_release_mode_between_two_revisions(pair, instep):
    up, down = pair
    res = instep(
        "impact",
        "--upstream-old",
        f"{up}@v1",
        "--upstream-new",
        f"{up}@v2",
        "--downstream",
        str(down),
        "--no-cache",
        "--format",
        "json",
    )
    assert res.code == 0, res.err
    doc = json.loads(res.out)
    # the run ends by naming the first hotspot
    top = doc["hotspots"][0]
    assert f"start with {top['symbol']} ({top['at']})" in " ".join(res.err.split())
    assert doc["upstream"]["mode"] == "release"
    ids = {u["id"] for u in doc["units"]}
    assert "torch/_inductor/lowering.py" in ids
    low = next(u for u in doc["units"] if u["id"] == "torch/_inductor/lowering.py")
    assert low["action"] == "Shim"
    # the title names the symbols with the strongest couplings first
    shim = {c["upstream"].split("::")[1] for c in low["couplings"] if c["action"] == "Shim"}
    first = low["title"].split(": ", 1)[1].split(" (")[0]
    assert first in shim, (low["title"], shim)


def test_every_format_and_language(pair, instep, tmp_path):
    up, down = pair
    for fmt in ("md", "csv", "html"):
        out = tmp_path / f"impact.{fmt}"
        res = instep(
            "impact",
            "--upstream-git",
            str(up),
            "--range",
            "v1..v2",
            "--downstream",
            str(down),
            "--format",
            fmt,
            "--out",
            str(out),
            "--lang",
            "zh",
        )
        assert res.code == 0, res.err
        assert out.stat().st_size > 500
    md = (tmp_path / "impact.md").read_text(encoding="utf-8")
    assert "## 立即处理" in md and "| 编号 | 动作 |" not in md  # the unit table needs --all


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--upstream-git", "/nonexistent/x", "--range", "a..b"], "/nonexistent/x"),
        (["--upstream-old", "torch==2.13.0"], "no upstream given"),
        (["--upstream-git", "{up}", "--range", "v2..v1"], "v2..v1"),
        (["--upstream-git", "{up}", "--range", "v1..nosuchrev"], "nosuchrev"),
    ],
)
def test_bad_input_is_one_line(pair, instep, args, needle):
    up, down = pair
    args = [a.format(up=up) for a in args]
    res = instep("impact", *args, "--downstream", str(down))
    assert res.code == 2
    lines = res.err.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], res.err


def test_each_commit_lists_only_its_own_changes(commit_doc):
    # lowering.py changes in #101 and #104: each commit shows its own symbols only
    assert [c["symbol"] for c in _unit(commit_doc, 101)["changes"]] == [
        "torch/_inductor/lowering.py::expand"
    ]
    symbols_104 = {c["symbol"] for c in _unit(commit_doc, 104)["changes"]}
    assert "torch/_inductor/lowering.py::expand" not in symbols_104
    assert "torch/_inductor/lowering.py::old_helper" in symbols_104


def test_patch_series_mode(pair, instep, tmp_path):
    import subprocess

    up, down = pair
    series = tmp_path / "series"
    subprocess.run(["git", "format-patch", "-q", "-o", str(series), "v1..v2"], cwd=up, check=True)
    base = tmp_path / "base"
    subprocess.run(
        ["git", "worktree", "add", "-q", "--detach", str(base), "v1"], cwd=up, check=True
    )
    try:
        doc = _run_json(
            instep,
            "impact",
            "--upstream-old",
            str(base),
            "--patches",
            str(series),
            "--downstream",
            str(down),
            "--no-cache",
        )
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(base)], cwd=up, check=True)
    assert doc["upstream"]["mode"] == "patches"
    expand = next(u for u in doc["units"] if u["pr"] == 101)
    assert expand["unit_kind"] == "patch" and expand["action"] == "Shim"


def test_hotspots_name_downstream_functions_not_import_lines(commit_doc):
    spots = {s["symbol"]: s for s in commit_doc["hotspots"]}
    assert spots, "the downstream has Test and Shim places"
    assert not any(symbol.endswith("::<module>") for symbol in spots)
    expand = spots["torch_npu/_inductor/lowering_fx.py::_register_npu_lowerings.expand"]
    assert (expand["action"], expand["kinds"]) == ("Shim", ["registration"])
    load = spots["torch_npu/_inductor/codegen/triton.py::NPUTritonKernel.load"]
    assert load["kinds"] == ["subclass_override"]
    owners = {c["owner"] for u in commit_doc["units"] for c in u["couplings"]}
    assert "NPUTritonKernel.load" in owners and None in owners
