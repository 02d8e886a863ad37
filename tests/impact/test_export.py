"""Exporters render one report faithfully in every format and language."""

from __future__ import annotations

import csv
import io
import json

import pytest

from instep.errors import BadInput
from instep.impact.export import render, write
from instep.impact.join.verdicts import decide, judge_unit
from instep.impact.model import (
    ChangeKind,
    CouplingKind,
    ImpactReport,
    Reference,
    Stage,
    SymbolChange,
    UpstreamChange,
)
from instep.pyindex.model import Symbol, SymbolKind

PATH = "torch/_inductor/lowering.py"


def _report(lang: str = "en") -> ImpactReport:
    old = Symbol(PATH, "expand", SymbolKind.FUNCTION, 1, 2, signature="x, sizes")
    new = Symbol(PATH, "expand", SymbolKind.FUNCTION, 1, 2, signature="x, sizes, *, implicit=False")
    change = SymbolChange(
        PATH,
        "expand",
        ChangeKind.SIGNATURE,
        SymbolKind.FUNCTION,
        Stage.INDUCTOR,
        old=old,
        new=new,
        detail="(x, sizes) -> (x, sizes, *, implicit=False)",
    )
    ref = Reference(
        CouplingKind.REGISTRATION,
        "op:aten.expand",
        "torch_npu/_inductor/lowering_fx.py",
        948,
        "def expand(x, sizes): <script>alert(1)</script> | pipe",
        signature="x, sizes",
        matched_version="old",
    )
    unit = UpstreamChange(
        "torch/_inductor/lowering.py",
        "lowering | expand",
        "file",
        files=[PATH],
        changes=[change],
        pr=123,
    )
    quiet = SymbolChange(
        "torch/_dynamo/x.py", "f", ChangeKind.BODY, SymbolKind.FUNCTION, Stage.DYNAMO
    )
    units = [
        judge_unit(unit, [decide(change, ref)], lang=lang, suggested_tests=["test/x.py"]),
        judge_unit(
            UpstreamChange("torch/_dynamo/x.py", "x", "file", changes=[quiet]), [], lang=lang
        ),
    ]
    return ImpactReport(
        upstream={"mode": "release", "old": "torch==2.13.0", "new": "torch==2.14.1"},
        downstream={"source": "torch-npu==2.13.0", "files": 2, "references": 1},
        units=units,
        compat_debt=[
            {
                "at": "torch_npu/a.py:3",
                "condition": "TORCH_VERSION < (2, 10)",
                "kind": "version_compare",
                "reason": "always false",
            }
        ],
        warnings=["skipped x.py: syntax error"],
        generated_at="2026-11-29T00:00:00Z",
        lang=lang,
    )


def test_json_schema_fields():
    doc = json.loads(render(_report(), "json"))
    assert doc["schema"] == "instep.impact/4"
    unit = doc["units"][0]
    for key in (
        "id",
        "title",
        "upstream",
        "action",
        "risk",
        "code_change",
        "test_needed",
        "stage",
        "couplings",
        "suggested_tests",
        "tests",
        "rationale",
    ):
        assert key in unit
    assert unit["upstream"] == ["torch/_inductor/lowering.py::expand (signature)"]
    c = unit["couplings"][0]
    assert (
        c["kind"] == "registration" and c["downstream"] == "torch_npu/_inductor/lowering_fx.py:948"
    )
    assert c["upstream"] == "torch/_inductor/lowering.py::expand"
    assert (c["action"], c["risk"], c["code_change"]) == ("Shim", "high", "yes")
    assert doc["summary"]["by_action"] == {"Check": 1, "Shim": 1}


def test_json_puts_each_unit_on_a_line_of_its_own():
    report = _report("zh")
    text = render(report, "json")
    doc = json.loads(text)
    lines = text.splitlines()
    assert lines[0] == "{" and lines[-1] == "}"
    # every unit is one line that parses alone; a line per top-level key otherwise
    unit_lines = [line.rstrip(",").strip() for line in lines if line.startswith('  {"id"')]
    assert [json.loads(line) for line in unit_lines] == doc["units"]
    assert len(lines) == 2 + len(doc) + sum(
        len(v) + 1 for v in doc.values() if isinstance(v, list) and v
    )
    assert "\\u" not in text  # ensure_ascii is off: Chinese stays readable
    assert json.loads(render(_report(), "json"))["warnings"] == ["skipped x.py: syntax error"]


def test_markdown_is_the_seed_table_and_escapes_pipes():
    assert "| ID | Action |" not in render(_report(), "md")  # the table only with --all
    md = render(_report(), "md", all_units=True)
    assert "| ID | Action | Summary | Analysis | Risk | Code change | Test | Stage |" in md
    row = next(line for line in md.splitlines() if line.startswith("| torch/_inductor/lowering.py"))
    assert "lowering \\| expand (#123)" in row
    assert row.count(" | ") == 7  # eight cells, none broken by the '|' in the title
    zh = render(_report("zh"), "md", all_units=True)
    assert "| 编号 | 动作 | 摘要 | 分析 | 风险 | 是否改码 | 是否需测试 | 编译阶段 |" in zh
    assert "| 是 | 是 | compile_stage：Inductor |" in zh


