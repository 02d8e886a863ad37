"""Cyclic garbage collection paused while the analysis builds its indexes.

Parsing and indexing allocate millions of acyclic objects (AST nodes, symbols,
references); every few hundred allocations CPython's cyclic collector walks the young
ones, and ever more often the whole heap, finding nothing to free. Reference counting
still frees everything. Measured on torch_npu's 1,702 files, one process: the downstream
index takes 16.9 s with the collector and 12.7 s without. Worker processes forked while
it is paused inherit the pause.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def no_cyclic_gc() -> Iterator[None]:
    """Pause the cyclic collector for the block (as it was afterwards)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
