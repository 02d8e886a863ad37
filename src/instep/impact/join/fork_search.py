"""Fork detection: downstream functions that are modified copies of a changed upstream
function (:mod:`instep.impact.downstream.forks` does the matching), and their couplings.

:class:`ForkSearch` gathers the changed upstream functions' old and new text,
fingerprints them and matches the downstream functions against them, over ``jobs``
processes, caching the result by what it reads. :class:`ForkPass` runs it in a forked
child while the parent matches the other references, and turns each fork reference into a
FORK coupling of the changes of the name it copies (a weak fork of another name does not
count: :func:`weak_fork`); its findings carry the fork references for the fork-gap pass.
"""

from __future__ import annotations

import itertools
import multiprocessing
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from instep.impact.downstream import forks
from instep.impact.join.change_index import BEHAVIOUR
from instep.impact.join.pass_api import Findings, Found, JoinInputs, JoinPass
from instep.impact.model import CouplingKind, Reference, SymbolChange, UpstreamChange
from instep.pyindex.cache import ContentCache, content_hash
from instep.pyindex.model import SymbolKind

Lines = tuple[Sequence[str] | None, Sequence[str] | None]
MIN_FORK_SIMILARITY = 0.6  # below this only a same-named, non-dunder function counts
# Directories that hold a third party's code, copied into the upstream (torch/_vendor/
# packaging and quack, Inductor's vendored_templates): a downstream copy of the same
# third-party code is no fork of the upstream; it follows that library, not torch.
VENDORED_DIRS = frozenset(
    {"_vendor", "vendor", "_vendored", "vendored", "vendored_templates", "third_party"}
)


def vendored(path: str) -> bool:
    """Is ``path`` inside a directory of third-party code (:data:`VENDORED_DIRS`)?"""
    return any(part in VENDORED_DIRS for part in path.split("/")[:-1])


def weak_fork(r: Reference, c: SymbolChange) -> bool:
    """A fork too unlike the change to count: below :data:`MIN_FORK_SIMILARITY`, unless
    it has the changed function's own name (a dunder never counts so)."""
    sim = r.similarity or 0.0
    if sim >= MIN_FORK_SIMILARITY:
        return False
    name = c.qualname.rsplit(".", 1)[-1]
    own = (r.owner or "").rsplit(".", 1)[-1]
    return own != name or (name.startswith("__") and name.endswith("__"))


class ForkPass(JoinPass):
    """fork couplings of downstream copies of changed functions; in a forked child. Its
    CPU share: the parent and the hook-name child keep two CPUs busy, so fork detection's
    own pools get only the CPUs beyond those (with --jobs 2 none: a pool there only added
    its workers' start and the sources pickled to them, about 1 CPU-s, to the CPUs the
    others wait for)."""

    name = "fork detection"
    kinds = frozenset({CouplingKind.FORK})
    forked = True

    def run(self, inputs: JoinInputs, earlier: Mapping[str, Findings]) -> Findings:
        search = ForkSearch(max(1, inputs.jobs - 2), inputs.cache_root, inputs.lines_of)
        fork_refs = search.refs(inputs.units, inputs.down, forks)
        found, kept = [], 0
        for r in fork_refs:
            for i, c in inputs.changes.by_dotted.get(r.target, []):
                if weak_fork(r, c):
                    continue
                kept += 1
                found.append(Found(i, c, r, CouplingKind.FORK, detail=r.detail))
        return Findings(found, references=fork_refs, stats={"fork_references": kept})


class ForkSearch:
    """Find the fork references of ``units`` in a downstream index."""

    def __init__(
        self,
        jobs: int,
        cache_root: Path | None = None,
        lines_of: Callable[[UpstreamChange, SymbolChange], Lines] | None = None,
    ) -> None:
        self.jobs = jobs
        self.cache_root = cache_root
        # decoded old and new lines of the file of a change (memoised by the caller)
        self.lines_of = lines_of or (lambda u, c: (None, None))

    def refs(self, units, down, forks) -> list[Reference]:
        cands = []
        for u in units:
            for c in u.changes:
                if c.symbol_kind not in (SymbolKind.FUNCTION, SymbolKind.METHOD):
                    continue
                if not (c.aspects & BEHAVIOUR) or vendored(c.path):
                    continue
                old_lines, new_lines = self.lines_of(u, c)
                cands.append((c.old or c.new, _slice(old_lines, c.old), _slice(new_lines, c.new)))
        functions = [f for fi in down.files.values() for f in fi.functions]
        if not cands or not functions:
            return []
        # Fork detection is the costliest join step: cache its result by what it reads.
        cache = ContentCache(self.cache_root, "forks") if self.cache_root else None
        key = None
        if cache is not None:
            parts = [
                f"{s.ref}|{content_hash((o or '').encode())}|{content_hash((n or '').encode())}"
                for s, o, n in cands
            ]
            parts += [f"{f.path}|{f.qualname}|{f.body_hash}" for f in functions]
            key = content_hash("\n".join(sorted(parts)).encode())
            hit = cache.get(key)
            if hit is not None:
                return hit
        prints = self.fingerprints([(o, n) for _, o, n in cands], forks)
        refs = self.forked_functions(
            functions,
            [(sym, o, n) for (sym, _, _), (o, n) in zip(cands, prints, strict=True)],
            forks,
        )
        if cache is not None and key is not None:
            cache.put(key, refs)
        return refs

    def fingerprints(self, pairs, forks):
        """Fork fingerprints of the changed upstream functions, over ``jobs`` processes."""
        if self.jobs <= 1 or len(pairs) < 200:
            return forks.fingerprint_pairs(pairs)
        size = -(-len(pairs) // (self.jobs * 4))
        chunks = [pairs[i : i + size] for i in range(0, len(pairs), size)]
        with ProcessPoolExecutor(self.jobs) as pool:
            return [fp for part in pool.map(forks.fingerprint_pairs, chunks) for fp in part]

    def forked_functions(self, functions, upstream, forks):
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


_FORK_MATCH: tuple | None = None  # (downstream functions, upstream prints): matching pool


def _forks_in_span(span: tuple[int, int]) -> list[Reference]:
    """Body of a matching worker: forks among the downstream functions ``span``."""
    assert _FORK_MATCH is not None, "started without fork"
    functions, upstream = _FORK_MATCH
    return forks.find_forked_functions(functions[span[0] : span[1]], upstream)


def _slice(lines: Sequence[str] | None, sym) -> str | None:
    if lines is None or sym is None:
        return None
    return "\n".join(lines[sym.line - 1 : sym.end_line])
