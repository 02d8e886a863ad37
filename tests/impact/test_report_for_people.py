"""The people's report (Markdown and HTML) on a real analysis: commit mode over a small real
git history (tests/impact/e2e_fixture.py) against a downstream tree with a dead version
gate and an already-adapted one. Sections come in order (act now, test these, compat debt,
already adapted, summary by stage), each Shim shows both sides, Test places are ranked,
the unit table waits for ``--all``, and ``--lang zh`` has the same structure.
"""

from __future__ import annotations

import json
import re
import subprocess

import pytest

from instep.cli import run as cli_run
from instep.impact.export import labels, sections

from .e2e_fixture import build_downstream, build_upstream

COMPAT = """\
import torch
from torch._inductor import lowering

if torch.__version__ < "2.5.0":
    OLD = True

if torch.__version__ >= "2.14":
    def npu_validate(x):
        return lowering._validate(x)
"""


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    """Every output of one commit-mode analysis, by name, plus the upstream repo path."""
    root = tmp_path_factory.mktemp("people")
    up = build_upstream(root / "pytorch")
    down = build_downstream(root / "torch_npu")
    (down / "torch_npu" / "_inductor" / "compat.py").write_text(COMPAT, encoding="utf-8")
    out = {}
    for name, fmt, extra in (
        ("json", "json", []),
        ("md", "md", []),
        ("md_all", "md", ["--all"]),
        ("md_zh", "md", ["--lang", "zh"]),
        ("html", "html", []),
        ("html_all", "html", ["--all"]),
    ):
        path = root / f"{name}.{fmt}"
        args = ["impact", "--upstream-git", str(up.path), "--range", "v1..v2"]
        args += ["--downstream", str(down), "--format", fmt, "--out", str(path), "--no-cache"]
        assert cli_run(args + extra) == 0
        out[name] = path.read_text(encoding="utf-8")
    out["up"] = up.path
    return out


def _line_of(repo, rev: str, path: str, needle: str) -> int:
    text = subprocess.run(
        ["git", "show", f"{rev}:{path}"], cwd=repo, capture_output=True, text=True, check=True
    ).stdout
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def _section(md: str, heading: str) -> str:
    return md.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]


def test_sections_come_in_order_and_the_unit_table_waits_for_all(outputs):
    md = outputs["md"]
    heads = re.findall(r"^## (.+)$", md, flags=re.M)
    assert heads == ["Act now", "Test these", "Compat debt", "Already adapted", "Summary by stage"]
    assert "| ID | Action |" not in md and "`--all`" in md
    heads_all = re.findall(r"^## (.+)$", outputs["md_all"], flags=re.M)
    assert heads_all == [*heads, "All units"]
    doc = json.loads(outputs["json"])
    table = [ln for ln in outputs["md_all"].splitlines() if ln.startswith("| ") and "#101" in ln]
    assert len(table) == 1  # the unit of PR #101 has its row in the full table
    assert table[0].count("(#101)") == 1  # the PR is not repeated after a title naming it
    assert len(doc["units"]) == 7  # JSON keeps every unit whatever the flag


def test_act_now_lists_every_shim_with_both_sides(outputs):
    doc = json.loads(outputs["json"])
    shims = [c for u in doc["units"] for c in u["couplings"] if c["action"] == "Shim"]
    lines = _section(outputs["md"], "Act now").strip().splitlines()[2:]
    assert len(lines) == len(shims) == 2
    up = outputs["up"]
    expand = next(ln for ln in lines if "::expand" in ln)
    new_line = _line_of(up, "v2", "torch/_inductor/lowering.py", "def expand(")
    assert expand.startswith("- **torch_npu/_inductor/lowering_fx.py:8**")
    assert f"at torch/_inductor/lowering.py:{new_line} (signature, #101)" in expand
    assert "`(x, sizes) -> (x, sizes, *, implicit=False)`" in expand
    assert "does not accept keyword 'implicit'" in expand
    removed = next(ln for ln in lines if "::old_helper" in ln)
    old_line = _line_of(up, "v1", "torch/_inductor/lowering.py", "def old_helper(")
    assert removed.startswith("- **torch_npu/utils/dyn.py:2**")
    assert f"at torch/_inductor/lowering.py:{old_line} (removed, #104)" in removed
    assert "signature" not in removed  # a removal has no signature to show
    # the breaking path in the new upstream is quoted; the removal's evidence only repeats
    # its own downstream place, which the line already shows
    assert "breaking path" not in expand and "breaking path" not in removed


