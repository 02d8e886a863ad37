"""The join's passes: one interface, one registry, one runner (issue #32).

Every coupling kind goes through the same four steps (a recogniser where the downstream
is read for it, a registered pass, rules, a doc line); the analysis runs the registry and
names no pass; the runner adds each pass's couplings in registry order whatever order the
passes end in, keeps a forked pass from the parent's later state, and a forked pass, run
in a child, inline or after its child died, gives the same couplings.
"""

from __future__ import annotations

import ast
import os
import re
import time
from collections.abc import Mapping
from pathlib import Path

import pytest

import instep
from instep.impact.analysis import _Analysis
from instep.impact.join import pass_runner
from instep.impact.join.coupling_book import CouplingBook
from instep.impact.join.pass_api import Findings, Found, JoinInputs, JoinPass
from instep.impact.join.registry import PASSES
from instep.impact.join.verdicts import rules
from instep.impact.model import CouplingKind
from instep.impact.request import ImpactRequest

DOCS = Path(__file__).resolve().parents[2] / "docs"
IMPACT = Path(instep.__file__).parent / "impact"
fork_only = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")


def _kind_table() -> set[str]:
    """The kinds of docs/impact.md's table "How a downstream place couples to a change"."""
    text = (DOCS / "impact.md").read_text(encoding="utf-8")
    section = text.split("### How a downstream place couples to a change", 1)[1].split("\n#", 1)[0]
    return set(re.findall(r"^\| `(\w+)` \|", section, re.MULTILINE))


def test_every_coupling_kind_has_a_pass_rules_and_a_doc_line() -> None:
    by_pass = {k for p in PASSES for k in p.kinds}
    by_rules = {k for r in rules() for k in r.kinds}
    kinds = {str(k) for k in CouplingKind}
    assert kinds - {str(k) for k in by_pass} == set(), "a kind no registered pass finds"
    assert kinds - by_rules == set(), "a kind no rule of verdict_rules.toml names"
    assert _kind_table() == kinds, "docs/impact.md's coupling kinds and CouplingKind differ"


def test_the_analysis_runs_the_registry_and_names_no_pass() -> None:
    pass_modules = {p.__module__ for p in PASSES}
    tree = ast.parse((IMPACT / "analysis.py").read_text(encoding="utf-8"))
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert "instep.impact.join.registry" in imported
    assert not imported & pass_modules, imported & pass_modules
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    assert not names & {p.__name__ for p in PASSES}


def test_a_pass_that_needs_a_later_one_is_refused() -> None:
    class Late(JoinPass):
        name = "late"
        kinds = frozenset({CouplingKind.FORK})
        needs = ("fork detection",)

        def run(self, inputs: JoinInputs, earlier: Mapping[str, Findings]) -> Findings:
            return Findings()

    with pytest.raises(ValueError, match="join pass 'late' needs"):
        pass_runner._check_order([Late(), *(p() for p in PASSES)])
    pass_runner._check_order([p() for p in PASSES])  # the registry itself is in order


# --- the runner on a real analysis ------------------------------------------------------


def _trees(root: Path) -> ImpactRequest:
    """An upstream release whose ``expand`` changes body, and a downstream that imports
    and calls it (one reference, one change)."""
    for side, body in (("old", "return x"), ("new", "return x.expand(sizes)")):
        lowering = root / side / "torch" / "_inductor" / "lowering.py"
        lowering.parent.mkdir(parents=True)
        (root / side / "torch" / "__init__.py").write_text("")
        (lowering.parent / "__init__.py").write_text("")
        lowering.write_text(f"def expand(x, sizes):\n    {body}\n")
    down = root / "down" / "torch_npu"
    down.mkdir(parents=True)
    (down / "__init__.py").write_text("")
    (down / "ops.py").write_text(
        "from torch._inductor.lowering import expand\n\n\ndef f(x):\n    return expand(x, 2)\n"
    )
    return ImpactRequest(
        downstream=str(root / "down"),
        upstream_old=str(root / "old"),
        upstream_new=str(root / "new"),
        use_cache=False,
    )


