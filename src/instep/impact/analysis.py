"""Wire the impact pipeline: sources -> symbol diff -> coupling index -> join -> verdicts.

``analyse(ImpactRequest) -> ImpactReport`` is what ``instep impact`` and the tests call.
This module runs the steps in order (the upstream units and their symbol diff:
``upstream/units.py``; the downstream index, overlapped with it; the join: the passes of
``join/registry.py`` run by ``join/pass_runner.py``, of which it knows none by name; the
unit verdicts, suggested tests, compat debt and refusals) and keeps timings and stats,
and answers a release it has seen with the same inputs from the remembered report
(``report_memo``). Each step lives in its own module; none of them imports analysed code.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Container
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from fnmatch import fnmatch
from pathlib import Path
from typing import TypeVar

from instep.impact.downstream import coupling_index, version_gates, version_refusals
from instep.impact.downstream.scope import MemberNames
from instep.impact.join.coupling_book import CouplingBook
from instep.impact.join.pass_api import JoinInputs, PassSources, Snapshots
from instep.impact.join.pass_runner import Started, run_passes, start_early
from instep.impact.join.probe_outcomes import ProbeOutcomes, stub_reader
from instep.impact.join.registry import PASSES
from instep.impact.join.route_conditions import RouteConditions
from instep.impact.join.test_suggestions import (
    DownstreamOps,
    DownstreamTests,
    TestSuggester,
    unique_tests,
    upstream_test_records,
)
from instep.impact.join.upstream_calls import UpstreamCalls
from instep.impact.join.verdicts import judge_unit
from instep.impact.logged_warnings import collect_warnings
from instep.impact.model import (
    Coupling,
    Impact,
    ImpactReport,
    Scope,
    SuggestedTest,
    SymbolChange,
    UnitKind,
    UpstreamChange,
)
from instep.impact.no_gc import collected_after, give_back_heap, no_cyclic_gc
from instep.impact.report_memo import ReportMemo, report_key
from instep.impact.request import ImpactRequest
from instep.impact.upstream import sources, stages
from instep.impact.upstream.op_reach import OpReach
from instep.impact.upstream.opinfo_index import read_index
from instep.impact.upstream.release_diff import default_jobs
from instep.impact.upstream.resolver import UpstreamResolver
from instep.impact.upstream.sources import is_test_path
from instep.impact.upstream.units import UpstreamSide, release_title
from instep.impact.upstream.versions import snapshot_build, snapshot_version
from instep.pyindex.cache import ContentCache

T = TypeVar("T")

log = logging.getLogger(__name__)


# --- the analysis ------------------------------------------------------------------------


class _Analysis:
    def __init__(self, req: ImpactRequest) -> None:
        self.req = req
        self.mode = req.mode()
        self.jobs = req.jobs or default_jobs()
        self._names_memo: dict[str, MemberNames] = {}
        root = req.cache_dir if req.use_cache else None
        self.cache_root = root
        self.stage_of = lambda path: stages.stage_for(path, req.stage_map or None)
        self.timings: dict[str, float] = {}
        self.stats: dict[str, object] = {}
        self.up = UpstreamSide(req, self.jobs, self.cache_root, self.stage_of, self.stats)
        self.remember: tuple[object, str] | None = None  # (ReportMemo, key) to store under
        self.scope_fields: dict[str, object] = {}  # the report's scope, as the passes fill it

    def _timed(self, name: str, start: float) -> None:
        self.timings[name] = round(time.perf_counter() - start, 3)

    def _timed_stage(self, name: str, stage: Callable[[], T]) -> T:
        start = time.perf_counter()
        try:
            return stage()
        finally:
            self._timed(name, start)

    # downstream ----------------------------------------------------------------------

    def _upstream_name(self) -> str:
        """What the rule texts call the upstream ("a TypeError on the new torch"): torch
        when it is among the upstream packages (``run`` sets them first), else the first."""
        return "torch" if "torch" in self.roots or not self.roots else self.roots[0]

    def _downstream_snapshot(self):
        if getattr(self, "down_snapshot", None) is None:
            cache_dir = self.req.cache_dir or Path(".instep-cache")
            # beside the source files, those the passes read that are not Python (the
            # backend's yaml and C++ files for its registered kernels)
            suffixes = tuple(s for p in PASSES for s in p.lists)
            self.down_snapshot = sources.open_snapshot(
                self.req.downstream, cache_dir, also=lambda path: path.endswith(suffixes)
            )
        return self.down_snapshot

    def pass_sources(self) -> PassSources:
        """What the early passes read (join/pass_api.py): the snapshots, open."""
        up, name = self.up, self._upstream_name()
        labels = {
            side: f"{name} {_v(version)}" if version else str(up.labels.get(side, side))
            for side, version in (("old", self.old_version), ("new", self.new_version))
        }
        return PassSources(
            snapshots=Snapshots(up.old, up.new, self._downstream_snapshot()),
            mode=self.mode,
            labels=labels,
            excluded=up.excluded,
            cache_root=self.cache_root,
        )

    def _memo_key(self) -> str | None:
        """Key of the whole report (release diffs with a cache; see report_memo)."""
        if self.mode != "release" or self.cache_root is None:
            return None
        req = self.req
        request = {
            "mode": self.mode,
            "lang": req.lang,
            "stage_map": sorted(req.stage_map.items()),
            "exclude": list(req.exclude),
            "min_supported": req.min_supported,
            "large_file_changes": req.large_file_changes,
            "upstream_packages": list(req.upstream_packages),
            "labels": sorted(self.up.labels.items()),
        }
        # what the passes read that no snapshot lists (shared objects), by identity
        sources = self.pass_sources()
        request["passes"] = [[p.name, p().identity(sources)] for p in PASSES]
        old, new, down = self.up.old, self.up.new, self._downstream_snapshot()
        return report_key(
            request,
            [
                ("old", old, old.paths()),
                ("new", new, new.paths()),
                ("downstream", down, down.paths()),
            ],
        )

    def downstream_index(self):
        snap = self._downstream_snapshot()
        items = [
            (p, snap.read(p)) for p in snap.paths() if p.endswith(".py") and not self.up.excluded(p)
        ]
        cache = ContentCache(self.cache_root, "downstream") if self.cache_root else None
        index = coupling_index.index_downstream(
            items, upstream_roots=self.roots, cache=cache, jobs=self.jobs
        )
        self.stats["downstream_files"] = len(items)
        self.down_tests = self._downstream_tests(snap)
        self.stats["downstream_tests"] = self.down_tests.count
        return index

    def _downstream_tests(self, snap) -> DownstreamTests:
        """The downstream's test files (not indexed), by what they import."""
        paths = [
            p
            for p in snap.paths()
            if p.endswith(".py")
            and is_test_path(p)
            and not any(fnmatch(p, pat) for pat in self.req.exclude)
        ]
        return DownstreamTests((p, snap.read(p).decode("utf-8", "replace")) for p in paths)

    # join ----------------------------------------------------------------------------

    def join_inputs(self, units: list[UpstreamChange], down) -> JoinInputs:
        """What every join pass reads (join/pass_api.py)."""
        snap, up = self._downstream_snapshot(), self.up
        return JoinInputs(
            units=units,
            resolver=UpstreamResolver(up.new.paths(), up.new_index),
            calls=UpstreamCalls(up.new.paths(), up.new_bytes),
            down=down,
            snapshots=Snapshots(up.old, up.new, snap),
            lines_of=up.lines_of,
            read_down=self._read_down,
            names_in=self._names_in,
            new_index=up.new_index,
            probes=self._probes(),
            new_version=self.new_version,
            jobs=self.jobs,
            cache_root=self.cache_root,
            sources=self.pass_sources(),
        )

    def join(
        self, units: list[UpstreamChange], down, early: dict[str, Started] | None = None
    ) -> dict[int, list[Coupling]]:
        """Couplings per unit index: the join's passes (join/registry.py) over one set of
        inputs, their couplings decided in registry order (``early``: the early passes'
        work started before the indexing). The units the passes add are appended to
        ``units``; the scope fields they fill are kept for the report."""
        with collected_after():  # the join's services are left in cycles: freed here
            inputs = self.join_inputs(units, down)
            book = CouplingBook(inputs)
            ran = run_passes(PASSES, inputs, book, early)
            couplings = book.couplings()
            del inputs, book
        units.extend(ran.units)
        self.scope_fields = ran.scope
        self.stats.update(ran.stats)
        for name, seconds in ran.seconds.items():
            self.timings[f"join: {name}"] = round(seconds, 3)
        if (
            not ran.stats.get("downstream_references")
            and not ran.stats.get("registered_kernels")
            and self.stats.get("downstream_files")
        ):
            log.warning(
                "the downstream (%s, %s Python files) names no symbol of the upstream "
                "package %s: every unit would read 'no coupling'; check --downstream, or "
                "name the upstream's packages with --upstream-package",
                self.req.downstream,
                self.stats["downstream_files"],
                "/".join(self.roots),
            )
        return couplings

    def _probes(self) -> ProbeOutcomes:
        """Source and extension probes decided on both upstream snapshots (memoised)."""
        if getattr(self, "_probe_outcomes", None) is None:
            old, new = self.up.old, self.up.new
            self._probe_outcomes = ProbeOutcomes(
                (frozenset(old.paths()), old.read),
                (frozenset(new.paths()), new.read),
                self.old_version,
                self.new_version,
                {"old": stub_reader(old), "new": stub_reader(new)},
            )
        return self._probe_outcomes

    def _names_in(self, path: str) -> Container[str]:
        """Attribute names and quoted identifiers of a downstream file's code, not its
        comments and docstrings (read on demand; tokenized only when a name is asked that
        the file's text holds: ``MemberNames``)."""
        memo = self._names_memo
        if path not in memo:
            memo[path] = MemberNames(self._down_text(path), lambda: self._down_text(path))
        return memo[path]

    def _down_text(self, path: str) -> str:
        try:
            return self._read_down(path).decode("utf-8", "replace")
        except (OSError, KeyError):
            return ""

    def _read_down(self, path: str) -> bytes:
        """A downstream file's bytes, from its snapshot (a wheel keeps the latest it
        decompressed: sources/wheel.py). Not kept here: the join's passes each read every
        file, and keeping them held 14 MiB of torch-npu's text in the parent for the
        whole join (issue #32); decompressing them again costs ~0.06 CPU s a pass."""
        return self._downstream_snapshot().read(path)

    def close(self) -> None:
        """Stop what the snapshots hold open (git cat-file processes, wheel files)."""
        self.up.close()
        close = getattr(getattr(self, "down_snapshot", None), "close", None)
        if close is not None:
            close()

    # report --------------------------------------------------------------------------

    def open(self) -> list:
        """Open the upstream snapshots; their raw units, the upstream's top-level packages
        and both versions."""
        t = time.perf_counter()
        raw = self.up.open()
        self._timed("upstream_sources", t)
        up = self.up
        self.roots = up.roots()
        self.new_version = snapshot_version(up.new, up.labels.get("new"))
        self.old_version = snapshot_version(up.old, up.labels.get("old"))
        builds = snapshot_build(up.old), snapshot_build(up.new)
        if None not in builds and builds[0] != builds[1]:
            log.warning(
                "the two upstreams are different builds (%s, then %s): what depends on the "
                "build (torch.version.cuda, torch.version.hip) differs for that reason, not "
                "the release; give two wheels of the same build (the same index URL)",
                *builds,
            )
        return raw

    def run(self) -> ImpactReport:
        raw = self.open()
        t = time.perf_counter()
        memo = ReportMemo(self.cache_root)
        memo_key = self._memo_key()
        if memo_key is not None:
            remembered = memo.get(memo_key)
            self._timed("report_memo", t)
            if remembered is not None:
                remembered.generated_at = _now()
                remembered.stats = {
                    **remembered.stats,
                    "report_memo": "hit",
                    "timings_s": dict(self.timings),
                }
                return remembered
        # the passes that read only the snapshots start now, beside the indexing
        early = start_early(PASSES, self.pass_sources(), self.jobs)
        t = time.perf_counter()
        units, down = self._index_both(raw)
        give_back_heap()  # what the indexing read and dropped, before the join's peak
        self._timed("indexing", t)
        t = time.perf_counter()
        couplings = self.join(units, down, early)
        self._timed("join", t)
        report = self._report(units, couplings, down)
        self.remember = (memo, memo_key) if memo_key is not None else None
        return report

    def _index_both(self, raw: list) -> tuple[list[UpstreamChange], object]:
        """The symbol diff of the upstream units and the downstream index."""
        if self.jobs > 1:
            # the two indexing stages are independent: overlap them, so that neither's
            # serial parts (reading results, cross-file passes) leave the cores idle
            with ThreadPoolExecutor(1, thread_name_prefix="instep-downstream") as side:
                pending = side.submit(self._timed_stage, "downstream_index", self.downstream_index)
                units = self._timed_stage("symbol_diff", lambda: self.up.diff(raw))
                return units, pending.result()
        units = self._timed_stage("symbol_diff", lambda: self.up.diff(raw))
        return units, self._timed_stage("downstream_index", self.downstream_index)

    def _report(self, units: list[UpstreamChange], couplings, down) -> ImpactReport:
        """The unit verdicts, their suggested tests and the compat debt, as a report."""
        if self.mode == "release":
            for i, u in enumerate(units):
                # a file's or class's title names its strongest couplings; a unit a pass
                # made (a shared object's) titles itself
                if couplings.get(i) and u.unit_kind in (UnitKind.FILE, UnitKind.CLASS):
                    u.title = release_title(u.id, _by_coupling(u.changes, couplings[i]))
        impacts: list[Impact] = []
        name = self._upstream_name()
        started = time.perf_counter()
        suggester = self._suggester(down)
        spent = time.perf_counter() - started
        for i, u in enumerate(units):
            started = time.perf_counter()
            tests = self._tests(suggester, u, couplings.get(i, []))
            spent += time.perf_counter() - started
            impact = judge_unit(
                u,
                couplings.get(i, []),
                lang=self.req.lang,
                suggested_tests=unique_tests(tests),
                upstream=name,
            )
            impact.tests = tests
            gaps = suggester.untested(u, couplings.get(i, []))
            impact.untested = {ref: str(why) for ref, why in gaps.items()}
            impacts.append(impact)
        self.timings["test_suggestions"] = round(spent, 3)
        self.stats["op_routes_left_out"] = len(suggester.left_out)
        debt = self._compat_debt(down)
        # how many upstream test files the new side carries (0 for a wheel): the report
        # says why suggested_tests is empty and how to get suggestions
        self.stats["upstream_tests"] = len(self.up.test_paths())
        return ImpactReport(
            upstream={
                "mode": self.mode,
                **self.up.labels,
                "old_version": _v(self.old_version),
                "new_version": _v(self.new_version),
            },
            downstream={
                "source": self.req.downstream,
                "files": self.stats.get("downstream_files"),
                "references": self.stats.get("downstream_references"),
            },
            units=impacts,
            compat_debt=debt,
            refusals=self._refusals(down),
            stats={"timings_s": self.timings, **self.stats},
            generated_at=_now(),
            lang=self.req.lang,
            scope=Scope(
                python_files=int(self.stats.get("downstream_files") or 0),
                **self.scope_fields,
            ),
        )

    def _tests(
        self, suggester: TestSuggester, unit: UpstreamChange, couplings: list[Coupling]
    ) -> list[SuggestedTest]:
        """The unit's suggested tests (test_suggestions): the operator and stage tests of
        its coupled changes, the upstream tests its commit touched or that are named
        after its files, the downstream tests importing the coupled modules."""
        if not couplings:
            return []
        upstream = upstream_test_records(unit, self.up.test_paths(), self.up.read_at_commit)
        return suggester.for_unit(unit, couplings, upstream)

    def _suggester(self, down) -> TestSuggester:
        """The new upstream's OpInfos and operator callers and the downstream's use of
        operators, read once (test_suggestions). Not a join pass: it reads the verdicts
        (only a Test or Shim coupling's change gets a test)."""
        new = self.up.new
        reach = OpReach(new.paths(), self.up.new_index)
        return TestSuggester(
            read_index(new.paths(), new.read),
            reach,
            getattr(self, "down_tests", None),
            ops=DownstreamOps.from_references(down.references()),
            conditions=RouteConditions(new.read, reach.index, new.paths()),
        )

    def _refusals(self, down) -> list[dict]:
        """Version checks that let the old upstream through and refuse the new one."""
        if self.old_version is None or self.new_version is None:
            return []
        checks = [r for fi in down.files.values() for r in fi.refusals]
        found = version_refusals.new_refusals(checks, self.old_version, self.new_version)
        return [r.as_dict() for r in found]

    def _compat_debt(self, down) -> list[dict]:
        floor = self.req.min_supported or self.old_version
        if floor is None or self.new_version is None:
            return []
        gates = [g for fi in down.files.values() for g in fi.gates]
        known = self.req.min_supported is not None
        found = version_gates.compat_debt(gates, floor, self.new_version, floor_known=known)
        found += self._probes().debt(gates, floor)
        return [
            {"at": f"{g.path}:{g.line}", "condition": g.condition, "kind": g.kind, "reason": why}
            for g, why in found
        ]


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _v(version: tuple[int, ...] | None) -> str | None:
    return ".".join(map(str, version)) if version else None


def _by_coupling(changes: list[SymbolChange], couplings: list[Coupling]) -> list[SymbolChange]:
    """A unit's changes, those with the strongest couplings first (for its title): a file
    with 137 changes is read by its Shim symbols, not by its first four."""
    strongest: dict[str, int] = {}
    for c in couplings:
        strongest[c.upstream] = max(strongest.get(c.upstream, -1), c.action.rank)
    order = sorted(range(len(changes)), key=lambda k: (-strongest.get(changes[k].ref, -1), k))
    return [changes[k] for k in order]


def analyse(req: ImpactRequest) -> ImpactReport:
    """Run the whole analysis; warnings about skipped inputs end up in the report."""
    with collect_warnings() as warnings, no_cyclic_gc():
        analysis = _Analysis(req)
        try:
            report = analysis.run()
        finally:
            analysis.close()
    # stages overlap, so warnings are sorted; a remembered report keeps its own
    report.warnings = sorted(dict.fromkeys([*report.warnings, *warnings]))
    if analysis.remember is not None:
        memo, key = analysis.remember
        memo.put(key, report)  # type: ignore[attr-defined]
    return report
