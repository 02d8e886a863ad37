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


def test_an_entry_without_its_end_marker_is_a_miss_and_replaced_once_stale(tmp_path, monkeypatch):
    cache = _open(tmp_path, monkeypatch, "a")
    cache.put("0123abcd", {"x": 1})
    path = cache.dir / "01" / "0123abcd"
    whole = path.read_bytes()
    # a writer killed halfway: the bytes so far, no marker
    path.write_bytes(whole[: len(whole) // 2])
    assert cache.get("0123abcd") is None
    cache.put("0123abcd", {"x": 1})  # fresh: maybe a writer still at work, left alone
    assert cache.get("0123abcd") is None
    old = time.time() - cache_module.STALE_WRITE_S - 5
    os.utime(path, (old, old))
    cache.put("0123abcd", {"x": 1})  # long dead: replaced
    assert cache.get("0123abcd") == {"x": 1}
    assert path.read_bytes() == whole
    # a pickle whole but for its marker is no entry either
    path.write_bytes(whole[: -len(cache_module.END)])
    assert cache.get("0123abcd") is None


def test_a_second_writer_of_a_key_leaves_the_first_entry(tmp_path, monkeypatch):
    cache = _open(tmp_path, monkeypatch, "a")
    cache.put("0123abcd", [1, 2])
    before = (cache.dir / "01" / "0123abcd").stat().st_mtime_ns
    other = _open(tmp_path, monkeypatch, "a")  # another process, the same generation
    other.put("0123abcd", [1, 2])
    assert (cache.dir / "01" / "0123abcd").stat().st_mtime_ns == before
    assert other.get("0123abcd") == [1, 2]
    assert not [p for p in (cache.dir / "01").iterdir() if p.name != "0123abcd"]


def test_a_write_that_fails_leaves_no_entry(tmp_path, monkeypatch):
    cache = _open(tmp_path, monkeypatch, "a")
    cache.put("0123abcd", "first")  # makes the key directory

    def full(fd, data):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(cache_module.os, "write", full)
    cache.put("0123beef", list(range(1000)))  # a warning, no exception
    monkeypatch.undo()
    assert not (cache.dir / "01" / "0123beef").exists()
    assert cache.get("0123beef") is None
    assert cache.get("0123abcd") == "first"


def test_keys_holding_paths_round_trip_on_a_cold_cache_without_warnings(
    tmp_path, monkeypatch, caplog
):
    # what the full-symbol index writes: the content's digest, then the file's path
    keys = [
        "0123abcd:torch/_inductor/codegen/triton.py",
        "0123abcd:torch/_inductor/codegen/wrapper.py",  # same digest, another path
        "4567cdef:torch/__init__.py",
        "89abcdef:" + "deep/" * 60 + "x.py",  # longer than a file name may be
        "0123abcd:setup.py",  # a plain file name: kept as it is
    ]
    cache = _open(tmp_path / "cold", monkeypatch, "a")
    with caplog.at_level("DEBUG", logger=cache_module.__name__):
        for n, key in enumerate(keys):
            cache.put(key, n)
    assert not [r for r in caplog.records if r.levelname == "WARNING"], caplog.text
    again = _open(tmp_path / "cold", monkeypatch, "a")  # another process reads them back
    assert [again.get(key) for key in keys] == list(range(len(keys)))
    entries = sorted(p.relative_to(cache.dir) for p in cache.dir.rglob("*") if p.is_file())
    assert len(entries) == len(keys)
    assert all(len(e.parts) == 2 and e.parts[0] == e.parts[1][:2] for e in entries), entries
    assert (cache.dir / "01" / "0123abcd:setup.py").is_file()
