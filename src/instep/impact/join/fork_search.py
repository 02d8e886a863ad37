"""Fork references of a run: downstream functions that are modified copies of a changed
upstream function (:mod:`instep.impact.downstream.forks` does the matching).

:class:`ForkSearch` gathers the changed upstream functions' old and new text,
fingerprints them and matches the downstream functions against them, over ``jobs``
processes, caching the result by what it reads; :meth:`ForkSearch.start` (or
:meth:`ForkSearch.work`, with other passes, through :mod:`forked_passes`) runs all of it
in a forked child while the parent matches the other references. Which fork references
count for which change is the join's (``matchers.Join.forks``).
"""

from __future__ import annotations

import itertools
import multiprocessing
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from instep.impact.downstream import forks
from instep.impact.join import forked_passes
from instep.impact.join.matchers import BEHAVIOUR
from instep.impact.model import Reference, SymbolChange, UpstreamChange
from instep.pyindex.cache import ContentCache, content_hash
from instep.pyindex.model import SymbolKind

Lines = tuple[list[str] | None, list[str] | None]


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

    def start(self, units, down) -> Callable[[], list[Reference]]:
        """Start :meth:`refs` in a forked child when ``jobs`` > 1; the returned
        callable gives its result (computed here when no child can be forked)."""
        return forked_passes.start(self.jobs, {"fork detection": self.work(units, down)})[
            "fork detection"
        ]

    def work(self, units, down) -> Callable[[], list[Reference]]:
        """:meth:`refs` as a pass for :func:`forked_passes.start`."""

        def refs() -> list[Reference]:
            # in a child, while the parent matches references: the child's pools
            # (fingerprints, then matching) use the cores its ``jobs`` gives it meanwhile
            return self.refs(units, down, forks)

        return refs

    def refs(self, units, down, forks) -> list[Reference]:
        cands = []
        for u in units:
            for c in u.changes:
                if c.symbol_kind not in (SymbolKind.FUNCTION, SymbolKind.METHOD):
                    continue
                if not (c.aspects & BEHAVIOUR):
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


def _slice(lines: list[str] | None, sym) -> str | None:
    if lines is None or sym is None:
        return None
    return "\n".join(lines[sym.line - 1 : sym.end_line])