def test_csv_round_trips_through_a_csv_reader(tmp_path):
    out = tmp_path / "impact.csv"
    write(_report("zh"), "csv", out)
    raw = out.read_bytes()
    assert raw.startswith(b"\xef\xbb\xbf")  # BOM: spreadsheets detect UTF-8
    rows = list(csv.reader(io.StringIO(raw.decode("utf-8-sig"))))
    assert rows[0][:3] == ["编号", "动作", "摘要"]
    assert rows[1][1] == "Shim" and "lowering_fx.py:948" in rows[1][9]
    assert len(rows) == 3


def test_html_is_self_contained_and_inert(tmp_path):
    html = render(_report(), "html")
    assert "<script>alert(1)</script>" not in html
    assert "http://" not in html and "https://" not in html  # no CDN, works offline
    assert 'id="impact-data"' in html and "f-kind" in html


def test_unknown_format_is_one_line():
    with pytest.raises(BadInput, match="--format: expected one of md, csv, json, html"):
        render(_report(), "xls")


def test_unwritable_output_is_one_line(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(BadInput, match="cannot write"):
        write(_report(), "json", blocker / "sub" / "out.json")


def _hotspot_report() -> ImpactReport:
    """Three upstream units reaching three downstream places, one of them at module level."""
    path = "torch/_inductor/codegen/simd.py"

    def change(qual: str, kind: ChangeKind) -> SymbolChange:
        sym = Symbol(path, qual, SymbolKind.FUNCTION, 1, 2, signature="self")
        return SymbolChange(path, qual, kind, SymbolKind.FUNCTION, Stage.INDUCTOR, old=sym, new=sym)

    def ref(kind: CouplingKind, target: str, line: int, owner: str | None) -> Reference:
        return Reference(kind, target, "torch_npu/codegen.py", line, "x", owner=owner)

    body_a = change("SIMDKernel.a", ChangeKind.BODY)
    body_b = change("SIMDKernel.b", ChangeKind.BODY)
    removed = change("SIMDKernel.c", ChangeKind.REMOVED)
    shared, lone = "NPUKernel.codegen", "NPUKernel.other"
    units = [
        # unit 1 and 2 both reach NPUKernel.codegen; unit 3 reaches NPUKernel.other (Shim)
        UpstreamChange("u1", "a", "class", changes=[body_a]),
        UpstreamChange("u2", "b", "class", changes=[body_b]),
        UpstreamChange("u3", "c", "class", changes=[removed]),
    ]
    couplings = [
        [
            decide(body_a, ref(CouplingKind.INHERITED_PATH, "x.SIMDKernel.a", 10, shared)),
            decide(body_a, ref(CouplingKind.IMPORT_USE, "x.SIMDKernel", 1, None)),  # module
        ],
        [decide(body_b, ref(CouplingKind.INHERITED_PATH, "x.SIMDKernel.b", 11, shared))],
        [decide(removed, ref(CouplingKind.IMPORT_USE, "x.SIMDKernel.c", 20, lone))],
    ]
    return ImpactReport(
        upstream={"mode": "release", "old": "a", "new": "b"},
        downstream={"source": "d", "files": 1, "references": 4},
        units=[judge_unit(u, cs) for u, cs in zip(units, couplings, strict=True)],
    )


def test_hotspots_rank_downstream_symbols_by_upstream_units_reaching_them():
    report = _hotspot_report()
    couplings = [c for u in report.units for c in u.couplings]
    assert [c.action.value for c in couplings] == ["Test", "Test", "Test", "Shim"]
    spots = report.hotspots()
    # two units beat one Shim; the module-level import line is not a place to read
    assert [(s["symbol"], s["units"], s["action"]) for s in spots] == [
        ("torch_npu/codegen.py::NPUKernel.codegen", 2, "Test"),
        ("torch_npu/codegen.py::NPUKernel.other", 1, "Shim"),
    ]
    assert spots[0]["at"] == "torch_npu/codegen.py:10" and spots[0]["unit_ids"] == ["u1", "u2"]
    doc = json.loads(render(report, "json"))
    assert doc["hotspots"] == spots
    owners = {c["downstream"]: c["owner"] for c in doc["units"][0]["couplings"]}
    assert owners == {
        "torch_npu/codegen.py:10": "NPUKernel.codegen",
        "torch_npu/codegen.py:1": None,
    }
    # the people's report ranks Test places instead: the shared place first, with 2 units
    md = render(report, "md")
    first = next(line for line in md.splitlines() if line.startswith("| 1 |"))
    assert "`torch_npu/codegen.py::NPUKernel.codegen` torch_npu/codegen.py:1" in first
    assert first.endswith("| 2 | none |")
