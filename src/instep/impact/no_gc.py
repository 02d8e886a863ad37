"""Cyclic garbage collection paused while the analysis builds its indexes; the C heap's
free pages handed back after them (:func:`give_back_heap`).

Parsing and indexing allocate millions of acyclic objects (AST nodes, symbols,
references); every few hundred allocations CPython's cyclic collector walks the young
ones, and ever more often the whole heap, finding nothing to free. Reference counting
still frees everything. Measured on torch_npu's 1,702 files, one process: the downstream
index takes 16.9 s with the collector and 12.7 s without. Worker processes forked while
it is paused inherit the pause.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def no_cyclic_gc() -> Iterator[None]:
    """Pause the cyclic collector for the block (as it was afterwards).

    Every object allocated during the pause is still in the youngest generation when it
    ends, so the first collection after it would walk all of them: 1.8 s of a cold
    release analysis (torch 2.13.0 -> 2.14.1 on torch-npu 2.13.0, one process, sampled
    with py-spy) spent finding nothing to free. So the survivors are handed to the
    oldest generation first (``gc.freeze`` then ``gc.unfreeze``, two list splices), which
    is collected only once it has grown by a quarter, as for any long-lived objects;
    cycles among them are still found then. Not when something else froze objects: that
    is left as it was.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            if gc.get_freeze_count() == 0:
                gc.freeze()
                gc.unfreeze()
            gc.enable()


@contextmanager
def collected_after() -> Iterator[None]:
    """Collect, when the block ends, the cyclic garbage made in it, walking only what was
    made in it.

    Under :func:`no_cyclic_gc` a cycle is never freed before the collector runs again: the
    impact join leaves its services in cycles (a pass keeping its own bound methods in a
    helper it holds: ``DroppedAttributes`` and ``SkippedInit``, ``PatchInstalls`` and
    ``SwitchValues``), and through them the upstream index, the syntax trees and the texts
    it read, about 1.2 million objects and 60 MiB still held when the report is written.
    What exists before the block is frozen meanwhile (``gc.freeze``), so the collection
    walks the block's objects only, then unfrozen. Not when something else froze objects:
    then nothing is collected here.
    """
    if gc.get_freeze_count() != 0:
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.collect()
        gc.unfreeze()


def give_back_heap() -> bool:
    """Hand the C heap's free pages back to the system (glibc's ``malloc_trim``); False
    where there is no glibc. Python keeps small objects in arenas of its own and frees an
    arena only when it is empty, but texts, bytes and large lists come from the C heap,
    whose free pages stay in the process until trimmed: after the indexing of a release
    (texts read, results unpickled from the workers and dropped) trimming took the parent
    from 281 to 235 MiB before the join, and its peak during the join 546 -> 537 MiB
    (issue #32). Costs a few milliseconds; nothing is freed that is in use."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True


@functools.cache
def _malloc_trim():
    name = ctypes.util.find_library("c")
    try:
        return ctypes.CDLL(name).malloc_trim if name else None
    except (OSError, AttributeError):
        return None