class _Same(JoinPass):
    """Finds the one change through the one reference (``detail`` says which pass), after
    ``delay`` seconds."""

    name = "same"
    kinds = frozenset({CouplingKind.IMPORT_USE})
    delay = 0.0
    counted_as: str | None = None

    def run(self, inputs: JoinInputs, earlier: Mapping[str, Findings]) -> Findings:
        time.sleep(self.delay)
        ref = next(r for r in inputs.references if r.target.endswith("expand"))
        (i, c) = inputs.changes.by_dotted["torch._inductor.lowering.expand"][0]
        return Findings([Found(i, c, ref, detail=f"found by {self.name}")], stats={self.name: 1})


class _SlowForked(_Same):
    name = "slow, forked"
    forked = True
    delay = 0.5
    counted_as = "slow_new"

    def run(self, inputs: JoinInputs, earlier: Mapping[str, Findings]) -> Findings:
        # a forked pass reads the fields only: the references are the parent's, later
        (i, c) = inputs.changes.by_dotted["torch._inductor.lowering.expand"][0]
        ref = next(r for f in inputs.down.files.values() for r in f.references)
        time.sleep(self.delay)
        return Findings([Found(i, c, ref, detail=f"found by {self.name}")], stats={self.name: 1})


class _Quick(_Same):
    name = "quick"
    counted_as = "quick_new"


def _run(tmp_path: Path, passes, jobs: int):
    analysis = _Analysis(_trees(tmp_path))
    analysis.jobs = jobs
    try:
        units, down = analysis._index_both(analysis.open())
        inputs = analysis.join_inputs(units, down)
        book = CouplingBook(inputs)
        report = pass_runner.run_passes(passes, inputs, book)
        return book.couplings(), report, inputs
    finally:
        analysis.close()


@fork_only
def test_couplings_are_added_in_registry_order_whatever_pass_ends_first(tmp_path) -> None:
    # the forked pass ends last, yet its coupling is the one kept: it is registered first
    couplings, report, _ = _run(tmp_path / "a", (_SlowForked, _Quick), jobs=2)
    (kept,) = [c for cs in couplings.values() for c in cs]
    assert kept.detail.startswith("found by slow, forked")
    assert report.stats == {"slow, forked": 1, "slow_new": 1, "quick": 1, "quick_new": 0}
    assert list(report.stats) == ["slow, forked", "slow_new", "quick", "quick_new"]
    # and the other way round, the other one
    couplings, report, _ = _run(tmp_path / "b", (_Quick, _SlowForked), jobs=2)
    (kept,) = [c for cs in couplings.values() for c in cs]
    assert kept.detail.startswith("found by quick")
    assert (report.stats["quick_new"], report.stats["slow_new"]) == (1, 0)


def test_with_one_job_a_forked_pass_runs_here_and_gives_the_same(tmp_path) -> None:
    forked, _, _ = _run(tmp_path / "forked", (_SlowForked, _Quick), jobs=2)
    inline, _, _ = _run(tmp_path / "inline", (_SlowForked, _Quick), jobs=1)
    assert [c.detail for cs in inline.values() for c in cs] == [
        c.detail for cs in forked.values() for c in cs
    ]


@fork_only
def test_a_forked_pass_may_not_read_a_late_service(tmp_path) -> None:
    class ReadsReferences(_Same):
        name = "reads references"
        forked = True

    with pytest.raises(RuntimeError, match=r"JoinInputs\.references is computed after"):
        _run(tmp_path, (ReadsReferences,), jobs=2)
    # the same pass, not forked, reads them
    couplings, _, inputs = _run(tmp_path / "here", (_Same,), jobs=2)
    assert len(inputs.references) == 2 and len(couplings) == 1
