"""The analysis cache: one generation per analysis code, stale generations pruned."""

from __future__ import annotations

import os
import time

import instep.pyindex.cache as cache_module
from instep.pyindex.cache import ContentCache


def _open(root, monkeypatch, digest: str) -> ContentCache:
    monkeypatch.setattr(cache_module, "analysis_code_digest", lambda: digest * 40)
    monkeypatch.setattr(cache_module, "_pruned", set())  # a new process
    return ContentCache(root, "symbols")


def test_entries_live_under_the_code_generation_and_round_trip(tmp_path, monkeypatch):
    cache = _open(tmp_path, monkeypatch, "a")
    cache.put("0123abcd", {"x": 1})
    assert cache.get("0123abcd") == {"x": 1}
    assert (tmp_path / "symbols" / ("a" * 16) / "01" / "0123abcd").is_file()
    # another instep's code sees none of it
    other = _open(tmp_path, monkeypatch, "b")
    assert other.get("0123abcd") is None


def test_stale_generations_and_the_old_layout_are_pruned(tmp_path, monkeypatch):
    legacy = tmp_path / "symbols" / "01"  # entries written before generations
    legacy.mkdir(parents=True)
    (legacy / "0123abcd").write_bytes(b"old")
    for n, digest in enumerate("abc"):
        cache = _open(tmp_path, monkeypatch, digest)
        cache.put(f"{digest}0key", n)
        stamp = time.time() - 100 + n  # a used before b before c
        os.utime(cache.dir, (stamp, stamp))
    names = sorted(p.name for p in (tmp_path / "symbols").iterdir())
    # opening c removed the legacy entries and the oldest generation, a; b stays as the
    # most recently used other one (two installs in turn do not start cold every time)
    assert names == ["b" * 16, "c" * 16]
    cache = _open(tmp_path, monkeypatch, "b")
    assert cache.get("b0key") == 1
