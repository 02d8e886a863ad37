"""Version checks that refuse the new upstream (``downstream/version_refusals.py``), found
through ``instep impact --upstream-git`` on a real upstream repository whose version goes
2.1.1 -> 2.2.0 and a real downstream tree; reported as a release-level list, first under
"Act now"."""

from __future__ import annotations

import textwrap

import pytest

from instep.cli import run as cli_run

from .gitrepo import RepoBuilder, impact_of_commit

LOWERING = "def lower(x):\n    return x\n"

DOWN = {
    # DICP's allow-list (dicp/dynamo_bridge/compile_fx.py:18-25) and its flags
    "torch_npu/allow_list.py": textwrap.dedent(
        """
        import torch
        from torch._inductor.lowering import lower

        is_torch_200 = False
        is_torch_210 = False
        if torch.__version__.startswith("2.0"):
            is_torch_200 = True
        elif torch.__version__.startswith("2.1"):
            is_torch_210 = True
        else:
            raise ValueError(f"unsupported torch version: {torch.__version__}")


        def fake_mode(inputs):
            if is_torch_200:
                return lower(inputs)
            elif is_torch_210:
                return inputs
            else:
                raise ValueError("unsupported torch version")
        """
    ),
    "torch_npu/accepts.py": textwrap.dedent(
        """
        import torch

        if torch.__version__.startswith("2.1"):
            X = 1
        elif torch.__version__.startswith("2.2"):
            X = 2
        else:
            raise ValueError("unsupported torch version")
        """
    ),
    "torch_npu/asserts.py": textwrap.dedent(
        """
        import torch

        TORCH_VERSION = tuple(int(p) for p in torch.__version__.split(".")[:2])
        assert TORCH_VERSION < (2, 2), "torch 2.2 is not supported yet"
        """
    ),
    "torch_npu/old_too.py": textwrap.dedent(
        """
        import torch

        if not torch.__version__.startswith("2.0"):
            raise ImportError("needs torch 2.0")
        """
    ),
    "torch_npu/in_function.py": textwrap.dedent(
        """
        import sys

        import torch
        from packaging.version import Version


        class Backend:
            def __init__(self):
                if Version(torch.__version__) >= Version("2.2"):
                    raise NotImplementedError("no 2.2 support")


        def main():
            if torch.__version__[:3] not in ("2.0", "2.1"):
                sys.exit(1)
        """
    ),
    "torch_npu/undecided.py": textwrap.dedent(
        """
        import os

        import torch

        if os.environ.get("STRICT") and torch.__version__ >= "2.2":
            raise RuntimeError("strict mode refuses 2.2")
        try:
            if torch.__version__ >= "2.2":
                raise ValueError("caught below")
        except ValueError:
            pass
        """
    ),
}


@pytest.fixture(scope="module")
def doc(tmp_path_factory):
    root = tmp_path_factory.mktemp("refusals")
    return impact_of_commit(
        root,
        {"torch/version.py": "__version__ = '2.1.1'\n", "torch/_inductor/lowering.py": LOWERING},
        {"torch/version.py": "__version__ = '2.2.0'\n"},
        "Release 2.2.0",
        DOWN,
    )


def _at(doc: dict) -> dict[str, dict]:
    return {r["at"]: r for r in doc["refusals"]}


def test_module_level_else_raise_refusing_the_new_version_is_reported_first(doc):
    assert doc["upstream"]["old_version"] == "2.1.1"
    assert doc["upstream"]["new_version"] == "2.2.0"
    first = doc["refusals"][0]
    assert first == {
        "at": "torch_npu/allow_list.py:12",
        "condition": "not (torch.__version__.startswith('2.0')) and not "
        "(torch.__version__.startswith('2.1'))",
        "raises": "ValueError(f'unsupported torch version: {torch.__version__}')",
        "scope": "module",
    }


def test_a_flag_set_in_a_version_branch_decides_a_check_in_a_function(doc):
    r = _at(doc)["torch_npu/allow_list.py:21"]
    assert r["scope"] == "fake_mode"
    assert r["condition"] == "not (is_torch_200) and not (is_torch_210)"


def test_a_chain_that_accepts_the_new_version_is_not_reported(doc):
    assert not [a for a in _at(doc) if a.startswith("torch_npu/accepts.py")]


