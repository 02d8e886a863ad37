"""Symbol diffs along a history: every commit (or patch) of a range, file by file.

In a range, a file's versions form a chain: the new side of one commit is the old side of
the next. Each version is indexed *against the previous one* (``symbols.index_against``:
only the statements that differ are parsed), so a 7,000-line file touched by fifty
commits costs one full parse plus fifty small ones. Chains run in parallel (one per
path), each link's result is cached by content, and moves across files are matched per
commit (``symbol_diff.join``). Release diffs (one pair per path) use
``release_diff.diff_versions`` instead.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from instep.impact.model import Stage
from instep.impact.upstream.file_index import index_against, index_text
from instep.impact.upstream.release_diff import default_jobs
from instep.impact.upstream.symbol_diff import FileDiff, diff_file
from instep.pyindex.cache import ContentCache
from instep.pyindex.symbols import FileIndex, decode_or_error

CACHE_NAMESPACE = "history-diff-v2"

Link = tuple[int, bytes | None, bytes | None]  # (position in the caller's list, old, new)


def _key(path: str, old: bytes | None, new: bytes | None) -> str:
    h = hashlib.blake2b(digest_size=20)
    for part in (
        path.encode(),
        b"-" if old is None else b"+" + old,
        b"-" if new is None else b"+" + new,
    ):
        h.update(len(part).to_bytes(8, "little"))
        h.update(part)
    return h.hexdigest()


def _index(
    path: str, data: bytes | None, prev: tuple[str, FileIndex] | None
) -> tuple[str | None, FileIndex | None]:
    if data is None:
        return None, None
    text, error = decode_or_error(path, data)
    if text is None:
        return None, error
    if prev is not None:
        return text, index_against(path, text, prev[1], prev[0])
    return text, index_text(path, text)


def diff_chain(
    path: str, links: list[Link], stage: Stage, cache_root: str | None
) -> list[tuple[int, FileIndex | None, FileDiff]]:
    """Diff consecutive versions of one file; each version indexed against the previous."""
    cache = ContentCache(Path(cache_root), CACHE_NAMESPACE) if cache_root else None
    out: list[tuple[int, FileIndex | None, FileDiff]] = []
    prev: tuple[str, FileIndex] | None = None  # (text, index) of the last new version
    prev_bytes: bytes | None = None
    for pos, old, new in links:
        key = _key(path, old, new) if cache is not None else None
        hit = cache.get(key) if cache is not None and key is not None else None
        if hit is not None:
            # only the small FileDiff is cached; the next miss re-indexes its old side
            prev, prev_bytes = None, new
            out.append((pos, None, hit))
            continue
        if prev is not None and old is not None and old == prev_bytes:
            old_text, old_idx = prev
        else:
            # chain start (or a gap): index the old version in full once
            old_text, old_idx = _index(path, old, None)
        start = (old_text, old_idx) if old_text is not None and old_idx is not None else None
        if start is not None and old_idx.error is not None:
            start = None
        new_text, new_idx = _index(path, new, start)
        fdiff = diff_file(path, old_idx, new_idx, stage)
        if cache is not None and key is not None:
            cache.put(key, fdiff)
        ok = new_text is not None and new_idx is not None and new_idx.error is None
        prev = (new_text, new_idx) if ok else None
        prev_bytes = new
        out.append((pos, new_idx, fdiff))
    return out


def diff_history(
    pairs: list[tuple[str, bytes | None, bytes | None]],
    stage_of: Callable[[str], Stage],
    cache_root: Path | None = None,
    jobs: int | None = None,
) -> list[tuple[FileIndex | None, FileDiff]]:
    """For each ``(path, old, new)`` in history order: (new index or None, its FileDiff).

    The new index is None where the link came from the cache (callers that need an index
    of a version build it themselves; only FileDiffs are cached, they are small).
    """
    chains: dict[str, list[Link]] = {}
    for pos, (path, old, new) in enumerate(pairs):
        chains.setdefault(path, []).append((pos, old, new))
    root = str(cache_root) if cache_root is not None else None
    jobs = jobs or default_jobs()
    results: list[tuple[FileIndex | None, FileDiff] | None] = [None] * len(pairs)
    work = [(path, links, stage_of(path), root) for path, links in chains.items()]
    if jobs <= 1 or len(work) <= 1:
        done = [diff_chain(*w) for w in work]
    else:
        # longest chains first, so that two workers finish together
        work.sort(key=lambda w: -sum(len(n or b"") for _, _, n in w[1]))
        with ProcessPoolExecutor(jobs) as pool:
            done = list(pool.map(diff_chain, *zip(*work, strict=True)))
    for chain in done:
        for pos, new_idx, fdiff in chain:
            results[pos] = (new_idx, fdiff)
    return results  # type: ignore[return-value]
