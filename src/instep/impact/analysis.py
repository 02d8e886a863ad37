"""Wire the impact pipeline: sources -> symbol diff -> coupling index -> join -> verdicts.

``analyse(ImpactRequest) -> ImpactReport`` is what ``instep impact`` and the tests call.
This module runs the steps in order (upstream units and their symbol diff, the downstream
index, fork detection in a forked child, the join of :mod:`instep.impact.join.matchers`,
the unit verdicts, suggested tests) and keeps timings and stats. Each step lives in its
own module; none of them imports analysed code.
"""

from __future__ import annotations

import contextlib
import logging
import re
import time
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from fnmatch import fnmatch
from pathlib import Path
from typing import TypeVar

from instep.errors import BadInput, MissingInput
from instep.impact.downstream.class_escapes import ClassEscapes
from instep.impact.downstream.inductor_use import find_inductor_use
from instep.impact.downstream.wholesale import find_swaps
from instep.impact.join import forked_passes
from instep.impact.join.breaking_path import UpstreamCalls
from instep.impact.join.device_classes import DeviceClasses
from instep.impact.join.dropped_attributes import DroppedAttributes
from instep.impact.join.fork_gaps import ForkGaps
from instep.impact.join.fork_search import ForkSearch
from instep.impact.join.hook_names import HookNames, add_found
from instep.impact.join.matchers import Join, PendingAdds
from instep.impact.join.op_arguments import OpArguments
from instep.impact.join.op_couplings import OpCouplings
from instep.impact.join.probe_outcomes import ProbeOutcomes, stub_reader
from instep.impact.join.test_suggestions import (
    DownstreamTests,
    TestSuggester,
    unique_tests,
    upstream_test_records,
)
from instep.impact.join.verdicts import judge_unit
from instep.impact.logged_warnings import collect_warnings
from instep.impact.model import (
    Coupling,
    Impact,
    ImpactReport,
    SuggestedTest,
    SymbolChange,
    UpstreamChange,
)
from instep.impact.no_gc import no_cyclic_gc
from instep.impact.upstream.release_diff import default_jobs
from instep.impact.upstream.resolver import UpstreamResolver
from instep.impact.upstream.versions import snapshot_version
from instep.pyindex.cache import ContentCache
from instep.pyindex.model import SymbolKind

T = TypeVar("T")

log = logging.getLogger(__name__)


@dataclass
class ImpactRequest:
    downstream: str
    upstream_old: str | None = None
    upstream_new: str | None = None
    upstream_git: str | None = None
    rev_range: str | None = None
    patches: str | None = None
    cache_dir: Path | None = None
    use_cache: bool = True
    jobs: int | None = None
    lang: str = "en"
    stage_map: dict[str, str] = field(default_factory=dict)
    exclude: list[str] = field(default_factory=list)
    min_supported: tuple[int, ...] | None = None
    large_file_changes: int = 40  # release units split per class above this many changes
    first_parent: bool = False  # git: one unit per merge of the first-parent line
    upstream_packages: tuple[str, ...] = ()  # top-level upstream packages (default: detected)

    def mode(self) -> str:
        if self.upstream_git or self.rev_range:
            if not (self.upstream_git and self.rev_range):
                raise BadInput(
                    "--upstream-git and --range go together (e.g. --range v2.13.0..v2.14.0)"
                )
            if self.upstream_old or self.upstream_new or self.patches:
                raise BadInput(
                    "--upstream-git/--range cannot be combined with "
                    "--upstream-old/--upstream-new/--patches"
                )
            return "git"
        if self.patches:
            if not self.upstream_old or self.upstream_new:
                raise BadInput(
                    "--patches needs --upstream-old (the tree the patches apply to) "
                    "and no --upstream-new"
                )
            return "patches"
        if self.first_parent:
            raise BadInput("--first-parent goes with --upstream-git and --range (commit mode)")
        if self.upstream_old and self.upstream_new:
            return "release"
        raise BadInput(
            "no upstream given: use --upstream-old X --upstream-new Y, "
            "--upstream-git PATH --range A..B, or --upstream-old X --patches DIR"
        )


