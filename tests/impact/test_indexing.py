"""Indexing and diffing many files: worker processes, the content cache, batch results."""

from __future__ import annotations

from instep.impact.model import ChangeKind, Stage
from instep.impact.upstream import release_diff
from instep.impact.upstream.release_diff import diff_versions, index_many, symbol_cache
from instep.impact.upstream.symbol_diff import diff_files
from instep.pyindex.symbols import index_source


def _module(i: int, extra: str = "") -> bytes:
    return (
        f"import torch\n\nLIMIT_{i} = {i}\n\n\n"
        f"def op_{i}(x, y):\n    z = x + y * {i}\n    return torch.relu(z)\n\n\n"
        f"class Kernel{i}:\n    def run(self, x):\n        return op_{i}(x, x)\n{extra}"
    ).encode()


def _files(n: int) -> list[tuple[str, bytes]]:
    return [(f"torch/_inductor/m{i}.py", _module(i)) for i in range(n)]


def test_index_many_in_two_processes_equals_inline_and_caches(tmp_path):
    items = [*_files(6), ("torch/bad.py", b'print "py2"\n')]
    inline = index_many(items, jobs=1)
    cache = symbol_cache(tmp_path)
    pooled = index_many(items, cache=cache, jobs=2)
    assert list(pooled) == [p for p, _ in items]
    for path in inline:
        assert pooled[path].symbols == inline[path].symbols
        assert pooled[path].error == inline[path].error
    assert "Kernel3.run" in pooled["torch/_inductor/m3.py"].symbols
    assert pooled["torch/bad.py"].error and not pooled["torch/bad.py"].symbols
    assert cache.misses == len(items) and cache.hits == 0
    again = index_many(items, cache=cache, jobs=2)
    assert cache.hits == len(items)
    assert again["torch/_inductor/m5.py"].symbols == inline["torch/_inductor/m5.py"].symbols


def test_cache_key_includes_the_path(tmp_path):
    cache = symbol_cache(tmp_path)
    data = b"def f():\n    return 1\n"
    out = index_many([("a/x.py", data), ("b/y.py", data)], cache=cache, jobs=1)
    assert out["a/x.py"].symbols["f"].path == "a/x.py"
    assert out["b/y.py"].symbols["f"].path == "b/y.py"


def test_cache_entries_of_other_analysis_code_are_not_reused(tmp_path, monkeypatch):
    import instep.pyindex.cache as cache_module

    items = [("a/x.py", b"def f():\n    return 1\n")]
    cache = symbol_cache(tmp_path)
    index_many(items, cache=cache, jobs=1)
    index_many(items, cache=cache, jobs=1)
    assert (cache.misses, cache.hits) == (1, 1)
    # an upgraded instep (or an edited checkout) computes indexes its own way
    monkeypatch.setattr(cache_module, "analysis_code_digest", lambda: "f" * 40)
    cache = symbol_cache(tmp_path)
    index_many(items, cache=cache, jobs=1)
    assert (cache.misses, cache.hits) == (1, 0)


def _release(n: int) -> list[tuple[str, bytes | None, bytes | None]]:
    pairs: list[tuple[str, bytes | None, bytes | None]] = []
    for i in range(n):
        old = _module(i)
        new = old.replace(b"y * ", b"y - ") if i % 2 else old
        pairs.append((f"torch/_inductor/m{i}.py", old, new))
    mover = b"def shared_helper(a, b):\n    c = a * b\n    d = c + a\n    return d - b\n"
    pairs.append(("torch/_inductor/old_home.py", b"X = 1\n" + mover, b"X = 1\n"))
    pairs.append(("torch/_inductor/new_home.py", None, mover))
    pairs.append(("torch/_inductor/broken.py", b"Y = 1\n", b"Y = (\n"))
    return pairs


