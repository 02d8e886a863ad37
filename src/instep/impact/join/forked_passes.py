"""Passes of the join that run in forked children while the parent matches references.

The pass runner (``join/pass_runner.py``) hands the passes that declare ``forked = True``
to :func:`start`, which forks its children all at once from one pool (so no child is
forked while another pool's thread runs): one per pass, but no more than ``jobs`` - 1, the
CPUs the parent leaves (a child then runs its passes one after the other), and returns
one callable per pass that gives its result. It guarantees the pass's own result: with
``jobs`` 1, where ``fork`` is missing, or when a child dies (memory:
``BrokenProcessPool``), the pass runs in this process when its result is asked for. What
a pass reads is the caller's to check: a child sees the parent as it was at
:func:`start`, so a pass must not read state that the parent sets later (``JoinInputs``'
late services refuse a child: :func:`in_child`), and its result must be picklable and
small.
"""

from __future__ import annotations

import logging
import multiprocessing
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

log = logging.getLogger(__name__)

_PASSES: dict[str, Callable[[], Any]] | None = None  # the passes, for the forked children
_IN_CHILD = False  # set in a forked child, before its pass runs


def in_child() -> bool:
    """Is this process a child :func:`start` forked for a pass?"""
    return _IN_CHILD


def start(jobs: int, passes: dict[str, Callable[[], Any]]) -> dict[str, Callable[[], Any]]:
    """Start every pass of ``passes`` (name -> work) in a forked child when ``jobs`` > 1;
    name -> the callable that gives its result."""
    if jobs <= 1 or not passes or "fork" not in multiprocessing.get_all_start_methods():
        return dict(passes)
    global _PASSES
    _PASSES = passes
    # beyond the CPUs the parent leaves a child only waits for one, while holding what it
    # touched of the parent's pages: on vllm 0.34.0 (3,604 files, 2 CPUs) the hook-name
    # and fork-detection children together held 1,060 MiB beside the parent's 544
    children = min(len(passes), max(1, jobs - 1))
    pool = ProcessPoolExecutor(children, mp_context=multiprocessing.get_context("fork"))
    try:
        # the first submit forks every child at once: each sees _PASSES
        pending = {name: pool.submit(_run, name) for name in passes}
    finally:
        _PASSES = None
        pool.shutdown(wait=False)
    return {name: _result(name, pending[name], work) for name, work in passes.items()}


def _result(name: str, pending, work: Callable[[], Any]) -> Callable[[], Any]:
    def result():
        try:
            return pending.result()
        except BrokenProcessPool:  # the child died (memory): do it here
            log.warning("the %s child died; running it in this process", name)
            return work()

    return result


def _run(name: str) -> Any:
    """Body of a forked child: the pass ``name`` (inherited through ``fork``)."""
    global _IN_CHILD
    assert _PASSES is not None, "started without fork"
    _IN_CHILD = True
    return _PASSES[name]()