@dataclass
class _RawUnit:
    id: str
    title: str
    unit_kind: str
    files: list  # list[FileChange]
    commit: str | None = None
    pr: int | None = None
    reverts: str | None = None
    reverted_by: str | None = None
    upstream_tests: list[str] = field(default_factory=list)


# --- the analysis ------------------------------------------------------------------------


# a name after a dot, or a quoted identifier (getattr(obj, "name")): how a file can name
# a member of an upstream class it uses
_ATTRIBUTE_NAMES = re.compile(r"(?<=[.\"'])\s*([A-Za-z_]\w*)")


class _Analysis:
    def __init__(self, req: ImpactRequest) -> None:
        from instep.impact.upstream import stages

        self.req = req
        self.mode = req.mode()
        self.jobs = req.jobs or default_jobs()
        self._names_memo: dict[str, frozenset[str]] = {}
        self._down_bytes: dict[str, bytes] = {}  # downstream path -> bytes (the join's)
        root = req.cache_dir if req.use_cache else None
        self.cache_root = root
        self.stage_of = lambda path: stages.stage_for(path, req.stage_map or None)
        self.timings: dict[str, float] = {}
        self.stats: dict[str, object] = {}
        self._line_memo: dict[object, tuple[list[str] | None, list[str] | None]] = {}
        self.remember: tuple[object, str] | None = None  # (ReportMemo, key) to store under

    def _timed(self, name: str, start: float) -> None:
        self.timings[name] = round(time.perf_counter() - start, 3)

    def _timed_stage(self, name: str, stage: Callable[[], T]) -> T:
        start = time.perf_counter()
        try:
            return stage()
        finally:
            self._timed(name, start)

    def _excluded(self, path: str) -> bool:
        """Paths left out of the symbol diff: ``--exclude`` globs, and upstream tests
        (they are suggested tests, not symbols a backend depends on)."""
        from instep.impact.upstream.sources import is_test_path

        return is_test_path(path) or any(fnmatch(path, pat) for pat in self.req.exclude)

    # upstream ------------------------------------------------------------------------

    def upstream_units(self) -> list[_RawUnit]:
        from instep.impact.upstream import sources

        cache_dir = self.req.cache_dir or Path(".instep-cache")
        req = self.req
        if self.mode == "release":
            self.old = sources.open_snapshot(req.upstream_old, cache_dir)
            self.new = sources.open_snapshot(req.upstream_new, cache_dir)
            self.labels = {"old": req.upstream_old, "new": req.upstream_new}
            files = [
                f for f in sources.diff_snapshots(self.old, self.new) if not self._excluded(f.path)
            ]
            return [_RawUnit(f.path, f.path, "file", [f]) for f in files]
        if self.mode == "patches":
            self.old = sources.open_snapshot(req.upstream_old, cache_dir)
            self.new = sources.PatchedSnapshot(self.old, Path(req.patches))
            self.labels = {"old": req.upstream_old, "new": f"{req.upstream_old} + {req.patches}"}
            return [
                _RawUnit(
                    p.id,
                    p.title,
                    "patch",
                    [f for f in p.files if not self._excluded(f.path)],
                    pr=p.pr,
                )
                for p in self.new.units
            ]
        repo = sources.GitRepo(Path(req.upstream_git))
        commits = list(sources.iter_commits(repo, req.rev_range, first_parent=req.first_parent))
        sources.mark_reverts(commits)
        start, _, end = req.rev_range.partition("..")
        self.old = sources.GitSnapshot(repo, start.strip(".") or "HEAD")
        self.new = sources.GitSnapshot(repo, end or "HEAD")
        self.labels = {"old": start, "new": end or "HEAD", "range": req.rev_range}
        return [
            _RawUnit(
                c.sha[:12],
                c.subject,
                "commit",
                [f for f in c.files if not self._excluded(f.path)],
                commit=c.sha,
                pr=c.pr,
                reverts=c.reverts_sha or (f"#{c.reverts_pr}" if c.reverts_pr else None),
                reverted_by=c.reverted_by,
                upstream_tests=list(c.test_files),
            )
            for c in commits
        ]

    def diff_units(self, raw: list[_RawUnit]) -> list[UpstreamChange]:
        from instep.impact.upstream import symbol_diff

        pairs = [(f.path, f.old, f.new) for u in raw for f in u.files]
        self.new_indexes: dict[str, object] = {}
        self.texts: dict[object, tuple[bytes | None, bytes | None]] = {}
        per_unit: list[list[SymbolChange]] = []
        if self.mode == "release":
            from instep.impact.upstream.release_diff import diff_versions

            cache = ContentCache(self.cache_root, "symbols") if self.cache_root else None
            # with a cache the new indexes stay there until the resolver asks for one
            version_diff = diff_versions(
                pairs, self.stage_of, cache=cache, jobs=self.jobs, ship_new=cache is None
            )
            self.version_diff = version_diff
            by_path: dict[str, list[SymbolChange]] = defaultdict(list)
            for change in version_diff.changes:
                by_path[change.path].append(change)
            self._add_dataclass_bases(by_path, {p for p, _, _ in pairs}, cache)
            for path, old, new in pairs:
                self.texts[path] = (old, new)
                per_unit.append(by_path.get(path, []))
        else:
            # a history: each file's versions chained, moves matched per commit/patch
            from instep.impact.upstream import history_diff

            results = history_diff.diff_history(
                pairs, self.stage_of, cache_root=self.cache_root, jobs=self.jobs
            )
            it = iter(zip(pairs, results, strict=True))
            for u in raw:
                diffs = []
                for _ in u.files:
                    (path, old, new), (new_index, fdiff) = next(it)
                    if new_index is not None:
                        self.new_indexes[path] = new_index  # the last version wins
                    self.texts[(u.id, path)] = (old, new)
                    diffs.append(fdiff)
                per_unit.append(symbol_diff.join(diffs))
            self._add_dataclass_bases_per_commit(raw, per_unit)
        self._add_gone_modules(raw, per_unit)
        out: list[UpstreamChange] = []
        if self.mode == "release":
            for u, changes in zip(raw, per_unit, strict=True):
                out.append(self._unit(u, changes))
            out = self._group_release(out)
        else:
            out = [self._unit(u, changes) for u, changes in zip(raw, per_unit, strict=True)]
        self.stats["symbol_changes"] = sum(len(u.changes) for u in out)
        return [u for u in out if u.changes]

    def _add_dataclass_bases(
        self, by_path: dict[str, list[SymbolChange]], changed: set[str], cache
    ) -> None:
        """A release: the ``__init__`` of dataclasses whose fields come from other files
        (upstream/dataclass_bases), each in the unit of its file, or else of the first
        changed file its fields come from."""
        from instep.impact.upstream import dataclass_bases

        found = dataclass_bases.changes(
            changed, self.old, self.new, self.stage_of, cache=cache, jobs=self.jobs
        )
        for x in found:
            home = x.change.path if x.change.path in changed else min(x.sources & changed)
            _replace_change(by_path[home], x.change)
        self.stats["dataclass_base_changes"] = len(found)

    def _add_dataclass_bases_per_commit(
        self, raw: list[_RawUnit], per_unit: list[list[SymbolChange]]
    ) -> None:
        """A history: the same, per commit, for the files that have such dataclasses at
        either end of the range (a commit touching none of them costs nothing)."""
        from instep.impact.upstream import dataclass_bases, sources

        if not isinstance(self.new, sources.GitSnapshot):
            return  # patches: no snapshot per unit
        cache = ContentCache(self.cache_root, "symbols") if self.cache_root else None
        watch: dict[str, frozenset[str]] = {}
        for end in (self.old, self.new):
            for path, deps in dataclass_bases.dependants(end, cache, self.jobs).items():
                watch[path] = watch.get(path, frozenset()) | deps
        count = 0
        for u, changes in zip(raw, per_unit, strict=True):
            touched = {f.path for f in u.files}
            only = [p for p, deps in watch.items() if p in touched or deps & touched]
            if not only or not u.commit:
                continue
            try:
                parent = sources.GitSnapshot(self.new.repo, f"{u.commit}^")
            except MissingInput:
                continue  # a root commit (an unrelated history merged in): all added
            this = sources.GitSnapshot(self.new.repo, u.commit)
            found = dataclass_bases.changes(
                touched, parent, this, self.stage_of, cache=cache, jobs=1, only=only
            )
            for x in found:
                _replace_change(changes, x.change)
            count += len(found)
        self.stats["dataclass_base_changes"] = count

    def _add_gone_modules(self, raw: list[_RawUnit], per_unit: list[list[SymbolChange]]) -> None:
        """Names of modules renamed, split or deleted, at their old path (module_moves)."""
        from instep.impact.upstream import module_moves

        new_side = None
        index_of = module_moves.index_of_bytes
        if self.mode == "release":  # a release's moves land in other units' files
            index_of = self._diffed_index
            new_side = module_moves.NewSide(
                (f for u in raw for f in u.files if f.old is None), index_of
            )
        for u, changes in zip(raw, per_unit, strict=True):
            if self.mode == "release":
                where = str(self.labels["new"])
            elif u.commit:
                where = f"commit {u.commit[:12]}" + (f" (#{u.pr})" if u.pr else "")
            else:
                where = f"patch {u.id}"
            gone = module_moves.gone_names(u.files, self.stage_of, where, new_side, index_of)
            module_moves.merge(changes, gone)

    def _diffed_index(self, f, side: str):
        """A release: the symbol diff's index of a file's old or new side (from memory or
        the cache; made again only when evicted), None when absent or unreadable."""
        index = self.version_diff.index(f.path, side)
        return None if index is None or index.error is not None else index

    @staticmethod
    def _unit(u: _RawUnit, changes: list[SymbolChange]) -> UpstreamChange:
        return UpstreamChange(
            id=u.id,
            title=u.title,
            unit_kind=u.unit_kind,
            files=[f.path for f in u.files],
            changes=changes,
            commit=u.commit,
            pr=u.pr,
            reverted_by=u.reverted_by,
            reverts=u.reverts,
            upstream_tests=u.upstream_tests,
        )

    def _group_release(self, units: list[UpstreamChange]) -> list[UpstreamChange]:
        out = []
        for u in units:
            if len(u.changes) <= self.req.large_file_changes:
                u.title = _release_title(u.files[0], u.changes)
                out.append(u)
                continue
            by_class: dict[str, list[SymbolChange]] = defaultdict(list)
            for c in u.changes:
                top = (
                    c.qualname.split(".")[0]
                    if c.symbol_kind
                    in (SymbolKind.METHOD, SymbolKind.CLASS_ATTRIBUTE, SymbolKind.CLASS)
                    else ""
                )
                by_class[top].append(c)
            for cls, changes in sorted(by_class.items()):
                uid = f"{u.id}::{cls}" if cls else u.id
                out.append(
                    UpstreamChange(
                        uid,
                        _release_title(uid, changes),
                        "class" if cls else "file",
                        files=list(u.files),
                        changes=changes,
                    )
                )
        return out

    # downstream ----------------------------------------------------------------------

    def _upstream_name(self) -> str:
        """What the rule texts call the upstream ("a TypeError on the new torch"): torch
        when it is among the upstream packages (``run`` sets them first), else the first."""
        return "torch" if "torch" in self.roots or not self.roots else self.roots[0]

    def _upstream_roots(self) -> tuple[str, ...]:
        """The upstream's top-level packages that downstream imports are read against:
        ``--upstream-package``, else ``torch`` when the new upstream has it, else the
        packages at the top of the new upstream, or under its src/ (test packages left out)."""
        from instep.impact.upstream.sources import is_test_path
        from instep.pyindex.model import module_of

        if self.req.upstream_packages:
            return tuple(self.req.upstream_packages)
        tops = sorted(
            {
                module_of(p).split(".", 1)[0]
                for p in self.new.paths()
                if p.endswith("/__init__.py")
                and module_of(p).count(".") == 0
                and not is_test_path(p)
            }
        )
        return ("torch",) if not tops or "torch" in tops else tuple(tops)

    def _downstream_snapshot(self):
        from instep.impact.upstream import sources

        if getattr(self, "down_snapshot", None) is None:
            cache_dir = self.req.cache_dir or Path(".instep-cache")
            self.down_snapshot = sources.open_snapshot(self.req.downstream, cache_dir)
        return self.down_snapshot

    def _memo_key(self) -> str | None:
        """Key of the whole report (release diffs with a cache; see report_memo)."""
        if self.mode != "release" or self.cache_root is None:
            return None
        from instep.impact.report_memo import report_key

        req = self.req
        request = {
            "mode": self.mode,
            "lang": req.lang,
            "stage_map": sorted(req.stage_map.items()),
            "exclude": list(req.exclude),
            "min_supported": req.min_supported,
            "large_file_changes": req.large_file_changes,
            "upstream_packages": list(req.upstream_packages),
            "labels": sorted(self.labels.items()),
        }
        down = self._downstream_snapshot()
        return report_key(
            request,
            [
                ("old", self.old, self.old.paths()),
                ("new", self.new, self.new.paths()),
                ("downstream", down, down.paths()),
            ],
        )

    def downstream_index(self):
        from instep.impact.downstream import coupling_index

        snap = self._downstream_snapshot()
        items = [
            (p, snap.read(p)) for p in snap.paths() if p.endswith(".py") and not self._excluded(p)
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
        from instep.impact.upstream.sources import is_test_path

        paths = [
            p
            for p in snap.paths()
            if p.endswith(".py")
            and is_test_path(p)
            and not any(fnmatch(p, pat) for pat in self.req.exclude)
        ]
        return DownstreamTests((p, snap.read(p).decode("utf-8", "replace")) for p in paths)

    # join ----------------------------------------------------------------------------

    def resolver(self) -> UpstreamResolver:
        return UpstreamResolver(self.new.paths(), self._new_index)

    def _new_index(self, path: str):
        """The index of a file of the new upstream: the symbol diff's, else the cache's,
        else made now (and cached)."""
        from instep.impact.upstream import file_index
        from instep.pyindex.cache import content_hash

        if path in self.new_indexes:
            return self.new_indexes[path]
        changed = getattr(self, "version_diff", None)
        if changed is not None and path in changed.keys:
            return changed.index(path, "new")
        data = self.new.read(path)
        if self.cache_root is None:
            return file_index.index_source(path, data)
        if getattr(self, "_full_symbols", None) is None:
            self._full_symbols = ContentCache(self.cache_root, "symbols-full")
        # the path is hashed into the key: a key holding it ("hash:torch/x.py") named a
        # file in subdirectories the cache never made, so most entries failed to write
        key = content_hash(data + b"\0" + path.encode("utf-8", "surrogateescape"))
        hit = self._full_symbols.get(key)
        if hit is not None:
            return hit
        idx = file_index.index_source(path, data)
        self._full_symbols.put(key, idx)
        return idx

    def join(self, units: list[UpstreamChange], down) -> dict[int, list[Coupling]]:
        """Couplings per unit index: every downstream reference matched to the changes."""
        calls = UpstreamCalls(self.new.paths(), self.new.read)
        join = Join(units, self.resolver(), down.roots, self.new_version, self._names_in, calls)
        snap = self._downstream_snapshot()
        read_down = self._read_down
        if self.jobs > 1:
            # what both the children forked below and this process read (every file of the
            # new upstream, every downstream file), read once here: else each reads all
            calls.texts()
            for p in snap.paths():
                if p.endswith(".py"):
                    # an error is not kept: the pass that reads the file meets it as before
                    with contextlib.suppress(OSError, KeyError, BadInput):
                        read_down(p)
        # fork detection reads only the changes and the downstream functions, hook names
        # the changes, the downstream classes and the resolver (not what references()
        # sets): each runs in a forked child, started before the rest is set up, while this
        # process sets up and matches the references. That process and the hook-name
        # child keep two CPUs busy: fork detection's own pools get only the CPUs beyond
        # those (with --jobs 2 none: a pool there only added its workers' start and the
        # sources pickled to them, about 1 CPU-s, to the CPUs the others wait for)
        search = ForkSearch(max(1, self.jobs - 2), self.cache_root, self._lines_of)
        hooks = HookNames(join, units, self._lines_of, down, calls, read_down=read_down)
        passes = forked_passes.start(
            self.jobs, {"fork detection": search.work(units, down), "hook names": hooks.find}
        )
        join.swaps = tuple(find_swaps(snap.paths(), read_down, join.resolver.module_paths))
        join.op_arguments = OpArguments(self.new.paths(), self._new_index)
        join.escapes = ClassEscapes(snap.paths(), read_down, calls.texts)
        join.devices = DeviceClasses(down, join.resolver, snap.paths(), read_down, calls.texts)
        join.probes = self._probes()
        join.inductor = find_inductor_use(snap.paths(), read_down)
        refs = list(down.references())
        self.stats["downstream_references"] = len(refs)
        if not refs and self.stats.get("downstream_files"):
            log.warning(
                "the downstream (%s, %s Python files) names no symbol of the upstream "
                "package %s: every unit would read 'no coupling'; check --downstream, or "
                "name the upstream's packages with --upstream-package",
                self.req.downstream,
                self.stats["downstream_files"],
                "/".join(self.roots),
            )
        join.references(refs)
        OpCouplings(join, units, self._lines_of).match(refs)
        # dropped attributes and fork gaps only add: they run while the hook-name child
        # (the last to end) still works, their adds kept and made after its couplings
        dropped = PendingAdds(join)
        DroppedAttributes(dropped, units, self._lines_of, down, calls.tree, read_down).match()
        fork_refs = passes["fork detection"]()
        gaps = PendingAdds(join)
        ForkGaps(gaps, units, down, calls, read_down=read_down).match(fork_refs, refs)
        # added in the order the passes ran before: the same order, the same keys kept
        self.stats["hook_name_couplings"] = add_found(join, units, passes["hook names"]())
        self.stats["inherited_attribute_couplings"] = dropped.add_to()
        self.stats["fork_references"] = join.forks(fork_refs)
        self.stats["fork_gap_couplings"] = gaps.add_to()
        return join.couplings()

    def _probes(self) -> ProbeOutcomes:
        """Source and extension probes decided on both upstream snapshots (memoised)."""
        if getattr(self, "_probe_outcomes", None) is None:
            self._probe_outcomes = ProbeOutcomes(
                (frozenset(self.old.paths()), self.old.read),
                (frozenset(self.new.paths()), self.new.read),
                self.old_version,
                self.new_version,
                {"old": stub_reader(self.old), "new": stub_reader(self.new)},
            )
        return self._probe_outcomes

    def _names_in(self, path: str) -> frozenset[str]:
        """Attribute names and quoted identifiers of a downstream file (read on demand)."""
        memo = self._names_memo
        if path not in memo:
            try:
                text = self._read_down(path).decode("utf-8", "replace")
            except (OSError, KeyError):
                text = ""
            memo[path] = frozenset(_ATTRIBUTE_NAMES.findall(text))
        return memo[path]

    def _read_down(self, path: str) -> bytes:
        """A downstream file's bytes, kept: the join's passes each read every file (a
        wheel's member is decompressed again on each read); errors are not kept."""
        kept = self._down_bytes
        if path not in kept:
            kept[path] = self._downstream_snapshot().read(path)
        return kept[path]

    def _lines_of(
        self, u: UpstreamChange, c: SymbolChange
    ) -> tuple[list[str] | None, list[str] | None]:
        return self._lines((u.id, c.path) if self.mode != "release" else c.path)

    def _lines(self, key) -> tuple[list[str] | None, list[str] | None]:
        """Decoded lines of the old and new version of a changed upstream file (memoised).

        ``key`` is the path (release) or (unit id, path) (a history: one pair per commit).
        """
        memo = self._line_memo
        if key not in memo:
            old_b, new_b = self.texts.get(key, (None, None))
            memo[key] = tuple(
                b.decode("utf-8", "replace").splitlines() if b is not None else None
                for b in (old_b, new_b)
            )
        return memo[key]

    def close(self) -> None:
        """Stop what the snapshots hold open (git cat-file processes, wheel files)."""
        for name in ("old", "new", "down_snapshot"):
            snapshot = getattr(self, name, None)
            close = getattr(snapshot, "close", None)
            if close is not None:
                close()

    # report --------------------------------------------------------------------------

    def run(self) -> ImpactReport:
        t = time.perf_counter()
        raw = self.upstream_units()
        self._timed("upstream_sources", t)
        self.roots = self._upstream_roots()
        self.new_version = snapshot_version(self.new, self.labels.get("new"))
        self.old_version = snapshot_version(self.old, self.labels.get("old"))
        from instep.impact.report_memo import ReportMemo

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
        t = time.perf_counter()
        units, down = self._index_both(raw)
        self._timed("indexing", t)
        t = time.perf_counter()
        couplings = self.join(units, down)
        self._timed("join", t)
        report = self._report(units, couplings, down)
        self.remember = (memo, memo_key) if memo_key is not None else None
        return report

    def _index_both(self, raw: list[_RawUnit]) -> tuple[list[UpstreamChange], object]:
        """The symbol diff of the upstream units and the downstream index."""
        if self.jobs > 1:
            # the two indexing stages are independent: overlap them, so that neither's
            # serial parts (reading results, cross-file passes) leave the cores idle
            with ThreadPoolExecutor(1, thread_name_prefix="instep-downstream") as side:
                pending = side.submit(self._timed_stage, "downstream_index", self.downstream_index)
                units = self._timed_stage("symbol_diff", lambda: self.diff_units(raw))
                return units, pending.result()
        units = self._timed_stage("symbol_diff", lambda: self.diff_units(raw))
        return units, self._timed_stage("downstream_index", self.downstream_index)

    def _report(self, units: list[UpstreamChange], couplings, down) -> ImpactReport:
        """The unit verdicts, their suggested tests and the compat debt, as a report."""
        if self.mode == "release":
            for i, u in enumerate(units):
                if couplings.get(i):
                    u.title = _release_title(u.id, _by_coupling(u.changes, couplings[i]))
        impacts: list[Impact] = []
        name = self._upstream_name()
        started = time.perf_counter()
        self._test_suggester = self._suggester(down)
        spent = time.perf_counter() - started
        for i, u in enumerate(units):
            started = time.perf_counter()
            tests = self._tests(u, couplings.get(i, []))
            spent += time.perf_counter() - started
            impact = judge_unit(
                u,
                couplings.get(i, []),
                lang=self.req.lang,
                suggested_tests=unique_tests(tests),
                upstream=name,
            )
            impact.tests = tests
            impacts.append(impact)
        self.timings["test_suggestions"] = round(spent, 3)
        debt = self._compat_debt(down)
        # how many upstream test files the new side carries (0 for a wheel): the report
        # says why suggested_tests is empty and how to get suggestions
        self.stats["upstream_tests"] = len(self._upstream_tests())
        return ImpactReport(
            upstream={
                "mode": self.mode,
                **self.labels,
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
        )

    def _tests(self, unit: UpstreamChange, couplings: list[Coupling]) -> list[SuggestedTest]:
        """The unit's suggested tests (test_suggestions): the operator and stage tests of
        its coupled changes, the upstream tests its commit touched or that are named
        after its files, the downstream tests importing the coupled modules."""
        if not couplings:
            return []
        return self._test_suggester.for_unit(unit, couplings, self._upstream_test_records(unit))

    def _suggester(self, down) -> TestSuggester:
        """The new upstream's OpInfos and operator callers and the downstream's use of
        operators, read once (test_suggestions)."""
        from instep.impact.join.test_suggestions import DownstreamOps
        from instep.impact.upstream.op_reach import OpReach
        from instep.impact.upstream.opinfo_index import read_index

        paths = self.new.paths()
        return TestSuggester(
            read_index(paths, self.new.read),
            OpReach(paths, self._new_index),
            getattr(self, "down_tests", None),
            ops=DownstreamOps.from_references(down.references()),
        )

    def _upstream_test_records(self, unit: UpstreamChange) -> list[SuggestedTest]:
        """The upstream tests of a unit (test_suggestions.upstream_test_records)."""
        return upstream_test_records(unit, self._upstream_tests(), self._read_at_commit)

    def _read_at_commit(self, commit: str, path: str) -> bytes | None:
        """A file at a commit of a git history (None when absent, or not a history):
        cat-file reads ``rev:path`` without listing the tree."""
        from instep.impact.upstream import sources

        if not isinstance(self.new, sources.GitSnapshot):
            return None
        try:
            return self.new.repo.read_object(f"{commit}:{path}")
        except (MissingInput, OSError):
            return None

    def _upstream_tests(self) -> list[str]:
        if not hasattr(self, "_test_paths"):
            self._test_paths = [p for p in self.new.paths() if p.startswith("test/")]
        return self._test_paths

    def _refusals(self, down) -> list[dict]:
        """Version checks that let the old upstream through and refuse the new one."""
        from instep.impact.downstream import version_refusals

        if self.old_version is None or self.new_version is None:
            return []
        checks = [r for fi in down.files.values() for r in fi.refusals]
        found = version_refusals.new_refusals(checks, self.old_version, self.new_version)
        return [r.as_dict() for r in found]

    def _compat_debt(self, down) -> list[dict]:
        from instep.impact.downstream import version_gates

        floor = self.req.min_supported or self.old_version
        if floor is None or self.new_version is None:
            return []
        gates = [g for fi in down.files.values() for g in fi.gates]
        found = version_gates.compat_debt(gates, floor, self.new_version)
        found += self._probes().debt(gates, floor)
        return [
            {"at": f"{g.path}:{g.line}", "condition": g.condition, "kind": g.kind, "reason": why}
            for g, why in found
        ]


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _v(version: tuple[int, ...] | None) -> str | None:
    return ".".join(map(str, version)) if version else None


def _replace_change(changes: list[SymbolChange], change: SymbolChange) -> None:
    """Put ``change`` in ``changes`` instead of any other change of the same symbol."""
    changes[:] = [c for c in changes if (c.path, c.qualname) != (change.path, change.qualname)]
    changes.append(change)


def _by_coupling(changes: list[SymbolChange], couplings: list[Coupling]) -> list[SymbolChange]:
    """A unit's changes, those with the strongest couplings first (for its title): a file
    with 137 changes is read by its Shim symbols, not by its first four."""
    strongest: dict[str, int] = {}
    for c in couplings:
        strongest[c.upstream] = max(strongest.get(c.upstream, -1), c.action.rank)
    order = sorted(range(len(changes)), key=lambda k: (-strongest.get(changes[k].ref, -1), k))
    return [changes[k] for k in order]


def _release_title(uid: str, changes: list[SymbolChange]) -> str:
    head = ", ".join(f"{c.qualname} ({c.kind})" for c in changes[:4])
    more = f" +{len(changes) - 4} more" if len(changes) > 4 else ""
    return f"{uid}: {head}{more}"


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