def test_test_these_ranks_places_and_sinks_inherited_paths(outputs):
    rows = [
        ln
        for ln in _section(outputs["md"], "Test these").splitlines()
        if re.match(r"\| \d+ \|", ln)
    ]
    assert len(rows) == 4
    kinds = [re.search(r"\| (\w+) → ", ln).group(1) for ln in rows]
    # replacing and overriding places first, then inherited call paths; a config value
    # change weighs least (value changes: 0.5, export/priority.py's tuning pair)
    assert kinds == ["monkeypatch", "subclass_override", "inherited_path", "config"]
    # NPUTritonKernel inherits SIMDKernel.codegen_body, which its file never names and
    # which calls none of its overrides: Check (inherited.member_unnamed), not a place
    assert "codegen_body" not in _section(outputs["md"], "Test these")
    doc = json.loads(outputs["json"])
    body = [c for u in doc["units"] for c in u["couplings"] if "codegen_body" in c["upstream"]]
    assert sorted((c["kind"], c["action"], c["rule"]) for c in body) == [
        ("import_use", "Check", "use.member_unnamed"),  # the file imports TritonKernel
        ("inherited_path", "Check", "inherited.member_unnamed"),
    ]
    assert "torch_npu/_inductor/plugin.py::<module>" in rows[0] and rows[0].endswith("| 2 | none |")
    load = next(ln for ln in rows if "NPUTritonKernel.load" in ln)
    assert load.endswith("| test/_inductor/test_kernel.py |")
    priorities = [float(ln.split(" | ")[1]) for ln in rows]
    assert priorities == sorted(priorities, reverse=True)
    # the adapted coupling (behind the >= 2.14 gate) is not a place to test
    assert "compat.py" not in _section(outputs["md"], "Test these")


def test_compat_debt_and_adapted_gates_are_shown(outputs):
    debt = _section(outputs["md"], "Compat debt")
    assert (
        "- torch_npu/_inductor/compat.py:4 `torch.__version__ < '2.5.0'`: is always false" in debt
    )
    adapted = _section(outputs["md"], "Already adapted")
    assert "- torch_npu/_inductor/compat.py:7 `torch.__version__ >= '2.14'` (version_compare)" in (
        adapted
    )
    assert "covers `torch/_inductor/lowering.py::_validate` [adapted.version_gate]" in adapted


def test_summary_by_stage_counts_check_units_by_file(outputs):
    doc = json.loads(outputs["json"])
    stage = _section(outputs["md"], "Summary by stage")
    assert "| stage | Shim | Test | Check units | Check files |" in stage
    checks = [u for u in doc["units"] if u["action"] == "Check"]
    files = {c["symbol"].split("::")[0] for u in checks for c in u["changes"]}
    rows = re.findall(r"^\| (\w+) \| (\d+) \| (\d+) \| (\d+) \| (\d+) \|$", stage, flags=re.M)
    assert sum(int(r[3]) for r in rows) == len(checks)
    assert sum(int(r[4]) for r in rows) == len(files)


def test_chinese_report_has_the_same_structure(outputs):
    en, zh = outputs["md"], outputs["md_zh"]
    assert re.findall(r"^## (.+)$", zh, flags=re.M) == [
        "立即处理",
        "需要测试",
        "兼容债",
        "已适配",
        "按编译阶段汇总",
    ]

    def shape(md: str) -> list[str]:
        return [ln[:2] for ln in md.splitlines() if ln[:2] in ("##", "- ", "| ", "> ")]

    assert shape(zh) == shape(en)
    assert "| 编译阶段 | Shim | Test | Check 单元 | Check 文件 |" in zh


def test_html_sections_and_table_rows(outputs):
    html = outputs["html"]
    ids = re.findall(r'<section id="([\w-]+)">', html)
    assert ids == ["act-now", "test-these", "debt", "adapted", "by-stage", "table"]
    doc = json.loads(outputs["json"])

    def rows(page: str) -> list[list]:
        blob = page.split('<script id="impact-data" type="application/json">', 1)[1]
        return json.loads(blob.split("</script>", 1)[0])["units"]

    coupled = [u for u in doc["units"] if u["couplings"]]
    assert len(rows(html)) == len(coupled) < len(doc["units"]) == len(rows(outputs["html_all"]))
    assert [r[3] for r in rows(html)][:2] == ["Shim", "Shim"]  # Shim first
    assert '"chain"' not in html  # fields the page never reads stay in the JSON export


def test_empty_suggestions_say_why_and_how_to_get_some():
    wheels = labels.tests_note_text(sections.TestsNote(10, 10, 0, 0), "en")
    assert wheels.startswith("10 of 10 unit(s) that need a test have no suggested test")
    assert "wheels ship none" in wheels and "--upstream-tests" in wheels
    assert "`--downstream` a checkout" in wheels
    trees = labels.tests_note_text(sections.TestsNote(3, 2, 40, 5), "en")
    assert "no test file names or imports" in trees and "--upstream-tests" not in trees
    assert "wheel 不带测试" in labels.tests_note_text(sections.TestsNote(1, 1, 0, 3), "zh")