def test_diff_versions_parallel_cached_and_warm(tmp_path):
    pairs = _release(8)
    plain = diff_versions(pairs, jobs=1)
    cache = symbol_cache(tmp_path)
    cold = diff_versions(pairs, cache=cache, jobs=2)
    warm_cache = symbol_cache(tmp_path)
    warm = diff_versions(pairs, cache=warm_cache, jobs=2)
    assert plain.changes == cold.changes == warm.changes
    assert warm_cache.misses == 0 and warm_cache.hits == 7  # one small read per changed file
    kinds = {(c.path, c.qualname): c for c in cold.changes}
    assert kinds[("torch/_inductor/m1.py", "op_1")].kind is ChangeKind.BODY
    assert ("torch/_inductor/m2.py", "op_2") not in kinds  # identical pair skipped
    moved = kinds[("torch/_inductor/new_home.py", "shared_helper")]
    assert moved.kind is ChangeKind.RENAMED
    assert moved.renamed_from == "torch/_inductor/old_home.py::shared_helper"
    assert all(c.stage is Stage.INDUCTOR for c in cold.changes)
    # indexes on demand, from the cache or kept in memory
    new_m1 = warm.index("torch/_inductor/m1.py", "new")
    assert new_m1 is not None and "Kernel1.run" in new_m1.symbols
    assert warm.index("torch/_inductor/new_home.py", "old") is None
    assert plain.index("torch/_inductor/m1.py", "old").symbols["op_1"].path.endswith("m1.py")
    assert set(warm.errors) == {"torch/_inductor/broken.py"}
    assert "not valid Python 3" in warm.errors["torch/_inductor/broken.py"]


def test_diff_versions_matches_per_file_full_diffs():
    pairs = _release(5)[:5]
    batch = diff_versions(pairs, stage_of=lambda p: Stage.OTHER, jobs=2)
    expected = []
    for path, old, new in pairs:
        if old != new:
            expected += diff_files(
                path, index_source(path, old), index_source(path, new), Stage.OTHER
            )
    assert batch.changes == sorted(expected, key=lambda c: (c.path, c.new.line, c.qualname))


def test_version_diff_shape_and_lazy_indexes(tmp_path):
    pairs = _release(4)
    result = diff_versions(pairs, lambda p: Stage.INDUCTOR, cache=symbol_cache(tmp_path), jobs=2)
    by_path: dict[str, list] = {}
    for change in result.changes:
        by_path.setdefault(change.path, []).append(change)
    assert "torch/_inductor/m0.py" not in result.keys  # identical: nothing to say
    assert result.loaded == {}  # with a cache, no index is read until asked for
    index = result.index("torch/_inductor/m1.py", "new")
    assert index is not None and "op_1" in index.symbols
    assert [c.qualname for c in by_path["torch/_inductor/m1.py"]] == ["op_1"]
    assert "torch/_inductor/old_home.py" not in by_path  # the move is the new file's
    assert [c.kind for c in by_path["torch/_inductor/new_home.py"]] == [ChangeKind.RENAMED]


def test_default_jobs_follow_the_cpus_this_process_may_use():
    """A pinned or containerised run gets what it was given, and never more than 8."""
    import os
    import subprocess
    import sys

    from instep.impact.upstream.release_diff import MAX_DEFAULT_JOBS, default_jobs

    usable = len(os.sched_getaffinity(0))
    assert default_jobs() == min(usable, MAX_DEFAULT_JOBS)
    one = next(iter(os.sched_getaffinity(0)))
    code = "from instep.impact.upstream.release_diff import default_jobs; print(default_jobs())"
    out = subprocess.run(
        [sys.executable, "-c", code],
        preexec_fn=lambda: os.sched_setaffinity(0, {one}),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.strip() == "1"


def test_a_generator_of_pairs_is_read_as_the_pool_takes_them(tmp_path):
    """At most IN_FLIGHT files per worker are read ahead of the results (issue #32: a
    release's 73 MiB of texts were all in the parent, and every worker forked from it)."""
    pairs = _release(12)
    read = 0
    ahead: list[int] = []

    def lazily():
        nonlocal read
        for pair in pairs:
            read += 1
            yield pair

    done = 0
    for _ in release_diff._stream(_echo, ((str(k), (k,)) for k, _ in enumerate(lazily())), 2):
        done += 1
        ahead.append(read - done)
    assert done == len(pairs) and max(ahead) <= release_diff.IN_FLIGHT * 2
    # the same changes as a list; an index no longer held is made again from ``reread``
    by_path = {p: (o, n) for p, o, n in pairs}
    reread: list[str] = []
    streamed = diff_versions(lazily(), jobs=2, reread=lambda p: reread.append(p) or by_path[p])
    assert streamed.changes == diff_versions(pairs, jobs=2).changes
    streamed.loaded.clear()
    assert "Kernel1.run" in streamed.index("torch/_inductor/m1.py").symbols
    assert reread == ["torch/_inductor/m1.py"]


def _echo(k: int) -> int:
    return k
