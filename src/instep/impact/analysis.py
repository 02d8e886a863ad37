"""Wire the impact pipeline: sources -> symbol diff -> coupling index -> join -> verdicts.

``analyse(ImpactRequest) -> ImpactReport`` is what ``instep impact`` and the tests call.
This module owns the *join*: which downstream reference reaches which upstream change,
and through what (exact name, class member, inherited call path, same registration key,
fork). Each step it calls lives in its own module; none of them imports analysed code.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import multiprocessing
import re
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from fnmatch import fnmatch
from pathlib import Path
from typing import TypeVar

from instep.errors import BadInput
from instep.impact.join.test_suggestions import DownstreamTests, suggested_tests
from instep.impact.join.verdicts import decide, judge_unit
from instep.impact.model import (
    ChangeKind,
    Coupling,
    CouplingKind,
    Impact,
    ImpactReport,
    Reference,
    SymbolChange,
    UpstreamChange,
)
from instep.impact.no_gc import no_cyclic_gc
from instep.impact.upstream import call_paths
from instep.impact.upstream.release_diff import default_jobs
from instep.impact.upstream.resolver import UpstreamResolver
from instep.pyindex.cache import ContentCache
from instep.pyindex.model import SymbolKind
from instep.pyindex.registrations import FALLBACK_CALLS, OVERRIDE_DECOMP, role_of

T = TypeVar("T")

log = logging.getLogger(__name__)

_OVERLOAD_RE = re.compile(r"\(\.(\w+)\)")
MIN_FORK_SIMILARITY = 0.6  # below this only a same-named, non-dunder function counts

BEHAVIOUR = frozenset(
    {
        ChangeKind.BODY,
        ChangeKind.SIGNATURE,
        ChangeKind.VALUE,
        ChangeKind.DECORATOR,
        ChangeKind.REMOVED,
        ChangeKind.RENAMED,
    }
)

# Changes followed through upstream call paths (inherited.path): behaviour changes, and
# annotation-only ones too, so that their evidence is shown (the rules judge them Check).
FOLLOWED = BEHAVIOUR | {ChangeKind.ANNOTATION}


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


# --- warnings collected into the report ------------------------------------------------


class _WarningCollector(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@contextmanager
def _collect_warnings() -> Iterator[list[str]]:
    handler = _WarningCollector()
    logger = logging.getLogger("instep.impact")
    logger.addHandler(handler)
    try:
        yield handler.messages
    finally:
        logger.removeHandler(handler)


# --- versions ----------------------------------------------------------------------------

_VERSION_RE = re.compile(r"""__version__\s*=\s*['"](\d+(?:\.\d+)+)""")


def parse_version(text: str | None) -> tuple[int, ...] | None:
    if not text:
        return None
    m = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", text)
    if not m:
        return None
    return tuple(int(g) for g in m.groups() if g is not None)


def snapshot_version(snapshot, label: str | None) -> tuple[int, ...] | None:
    """The torch version of an upstream snapshot: torch/version.py, else the pip label."""
    paths = set(snapshot.paths())
    for candidate in ("torch/version.py",):
        if candidate in paths:
            m = _VERSION_RE.search(snapshot.read(candidate).decode("utf-8", "replace"))
            if m:
                return parse_version(m.group(1))
    return parse_version(label.split("==", 1)[1]) if label and "==" in label else None


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
        commits = list(sources.iter_commits(repo, req.rev_range))
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
        out: list[UpstreamChange] = []
        if self.mode == "release":
            for u, changes in zip(raw, per_unit, strict=True):
                out.append(self._unit(u, changes))
            out = self._group_release(out)
        else:
            out = [self._unit(u, changes) for u, changes in zip(raw, per_unit, strict=True)]
        self.stats["symbol_changes"] = sum(len(u.changes) for u in out)
        return [u for u in out if u.changes]

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
        index = coupling_index.index_downstream(items, cache=cache, jobs=self.jobs)
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
        from instep.impact.upstream import file_index

        cache = ContentCache(self.cache_root, "symbols-full") if self.cache_root else None
        known = self.new_indexes
        changed = getattr(self, "version_diff", None)

        def load(path: str):
            if path in known:
                return known[path]
            if changed is not None and path in changed.keys:
                return changed.index(path, "new")
            data = self.new.read(path)
            key = None
            if cache is not None:
                from instep.pyindex.cache import content_hash

                key = content_hash(data) + ":" + path
                hit = cache.get(key)
                if hit is not None:
                    return hit
            idx = file_index.index_source(path, data)
            if cache is not None and key is not None:
                cache.put(key, idx)
            return idx

        return UpstreamResolver(self.new.paths(), load)

    def join(self, units: list[UpstreamChange], down) -> dict[int, list[Coupling]]:
        """Couplings per unit index: every downstream reference matched to the changes."""

        resolver = self.resolver()
        by_dotted: dict[str, list[tuple[int, SymbolChange]]] = defaultdict(list)
        by_class: dict[str, list[tuple[int, SymbolChange]]] = defaultdict(list)
        by_key: dict[str, list[tuple[int, SymbolChange]]] = defaultdict(list)
        changed_in_module: dict[str, dict[str, list[tuple[int, SymbolChange]]]] = defaultdict(
            lambda: defaultdict(list)
        )
        for i, u in enumerate(units):
            for c in u.changes:
                by_dotted[c.dotted].append((i, c))
                if c.renamed_from:
                    old_q = c.renamed_from.split("::")[-1]
                    by_dotted[f"{c.module}.{old_q}"].append((i, c))
                if c.symbol_kind in (SymbolKind.METHOD, SymbolKind.CLASS_ATTRIBUTE):
                    by_class[c.dotted.rsplit(".", 1)[0]].append((i, c))
                for key in _relevant_keys(c):
                    by_key[key if ":" in key else f"op:{key}"].append((i, c))
                if c.aspects & FOLLOWED:
                    changed_in_module[c.module][c.qualname].append((i, c))

        out: dict[int, dict[tuple, Coupling]] = defaultdict(dict)
        new_version = self.new_version
        fallback_memo: dict[tuple[str, ...], bool] = {}

        def dead_fallback(gate) -> bool:
            """An ``except ImportError`` branch whose ``try`` imports all exist in the new
            upstream: the new torch never runs it (compat code for older ones)."""
            needs = gate.requires
            if needs not in fallback_memo:
                fallback_memo[needs] = all(
                    t.split(".", 1)[0] in down.roots and resolver.defined(resolver.resolve(t))
                    for t in needs
                )
            return fallback_memo[needs]

        def add(
            i: int,
            change: SymbolChange,
            ref: Reference,
            kind: CouplingKind | None = None,
            chain: list[str] | None = None,
            detail: str = "",
            extra: frozenset[str] = frozenset(),
            per_file: bool = False,
        ) -> None:
            k = kind or ref.kind
            if ref.gate is not None and ref.gate.requires and dead_fallback(ref.gate):
                extra = extra | {"old_only"}
            per_file = per_file or k is CouplingKind.INHERITED_PATH
            line = None if per_file else ref.line  # indirect evidence: one per file is enough
            key = (k, change.ref, ref.path, line)
            if key in out[i]:
                return
            out[i][key] = decide(
                change,
                ref,
                kind=k,
                new_version=new_version,
                chain=chain,
                detail=detail,
                extra_facts=extra,
            )

        # fork detection reads only the changes and the downstream functions: it runs in a
        # forked child while this process matches the references
        fork_refs_of = self._start_fork_refs(units, down)
        refs = list(down.references())
        self.stats["downstream_references"] = len(refs)
        overridden: set[tuple[str, str]] = set()  # (downstream class, member it defines)
        for r in refs:
            if r.kind is CouplingKind.SUBCLASS_OVERRIDE and r.owner and "." in r.owner:
                owner_cls, member = r.owner.rsplit(".", 1)
                overridden.add((owner_cls, member))

        reach_memo: dict[str, dict[str, list[str]]] = {}
        for r in refs:
            if r.kind is CouplingKind.REGISTRATION or r.target.startswith(
                ("op:", "backend:", "device_", "c_shim:")
            ):
                for i, c in by_key.get(r.target, ()):
                    if r.kind is CouplingKind.C_SHIM:  # a shim name against a declaration
                        add(i, c, r, detail=f"{r.detail}; upstream shim {c.qualname}")
                        continue
                    registrar, overload = _registration_parts(r.detail)
                    same = _same_registration(c, r, registrar, overload)
                    ref = r if same else dataclasses.replace(r, signature=None, body_hash=None)
                    if not same:
                        role = frozenset({"other_role"})
                    elif r.signature is None and r.body_hash is None and _falls_back(registrar):
                        role = frozenset({"masked_by_fallback"})  # no function of its own
                    else:
                        role = frozenset()
                    role |= _registration_interplay(c, r, registrar, overload)
                    add(
                        i,
                        c,
                        ref,
                        CouplingKind.REGISTRATION,
                        detail=r.detail or r.target,
                        extra=role,
                    )
                continue
            target = resolver.resolve(r.target)
            still_there = resolver.defined(target)
            direct = by_dotted.get(target, []) + (
                by_dotted.get(r.target, []) if target != r.target else []
            )
            for i, c in direct:
                if still_there and c.kind in (ChangeKind.REMOVED, ChangeKind.RENAMED):
                    continue  # moved or now inherited: the name the downstream uses still works
                extra = self._override_facts(c, r, resolver, overridden) | {"called_directly"}
                add(i, c, r, chain=[c.ref, f"{r.kind} at {r.at}"], extra=extra)
            cls = resolver.class_of(target)
            if cls is not None:
                self._class_couplings(cls, r, resolver, by_class, overridden, add)
            if r.kind is CouplingKind.IMPORT_USE:
                self._path_couplings(target, r, resolver, changed_in_module, reach_memo, add)

        # forks: downstream functions that copy a changed upstream function
        fork_refs = fork_refs_of()
        kept = 0
        for r in fork_refs:
            for i, c in by_dotted.get(r.target, []):
                if _weak_fork(r, c):
                    continue
                kept += 1
                add(i, c, r, CouplingKind.FORK, detail=r.detail)
        self.stats["fork_references"] = kept
        return {i: list(d.values()) for i, d in out.items()}

    def _override_facts(
        self, c: SymbolChange, r: Reference, resolver, overridden
    ) -> frozenset[str]:
        """``callers_overridden`` when the downstream class overrides every upstream caller."""
        if r.kind is not CouplingKind.SUBCLASS_OVERRIDE or ChangeKind.SIGNATURE not in c.aspects:
            return frozenset()
        if c.symbol_kind is not SymbolKind.METHOD or not r.owner or "." not in r.owner:
            return frozenset()
        owner_cls = r.owner.rsplit(".", 1)[0]
        cls_qual, member = c.qualname.rsplit(".", 1)
        callers: set[str] = set()
        for mod, qual in resolver.ancestors(c.module, cls_qual):
            idx = resolver.index(mod)
            if idx is None:
                continue
            for q, sym in idx.symbols.items():
                if q.startswith(qual + ".") and f"self.{member}" in sym.calls:
                    callers.add(q.rsplit(".", 1)[1])
        if callers and all((owner_cls, name) in overridden for name in callers):
            return frozenset({"callers_overridden"})
        return frozenset()

    def _class_couplings(self, cls, r, resolver, by_class, overridden, add) -> None:
        module, qual = cls
        owner_cls = r.owner.split(".")[0] if r.owner else None
        for amod, aqual in resolver.ancestors(module, qual):
            for i, c in by_class.get(f"{amod}.{aqual}", []):
                member = c.qualname.rsplit(".", 1)[-1]
                if r.kind is CouplingKind.SUBCLASS_OVERRIDE and r.detail.startswith("subclass"):
                    if owner_cls and (owner_cls, member) in overridden:
                        continue  # the override reference couples directly
                    if c.kind in (ChangeKind.ADDED, ChangeKind.REMOVED, ChangeKind.RENAMED):
                        continue  # nothing inherited changed behaviour
                    add(
                        i,
                        c,
                        r,
                        CouplingKind.INHERITED_PATH,
                        chain=[c.ref, f"inherited by {owner_cls or r.owner} at {r.at}"],
                        detail=f"{owner_cls or 'subclass'} inherits {aqual}.{member}",
                    )
                elif r.kind is CouplingKind.IMPORT_USE and _exposed_member(member, c):
                    add(
                        i,
                        c,
                        r,
                        CouplingKind.IMPORT_USE,
                        chain=[c.ref, f"{qual} used at {r.at}"],
                        detail=f"uses {qual}, whose {member} changed",
                        # calls of the class are calls of its __init__: each place is
                        # judged on its own calls; other members, one place per file
                        per_file=member != "__init__",
                        extra=self._member_facts(c, member, r.path),
                    )

    def _member_facts(self, c: SymbolChange, member: str, path: str) -> frozenset[str]:
        """Facts of a class use whose ``member`` changed: calling the class calls its
        ``__init__``; a member the file never names (``.member``, ``"member"``) is not
        called there, so a signature change cannot break a call there."""
        if member == "__init__":
            return frozenset({"called_directly"})
        if ChangeKind.SIGNATURE in c.aspects and member not in self._names_in(path):
            return frozenset({"member_not_named"})
        return frozenset()

    def _names_in(self, path: str) -> frozenset[str]:
        """Attribute names and quoted identifiers of a downstream file (read on demand)."""
        memo = self._names_memo
        if path not in memo:
            try:
                text = self._downstream_snapshot().read(path).decode("utf-8", "replace")
            except (OSError, KeyError):
                text = ""
            memo[path] = frozenset(_ATTRIBUTE_NAMES.findall(text))
        return memo[path]

    def _path_couplings(self, target, r, resolver, changed_in_module, memo, add) -> None:
        module, rest = resolver.split(target)
        if module is None or not rest or module not in changed_in_module:
            return
        if target not in memo:
            idx = resolver.index(module)
            if idx is None:
                memo[target] = {}
            else:
                key = f"<methods>{module}"
                if key not in memo:  # (setdefault would build the table on every call)
                    memo[key] = call_paths.methods_by_name(idx.symbols)
                methods = memo[key]
                targets = set(changed_in_module[module])
                memo[target] = call_paths.reached(idx.symbols, rest, targets, methods=methods)
        for qual, chain in memo[target].items():
            for i, c in changed_in_module[module][qual]:
                add(
                    i,
                    c,
                    r,
                    CouplingKind.INHERITED_PATH,
                    chain=[f"{r.at} uses {rest}", *chain[1:]],
                    detail=f"via {' -> '.join(chain)}",
                )

    def _start_fork_refs(self, units, down) -> Callable[[], list[Reference]]:
        """Start :meth:`_fork_refs` in a forked child when ``jobs`` > 1; the returned
        callable gives its result (computed here when no child can be forked)."""
        from instep.impact.downstream import forks

        if self.jobs <= 1 or "fork" not in multiprocessing.get_all_start_methods():
            return lambda: self._fork_refs(units, down, forks)
        global _FORK_JOB
        _FORK_JOB = (self, units, down)
        pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("fork"))
        try:
            pending = pool.submit(_fork_refs_job)  # forks now: the child sees _FORK_JOB
        finally:
            _FORK_JOB = None
            pool.shutdown(wait=False)

        def result() -> list[Reference]:
            try:
                return pending.result()
            except BrokenProcessPool:  # the child died (memory): do it here
                log.warning("fork detection child died; detecting forks in this process")
                return self._fork_refs(units, down, forks)

        return result

    def _fork_refs(self, units, down, forks) -> list[Reference]:
        cands = []
        for u in units:
            for c in u.changes:
                if c.symbol_kind not in (SymbolKind.FUNCTION, SymbolKind.METHOD):
                    continue
                if not (c.aspects & BEHAVIOUR):
                    continue
                old_lines, new_lines = self._lines(
                    (u.id, c.path) if self.mode != "release" else c.path
                )
                cands.append((c.old or c.new, _slice(old_lines, c.old), _slice(new_lines, c.new)))
        functions = [f for fi in down.files.values() for f in fi.functions]
        if not cands or not functions:
            return []
        # Fork detection is the costliest join step: cache its result by what it reads.
        cache = ContentCache(self.cache_root, "forks") if self.cache_root else None
        key = None
        if cache is not None:
            from instep.pyindex.cache import content_hash

            parts = [
                f"{s.ref}|{content_hash((o or '').encode())}|{content_hash((n or '').encode())}"
                for s, o, n in cands
            ]
            parts += [f"{f.path}|{f.qualname}|{f.body_hash}" for f in functions]
            key = content_hash("\n".join(sorted(parts)).encode())
            hit = cache.get(key)
            if hit is not None:
                return hit
        prints = self._parallel_fingerprints([(o, n) for _, o, n in cands], forks)
        refs = self._parallel_forked_functions(
            functions,
            [(sym, o, n) for (sym, _, _), (o, n) in zip(cands, prints, strict=True)],
            forks,
        )
        if cache is not None and key is not None:
            cache.put(key, refs)
        return refs

    def _parallel_fingerprints(self, pairs, forks):
        """Fork fingerprints of the changed upstream functions, over ``jobs`` processes."""
        if self.jobs <= 1 or len(pairs) < 200:
            return forks.fingerprint_pairs(pairs)
        from concurrent.futures import ProcessPoolExecutor

        size = -(-len(pairs) // (self.jobs * 4))
        chunks = [pairs[i : i + size] for i in range(0, len(pairs), size)]
        with ProcessPoolExecutor(self.jobs) as pool:
            return [fp for part in pool.map(forks.fingerprint_pairs, chunks) for fp in part]

    def _parallel_forked_functions(self, functions, upstream, forks):
        """:func:`forks.find_forked_functions` over ``jobs`` processes, each matching a
        contiguous run of whole files (so the result and its order are the same)."""
        if self.jobs <= 1 or len(functions) < 2000:
            return forks.find_forked_functions(functions, upstream)
        cuts = [0]
        step = -(-len(functions) // self.jobs)
        for k in range(1, self.jobs):
            at = max(cuts[-1], k * step)
            while 0 < at < len(functions) and functions[at].path == functions[at - 1].path:
                at += 1
            cuts.append(at)
        cuts.append(len(functions))
        spans = [(a, b) for a, b in itertools.pairwise(cuts) if b > a]
        global _FORK_MATCH
        _FORK_MATCH = (functions, upstream)
        try:
            ctx = multiprocessing.get_context("fork")
            with ProcessPoolExecutor(len(spans), mp_context=ctx) as pool:
                parts = list(pool.map(_forks_in_span, spans))  # forks now: sees _FORK_MATCH
        finally:
            _FORK_MATCH = None
        return [r for part in parts for r in part]

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
        if self.jobs > 1:
            # the two indexing stages are independent: overlap them, so that neither's
            # serial parts (reading results, cross-file passes) leave the cores idle
            with ThreadPoolExecutor(1, thread_name_prefix="instep-downstream") as side:
                pending = side.submit(self._timed_stage, "downstream_index", self.downstream_index)
                units = self._timed_stage("symbol_diff", lambda: self.diff_units(raw))
                down = pending.result()
        else:
            units = self._timed_stage("symbol_diff", lambda: self.diff_units(raw))
            down = self._timed_stage("downstream_index", self.downstream_index)
        self._timed("indexing", t)
        t = time.perf_counter()
        couplings = self.join(units, down)
        self._timed("join", t)
        if self.mode == "release":
            for i, u in enumerate(units):
                if couplings.get(i):
                    u.title = _release_title(u.id, _by_coupling(u.changes, couplings[i]))
        impacts: list[Impact] = []
        for i, u in enumerate(units):
            impacts.append(
                judge_unit(
                    u,
                    couplings.get(i, []),
                    lang=self.req.lang,
                    suggested_tests=self._tests(u, couplings.get(i, [])),
                )
            )
        debt = self._compat_debt(down)
        report = ImpactReport(
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
            stats={"timings_s": self.timings, **self.stats},
            generated_at=_now(),
            lang=self.req.lang,
        )
        self.remember = (memo, memo_key) if memo_key is not None else None
        return report

    def _tests(self, unit: UpstreamChange, couplings: list[Coupling]) -> list[str]:
        """Upstream tests the change names or that are named after its files, then the
        downstream tests importing the coupled modules (test_suggestions)."""
        tests = list(unit.upstream_tests)
        if couplings:
            stems = {Path(p).stem for p in unit.files}
            tests += [
                p for p in self._upstream_tests() if Path(p).stem.removeprefix("test_") in stems
            ]
        down = getattr(self, "down_tests", None)
        downstream = down.for_unit(unit, couplings) if down is not None else []
        return suggested_tests(sorted(dict.fromkeys(tests)), downstream)

    def _upstream_tests(self) -> list[str]:
        if not hasattr(self, "_test_paths"):
            self._test_paths = [p for p in self.new.paths() if p.startswith("test/")]
        return self._test_paths

    def _compat_debt(self, down) -> list[dict]:
        from instep.impact.downstream import version_gates

        floor = self.req.min_supported or self.old_version
        if floor is None or self.new_version is None:
            return []
        gates = [g for fi in down.files.values() for g in fi.gates]
        return [
            {"at": f"{g.path}:{g.line}", "condition": g.condition, "kind": g.kind, "reason": why}
            for g, why in version_gates.compat_debt(gates, floor, self.new_version)
        ]


def _relevant_keys(c: SymbolChange) -> set[str]:
    """Registration keys a change is about: a table's added/removed entries, else all."""
    if not (c.old and c.old.registrations) and not (c.new and c.new.registrations):
        return set()
    old = {r.key for r in c.old.registrations} if c.old else set()
    new = {r.key for r in c.new.registrations} if c.new else set()
    if c.symbol_kind in (SymbolKind.ASSIGNMENT, SymbolKind.CLASS_ATTRIBUTE):
        return old ^ new
    return old | new


def _registration_parts(detail: str) -> tuple[str, str | None]:
    """(registrar, overload) from a downstream registration reference's detail."""
    registrar = detail.split(" ", 1)[0] if detail else ""
    m = _OVERLOAD_RE.search(detail or "")
    return registrar, (m.group(1) if m else None)


def _same_registration(c: SymbolChange, r: Reference, registrar: str, overload: str | None) -> bool:
    """Does the downstream registration (its ``registrar`` and ``overload``, from
    :func:`_registration_parts`) replace the upstream one (same role and overload)?"""
    role = role_of(registrar)
    if role is None:
        return False
    key = r.target.removeprefix("op:")
    for sym in (c.new, c.old):
        if sym is None:
            continue
        for reg in sym.registrations:
            same_role = role_of(reg.registrar) == role
            if reg.key == key and same_role and reg.overload == overload:
                return True
    return False


def _falls_back(registrar: str) -> bool:
    """A downstream registrar that sends the op to its eager kernel (``make_fallback``,
    the ``fallbacks`` table), not one that generates a lowering (``register_pointwise``)."""
    return registrar in FALLBACK_CALLS or registrar == "table:fallbacks"


def _registration_interplay(
    c: SymbolChange, r: Reference, registrar: str, overload: str | None
) -> frozenset[str]:
    """Facts of an upstream registration change meeting a downstream registration of the
    same key, beyond the roles (see join/verdict_rules.toml):

    * ``whole_upstream_table``: upstream added or removed a whole op table (a module-level
      dict/list/set of ops that is no known registry) that the downstream does not write;
    * ``decomposition_meets_fallback``: upstream now decomposes the op and the downstream
      calls ``make_fallback`` on it without ``override_decomp``: upstream make_fallback
      raises "both a fallback and a decomp for same op" when the decomposition is in
      Inductor's table;
    * ``decomposition_bypasses_lowering``: upstream now decomposes the op that the
      downstream lowers: the decomposition runs first, the lowering may no longer be
      reached;
    * ``decomposition_removed``: upstream no longer decomposes the op the downstream lowers
      or falls back on: the downstream code now receives it.
    """
    key = r.target.removeprefix("op:")
    old = [g for g in (c.old.registrations if c.old else ()) if g.key == key]
    new = [g for g in (c.new.registrations if c.new else ()) if g.key == key]
    facts: set[str] = set()
    if (
        c.kind in (ChangeKind.ADDED, ChangeKind.REMOVED)
        and (old or new)
        and all(
            g.registrar.startswith("table:")
            and role_of(g.registrar) is None
            and g.registrar != registrar
            for g in (*old, *new)
        )
    ):
        facts.add("whole_upstream_table")

    def decomposes(regs: list) -> bool:
        return any(
            role_of(g.registrar) == "decomposition"
            and (g.overload is None or overload is None or g.overload == overload)
            for g in regs
        )

    lowers = role_of(registrar) == "lowering"
    if decomposes(new) and not decomposes(old):
        if registrar in FALLBACK_CALLS:
            if f"[{OVERRIDE_DECOMP}]" not in r.detail:
                facts.add("decomposition_meets_fallback")
        elif lowers:
            facts.add("decomposition_bypasses_lowering")
    elif decomposes(old) and not decomposes(new) and lowers:
        facts.add("decomposition_removed")
    return frozenset(facts)


def _weak_fork(r: Reference, c: SymbolChange) -> bool:
    sim = r.similarity or 0.0
    if sim >= MIN_FORK_SIMILARITY:
        return False
    name = c.qualname.rsplit(".", 1)[-1]
    own = (r.owner or "").rsplit(".", 1)[-1]
    return own != name or (name.startswith("__") and name.endswith("__"))


def _exposed_member(member: str, c: SymbolChange) -> bool:
    """Members a user of a class is exposed to: public ones and construction/call dunders."""
    if c.kind in (ChangeKind.ADDED, ChangeKind.REMOVED, ChangeKind.RENAMED):
        return False
    return member in call_paths.CONSTRUCTION or not member.startswith("_")


_FORK_JOB: tuple | None = None  # (analysis, units, downstream index) for the forked child


def _fork_refs_job() -> list[Reference]:
    """Body of the forked fork-detection child (state inherited through ``fork``)."""
    from instep.impact.downstream import forks

    assert _FORK_JOB is not None, "started without fork"
    analysis, units, down = _FORK_JOB
    # the parent matches references for about a third of this child's time: the child's
    # pools (fingerprints, then matching) use the cores meanwhile and after
    return analysis._fork_refs(units, down, forks)


_FORK_MATCH: tuple | None = None  # (downstream functions, upstream prints): matching pool


def _forks_in_span(span: tuple[int, int]) -> list[Reference]:
    """Body of a matching worker: forks among the downstream functions ``span``."""
    from instep.impact.downstream import forks

    assert _FORK_MATCH is not None, "started without fork"
    functions, upstream = _FORK_MATCH
    return forks.find_forked_functions(functions[span[0] : span[1]], upstream)


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _v(version: tuple[int, ...] | None) -> str | None:
    return ".".join(map(str, version)) if version else None


def _slice(lines: list[str] | None, sym) -> str | None:
    if lines is None or sym is None:
        return None
    return "\n".join(lines[sym.line - 1 : sym.end_line])


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
    with _collect_warnings() as warnings, no_cyclic_gc():
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
