"""The upstream side of an analysis: the two snapshots, the units of change between them
(files of a release, commits of a range, patches of a series) and their symbol changes.

:class:`UpstreamSide` opens the sources the request names (``upstream/sources``), makes
the raw units, diffs them (``release_diff`` for a release, ``history_diff`` for a
history), adds the ``__init__`` of dataclasses whose fields come from other files
(``dataclass_bases``) and the names of modules renamed, split or deleted
(``module_moves``), and groups a release's large files by class. It then answers what
the join asks of the new upstream: the index of any of its files (:meth:`new_index`),
the decoded lines of a changed file (:meth:`lines_of`), its top-level packages
(:meth:`roots`), its test files and a file at a commit (for the suggested tests). It
knows nothing of the downstream or of couplings.
"""

from __future__ import annotations

from collections import OrderedDict, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from fnmatch import fnmatch
from pathlib import Path

from instep.errors import MissingInput
from instep.impact.model import Stage, SymbolChange, UpstreamChange
from instep.impact.request import ImpactRequest
from instep.impact.upstream import (
    dataclass_bases,
    file_index,
    history_diff,
    module_moves,
    sources,
    symbol_diff,
)
from instep.impact.upstream.release_diff import diff_versions
from instep.impact.upstream.sources import is_test_path
from instep.pyindex.cache import ContentCache, content_hash
from instep.pyindex.model import SymbolKind, module_of
from instep.pyindex.source_lines import SourceLines

_LINE_FILES = 64  # how many changed files' decoded lines are kept (the latest asked for)


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


