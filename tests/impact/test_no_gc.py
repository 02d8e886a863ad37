"""The cyclic collector is paused for a block and hands what survived it to the oldest
generation, so the first collection after the pause does not walk every object the
analysis made; cycles among them are still collected by a full collection."""

from __future__ import annotations

import gc
import os
import sys
import weakref

import pytest

from instep.impact.no_gc import collected_after, give_back_heap, no_cyclic_gc


class _Node:
    def __init__(self) -> None:
        self.me = self  # a reference cycle: only the cyclic collector frees it


@pytest.fixture
def collector():
    was = gc.isenabled()
    gc.enable()
    gc.collect()
    yield
    gc.unfreeze()
    if not was:
        gc.disable()


def test_the_block_runs_paused_and_its_survivors_leave_the_young_generation(collector):
    with no_cyclic_gc():
        assert not gc.isenabled()
        kept = [{"n": [i]} for i in range(10_000)]
    assert gc.isenabled()
    assert gc.get_freeze_count() == 0
    young = {id(o) for o in gc.get_objects(generation=0)}
    assert not any(id(d) in young for d in kept[::1000])
    oldest = {id(o) for o in gc.get_objects(generation=2)}
    assert all(id(d) in oldest for d in kept[::1000])


def test_cycles_made_in_the_block_are_still_collected(collector):
    with no_cyclic_gc():
        _Node()
    assert gc.collect() >= 1


def test_a_nested_block_and_objects_frozen_by_someone_else_are_left_alone(collector):
    gc.freeze()
    frozen = gc.get_freeze_count()
    with no_cyclic_gc():
        with no_cyclic_gc():
            pass
        assert not gc.isenabled()  # the inner block does not resume collection
        [{"n": [i]} for i in range(100)]
    assert gc.isenabled()
    assert gc.get_freeze_count() == frozen


def test_cycles_made_in_a_collected_block_are_freed_when_it_ends() -> None:
    with no_cyclic_gc():
        old = weakref.ref(_Node())  # a cycle made before the block
        with collected_after():
            made = weakref.ref(_Node())  # reference counting alone never frees it
            assert made() is not None
        assert made() is None
        assert old() is not None  # made before the block: frozen meanwhile, not walked
        assert gc.get_freeze_count() == 0


def test_a_collected_block_leaves_objects_frozen_by_others_alone() -> None:
    with no_cyclic_gc():
        gc.freeze()
        try:
            frozen = gc.get_freeze_count()
            with collected_after():
                made = weakref.ref(_Node())
            assert made() is not None  # nothing collected: someone else's freeze stands
            assert gc.get_freeze_count() == frozen
        finally:
            gc.unfreeze()


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc and /proc")
def test_the_heap_s_free_pages_go_back_to_the_system():
    """Texts and bytes live on the C heap: freed in the middle of it, their pages stay in
    the process (the parent's RSS after a release's indexing) until trimmed."""
    chunks = [bytes([k % 251]) * 65_536 for k in range(1_000)]  # 64 MiB, under mmap's bar
    kept = chunks[1::2]
    del chunks  # every other chunk freed: 32 MiB of holes between live ones
    before = _rss()
    assert give_back_heap()
    assert before - _rss() > 16 << 20
    assert all(c == bytes([(2 * k + 1) % 251]) * 65_536 for k, c in enumerate(kept))