def test_an_assert_on_a_torch_version_tuple_is_reported(doc):
    r = _at(doc)["torch_npu/asserts.py:5"]
    assert r["scope"] == "module"
    assert r["raises"] == "AssertionError('torch 2.2 is not supported yet')"
    assert r["condition"] == "not (TORCH_VERSION < (2, 2))"


def test_a_check_that_refused_the_old_version_too_is_not_new(doc):
    assert not [a for a in _at(doc) if a.startswith("torch_npu/old_too.py")]


def test_checks_in_functions_name_the_function(doc):
    at = _at(doc)
    assert at["torch_npu/in_function.py:11"]["scope"] == "Backend.__init__"
    assert at["torch_npu/in_function.py:16"]["scope"] == "main"
    assert at["torch_npu/in_function.py:16"]["raises"] == "sys.exit(1)"


def test_unknown_conditions_and_caught_refusals_are_not_reported(doc):
    assert not [a for a in _at(doc) if a.startswith("torch_npu/undecided.py")]


def test_the_summary_counts_refusals_and_module_level_ones(doc):
    assert len(doc["refusals"]) == 5
    assert [r["scope"] for r in doc["refusals"]][:2] == ["module", "module"]
    assert doc["summary"]["refusals"] == 5
    assert doc["summary"]["module_refusals"] == 2


@pytest.mark.parametrize("fmt,lang", [("md", "en"), ("md", "zh"), ("html", "en")])
def test_the_report_for_people_lists_refusals_first_under_act_now(tmp_path, fmt, lang):
    up = RepoBuilder(tmp_path / "pytorch")
    up.write("torch/__init__.py", "__version__ = '2.1.1'\n")  # no torch/version.py
    up.write("torch/_inductor/__init__.py", "")
    up.write("torch/_inductor/lowering.py", LOWERING)
    up.commit("base")
    up.tag("v1")
    up.write("torch/__init__.py", "__version__ = '2.2.0'\n")
    up.commit("Release 2.2.0")
    up.tag("v2")
    down = tmp_path / "down"
    for rel in ("torch_npu/__init__.py", "torch_npu/allow_list.py"):
        (down / rel).parent.mkdir(parents=True, exist_ok=True)
        (down / rel).write_text(DOWN.get(rel, ""), encoding="utf-8")
    out = tmp_path / f"impact.{fmt}"
    args = ["impact", "--upstream-git", str(up.path), "--range", "v1..v2", "--downstream"]
    args += [str(down), "--format", fmt, "--lang", lang, "--out", str(out), "--no-cache"]
    assert cli_run(args) == 0
    text = out.read_text(encoding="utf-8")
    act = text.index("立即处理" if lang == "zh" else "Act now")
    first = text.index("torch_npu/allow_list.py:12")
    assert act < first < text.index("需要测试" if lang == "zh" else "Test these")
    count = (
        "2 处版本检查拒绝 torch 2.2.0，而放行 2.1.1（其中 1 处在模块级）"
        if lang == "zh"
        else "2 version check(s) refuse torch 2.2.0 and let 2.1.1 through (1 at module level)"
    )
    assert count in text
    assert text.index("torch_npu/allow_list.py:12") < text.index("torch_npu/allow_list.py:21")
    if fmt == "html":  # no Markdown backticks in the page
        assert "(fails when fake_mode is called)" in text


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_a_name_derived_from_the_version_deep_in_a_module_makes_a_flag(newline):
    """``TV = Version(torch.__version__)`` below a long literal, at any line break the
    parser knows, makes ``TV`` a current-version name (only the lines saying "version"
    are walked to find it)."""
    import ast

    from instep.impact.downstream.version_refusals import version_flags

    table = "".join(f"    'k{i}': {i},{newline}" for i in range(50))
    src = newline.join(
        [
            "import torch",
            "from packaging.version import Version",
            "TABLE = {",
            table + "}",
            "TV = [",
            "    1,",
            "    Version(torch.__version__),",
            "][1]",
            "OLD = TV < Version('2.2')",
            "",
        ]
    )
    flags = version_flags(ast.parse(src), src)
    assert "OLD" in flags