class UpstreamSide:
    """Both upstream snapshots of a request and the units of change between them."""

    def __init__(
        self,
        req: ImpactRequest,
        jobs: int,
        cache_root: Path | None,
        stage_of: Callable[[str], Stage],
        stats: dict[str, object],
    ) -> None:
        self.req = req
        self.mode = req.mode()
        self.jobs = jobs
        self.cache_root = cache_root
        self.stage_of = stage_of
        self.stats = stats  # the analysis's: symbol_changes, dataclass_base_changes
        self.labels: dict[str, str] = {}
        self.new_indexes: dict[str, object] = {}
        self.texts: dict[object, tuple[bytes | None, bytes | None]] = {}
        self.version_diff = None  # a release's diff_versions result
        self._full_symbols: ContentCache | None = None
        # the decoded lines of the latest changed files (their bytes are kept: decoding
        # again costs little, keeping every file's text twice cost ~90 MiB per process)
        self._line_memo: OrderedDict[object, tuple[SourceLines | None, SourceLines | None]] = (
            OrderedDict()
        )
        self._test_paths: list[str] | None = None
        self._changed: dict[str, sources.FileChange] = {}  # a release's, by path

    def excluded(self, path: str) -> bool:
        """Paths left out of the symbol diff: ``--exclude`` globs, and upstream tests
        (they are suggested tests, not symbols a backend depends on)."""
        return is_test_path(path) or any(fnmatch(path, pat) for pat in self.req.exclude)

    def open(self) -> list[_RawUnit]:
        """Open both upstream snapshots; the raw units (files, commits or patches)."""
        cache_dir = self.req.cache_dir or Path(".instep-cache")
        req = self.req
        if self.mode == "release":
            self.old = sources.open_snapshot(req.upstream_old, cache_dir)
            self.new = sources.open_snapshot(req.upstream_new, cache_dir)
            self.labels = {"old": req.upstream_old, "new": req.upstream_new}
            # the changes hold no bytes: each is read when the diff, or a pass, asks
            files = sources.diff_snapshots(
                self.old, self.new, keep=lambda p: not self.excluded(p), lazy=True
            )
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
                    [f for f in p.files if not self.excluded(f.path)],
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
                [f for f in c.files if not self.excluded(f.path)],
                commit=c.sha,
                pr=c.pr,
                reverts=c.reverts_sha or (f"#{c.reverts_pr}" if c.reverts_pr else None),
                reverted_by=c.reverted_by,
                upstream_tests=list(c.test_files),
            )
            for c in commits
        ]

    def diff(self, raw: list[_RawUnit]) -> list[UpstreamChange]:
        """The units with their symbol changes (units without any left out)."""
        self.new_indexes: dict[str, object] = {}
        self.texts: dict[object, tuple[bytes | None, bytes | None]] = {}
        per_unit: list[list[SymbolChange]] = []
        if self.mode == "release":
            cache = ContentCache(self.cache_root, "symbols") if self.cache_root else None
            files = [f for u in raw for f in u.files]
            self._changed = {f.path: f for f in files}
            # with a cache the new indexes stay there until the resolver asks for one; the
            # bytes are read as the pool takes them (a release keeps no texts: _sides)
            version_diff = diff_versions(
                ((f.path, f.old, f.new) for f in files),
                self.stage_of,
                cache=cache,
                jobs=self.jobs,
                ship_new=cache is None,
                reread=self._sides,
            )
            self.version_diff = version_diff
            by_path: dict[str, list[SymbolChange]] = defaultdict(list)
            for change in version_diff.changes:
                by_path[change.path].append(change)
            self._add_dataclass_bases(by_path, {f.path for f in files}, cache)
            per_unit = [by_path.get(f.path, []) for f in files]
        else:
            pairs = [(f.path, f.old, f.new) for u in raw for f in u.files]
            # a history: each file's versions chained, moves matched per commit/patch
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
                out.append(_unit(u, changes))
            out = self._group_release(out)
        else:
            out = [_unit(u, changes) for u, changes in zip(raw, per_unit, strict=True)]
        self.stats["symbol_changes"] = sum(len(u.changes) for u in out)
        return [u for u in out if u.changes]

    def _add_dataclass_bases(
        self, by_path: dict[str, list[SymbolChange]], changed: set[str], cache
    ) -> None:
        """A release: the ``__init__`` of dataclasses whose fields come from other files
        (upstream/dataclass_bases), each in the unit of its file, or else of the first
        changed file its fields come from."""
        found = dataclass_bases.changes(
            changed, self.old, self.new, self.stage_of, cache=cache, jobs=self.jobs
        )
        for x in found:
            home = x.change.path if x.change.path in changed else min(x.sources & changed)
            replace_change(by_path[home], x.change)
        self.stats["dataclass_base_changes"] = len(found)

    def _add_dataclass_bases_per_commit(
        self, raw: list[_RawUnit], per_unit: list[list[SymbolChange]]
    ) -> None:
        """A history: the same, per commit, for the files that have such dataclasses at
        either end of the range (a commit touching none of them costs nothing)."""
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
                replace_change(changes, x.change)
            count += len(found)
        self.stats["dataclass_base_changes"] = count

    def _add_gone_modules(self, raw: list[_RawUnit], per_unit: list[list[SymbolChange]]) -> None:
        """Names of modules renamed, split or deleted, at their old path (module_moves)."""
        new_side = None
        index_of = module_moves.index_of_bytes
        if self.mode == "release":  # a release's moves land in other units' files
            index_of = self._diffed_index
            new_side = module_moves.NewSide(
                (f for u in raw for f in u.files if not f.has_old), index_of
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

    def _group_release(self, units: list[UpstreamChange]) -> list[UpstreamChange]:
        out = []
        for u in units:
            if len(u.changes) <= self.req.large_file_changes:
                u.title = release_title(u.files[0], u.changes)
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
                        release_title(uid, changes),
                        "class" if cls else "file",
                        files=list(u.files),
                        changes=changes,
                    )
                )
        return out

    def roots(self) -> tuple[str, ...]:
        """The upstream's top-level packages that downstream imports are read against:
        ``--upstream-package``, else ``torch`` when the new upstream has it, else the
        packages at the top of the new upstream, or under its src/ (test packages left out)."""
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

    def new_index(self, path: str):
        """The index of a file of the new upstream: the symbol diff's, else the cache's,
        else made now (and cached)."""
        if path in self.new_indexes:
            return self.new_indexes[path]
        changed = self.version_diff
        if changed is not None and path in changed.keys:
            return changed.index(path, "new")
        data = self.new.read(path)
        if self.cache_root is None:
            return file_index.index_source(path, data)
        if self._full_symbols is None:
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

    def new_bytes(self, path: str) -> bytes:
        """A file of the new upstream (the snapshot's: a release keeps no texts)."""
        return self.new.read(path)

    def _sides(self, path: str) -> tuple[bytes | None, bytes | None]:
        """A release: the old and new bytes of a changed file, read again from the
        snapshots (None for the side it is absent from, and for a file not changed)."""
        f = self._changed.get(path)
        return (f.old, f.new) if f is not None else (None, None)

    def lines_of(
        self, u: UpstreamChange, c: SymbolChange
    ) -> tuple[SourceLines | None, SourceLines | None]:
        return self._lines((u.id, c.path) if self.mode != "release" else c.path)

    def _lines(self, key) -> tuple[SourceLines | None, SourceLines | None]:
        """Decoded lines of the old and new version of a changed upstream file (memoised,
        as :class:`SourceLines`: a str per line would hold twice the text).

        ``key`` is the path (release) or (unit id, path) (a history: one pair per commit).
        """
        memo = self._line_memo
        if key in memo:
            memo.move_to_end(key)
        else:
            if self.mode == "release":
                old_b, new_b = self._sides(key)
            else:
                old_b, new_b = self.texts.get(key, (None, None))
            memo[key] = tuple(
                SourceLines(b.decode("utf-8", "replace")) if b is not None else None
                for b in (old_b, new_b)
            )
            if len(memo) > _LINE_FILES:
                memo.popitem(last=False)
        return memo[key]

    def test_paths(self) -> list[str]:
        """The upstream test files of the new side (none in a wheel)."""
        if self._test_paths is None:
            self._test_paths = [p for p in self.new.paths() if p.startswith("test/")]
        return self._test_paths

    def read_at_commit(self, commit: str, path: str) -> bytes | None:
        """A file at a commit of a git history (None when absent, or not a history):
        cat-file reads ``rev:path`` without listing the tree."""
        if not isinstance(self.new, sources.GitSnapshot):
            return None
        try:
            return self.new.repo.read_object(f"{commit}:{path}")
        except (MissingInput, OSError):
            return None

    def close(self) -> None:
        """Stop what the snapshots hold open (git cat-file processes, wheel files)."""
        for name in ("old", "new"):
            close = getattr(getattr(self, name, None), "close", None)
            if close is not None:
                close()


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


def replace_change(changes: list[SymbolChange], change: SymbolChange) -> None:
    """Put ``change`` in ``changes`` instead of any other change of the same symbol."""
    changes[:] = [c for c in changes if (c.path, c.qualname) != (change.path, change.qualname)]
    changes.append(change)


def release_title(uid: str, changes: list[SymbolChange]) -> str:
    head = ", ".join(f"{c.qualname} ({c.kind})" for c in changes[:4])
    more = f" +{len(changes) - 4} more" if len(changes) > 4 else ""
    return f"{uid}: {head}{more}"
