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
    out["down"] = down
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
    # what changed, not the two full signatures (those are in --all's table and the JSON,
    # and folded away in the HTML)
    assert "signature `+ *, implicit=False`: does not accept keyword 'implicit'" in expand
    assert "(x, sizes) -> (x, sizes, *, implicit=False)" not in outputs["md"].split("## Test")[0]
    assert "(x, sizes, *, implicit=False)" in outputs["md_all"]
    details = re.search(r'<details class="signatures">(.*?)</details>', outputs["html"], re.S)
    assert "<code>(x, sizes)</code><br>→ <code>(x, sizes, *, implicit=False)</code>" in (
        details.group(1)
    )
    assert '<code class="delta">+ *, implicit=False</code>' in outputs["html"]
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
    # a patched Scheduler method reaches no operator: the smallest built-in case that
    # runs the scheduler on the device (stage.case, impact/data/builtin_cases.toml)
    assert "torch_npu/_inductor/plugin.py::<module>" in rows[0]
    assert rows[0].endswith(
        "| 2 | `instep run 'instep:smoke/test_l1_smoke.py::test_smoke[softmax_layernorm]'` |"
    )
    load = next(ln for ln in rows if "NPUTritonKernel.load" in ln)
    assert load.endswith(
        "| `instep run 'instep:smoke/test_l1_smoke.py::test_smoke[pointwise]'`;"
        " `instep run test/_inductor/test_kernel.py` (in the downstream checkout) |"
    )
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
    assert ids == [
        "counts-by-action",
        "act-now",
        "test-these",
        "debt",
        "adapted",
        "by-stage",
        "table",
    ]
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


def _counts_in_table(text: str) -> dict[str, tuple[int, int, int]]:
    rows = re.findall(
        r"^\| (Shim|Test|Check|all) \|[^|]*\| (\d+) \| (\d+) \| (\d+) \|$", text, re.M
    )
    return {r[0]: (int(r[1]), int(r[2]), int(r[3])) for r in rows}


def test_one_way_of_counting_in_every_format(outputs, tmp_path):
    """Units, couplings and places per action: the JSON's summary, and the same numbers
    at the top of the Markdown and the HTML, in the CSV's rows and the CLI summary."""
    import csv
    import io

    doc = json.loads(outputs["json"])
    counts = doc["summary"]["counts"]
    want = {a: (c["units"], c["couplings"], c["places"]) for a, c in counts.items()}
    want["all"] = tuple(sum(v[i] for v in want.values()) for i in range(3))
    assert want["all"] == (
        doc["summary"]["units"],
        doc["summary"]["couplings"],
        doc["summary"]["places"],
    )
    # recounted from the units: a unit and a place under their strongest coupling
    places: dict[str, int] = {}
    rank = {"Check": 0, "Test": 1, "Shim": 2}
    for u in doc["units"]:
        for c in u["couplings"]:
            if c["owner"] is None and c["kind"] == "import_use":
                continue  # an import line is no place
            place = c["downstream"].rsplit(":", 1)[0] + "::" + (c["owner"] or "<module>")
            places[place] = max(places.get(place, 0), rank[c["action"]])
    for action, r in rank.items():
        assert counts[action]["places"] == sum(1 for v in places.values() if v == r)
        assert counts[action]["units"] == sum(1 for u in doc["units"] if u["action"] == action)
    assert counts["Test"]["places"] > 0 and counts["Shim"]["units"] > 0
    # the top of the Markdown: the three definitions with their counts
    md = outputs["md"]
    head = md.split("## Act now", 1)[0]
    assert _counts_in_table(head) == want
    for action in ("Shim", "Test", "Check"):
        assert f"| {action} | {labels.SECTIONS['en']['means_' + action]} |" in head
    assert doc["definitions"]["actions"]["Test"] == labels.SECTIONS["en"]["means_Test"]
    assert doc["definitions"]["counting"] in head
    zh = _counts_in_table(outputs["md_zh"].replace("| 合计 |", "| all |"))
    assert zh == want
    # Act now and Test these count the same way
    assert (
        f"{counts['Shim']['couplings']} Shim coupling(s) at {counts['Shim']['places']} place(s)"
        in md
    )
    assert f"of {counts['Test']['places']} Test places" in md
    # the HTML's table
    html = outputs["html"]
    for action, (units, couplings, n_places) in want.items():
        row = re.search(rf'<tr data-action="{action}">(.*?)</tr>', html, re.S).group(1)
        got = [int(x) for x in re.findall(r'data-count="\w+">(\d+)<', row)]
        assert got == [units, couplings, n_places]
    # the CSV: one row per unit, with its couplings per action
    up = outputs["up"]
    path = tmp_path / "impact.csv"
    args = ["impact", "--upstream-git", str(up), "--range", "v1..v2", "--downstream"]
    args += [str(outputs["down"]), "--format", "csv", "--out", str(path), "--no-cache"]
    assert cli_run(args) == 0
    table = list(csv.reader(io.StringIO(path.read_text(encoding="utf-8-sig"))))
    head = next(i for i, r in enumerate(table) if not r[0].startswith("# "))  # the scope first
    rows = [dict(zip(table[head], r, strict=True)) for r in table[head + 1 :]]
    for action in ("Shim", "Test", "Check"):
        assert sum(1 for r in rows if r["Action"] == action) == counts[action]["units"]
        column = f"{action} couplings"
        assert sum(int(r[column]) for r in rows) == counts[action]["couplings"]


def test_the_cli_summary_counts_as_the_json(outputs, instep_proc):
    up = outputs["up"]
    args = ["impact", "--upstream-git", str(up), "--range", "v1..v2", "--downstream"]
    args += [str(outputs["down"]), "--format", "json", "--no-cache"]
    res = instep_proc(*args)
    assert res.code == 0, res.err
    counts = json.loads(res.out)["summary"]["counts"]
    text = " ".join(res.err.split())
    for what in ("units", "couplings", "places"):
        total = sum(c[what] for c in counts.values())
        parts = ", ".join(f"{a} {c[what]}" for a, c in counts.items())
        assert f"{total} {what}: {parts}" in text


def test_help_says_what_is_required_and_what_are_alternatives(instep):
    res = instep("impact", "--help")
    assert res.code == 0
    text = res.out
    assert "Required: --downstream, and the upstream in one of three ways" in text
    for line in (
        "release diff   --upstream-old X --upstream-new Y",
        "git range      --upstream-git PATH --range A..B",
        "patch series   --upstream-old X --patches DIR",
    ):
        assert line in text
    for action in ("Shim", "Test", "Check"):
        assert f"{action}  " in text or f"{action}   " in text
    assert "read and confirm: no code change or test needed" in text
