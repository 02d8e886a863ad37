"""Notice a dead compile worker at once, instead of a hang in ``async_compile.wait()``.

:class:`CompileWorkerMonitor` inspects process pools (by default the ones torch's Inductor
created: ``torch._inductor.async_compile._pool_set``, read only when torch is already
imported) and reports each worker process that died: a ``ProcessPoolExecutor`` worker
with a non-zero exit code, or an Inductor ``SubprocPool`` sidecar that exited while the
pool was running. With ``fail_pending=True`` it also fails the futures still waiting on a
dead sidecar, so that ``async_compile.wait()`` raises instead of waiting for ever.
It does not restart pools and does not decide what to tell the user (see ``watchdog``).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class DeadWorker:
    pid: int
    exit_code: int | None  # negative: killed by that signal
    pool: str  # the pool's class name
    pending: int  # work items that were waiting on the pool
    failed_futures: int = 0  # futures instep failed so that a wait raises

    @property
    def description(self) -> str:
        if self.exit_code is not None and self.exit_code < 0:
            how = f"killed by signal {-self.exit_code}"
        else:
            how = f"exited with code {self.exit_code}"
        return f"compile worker {self.pid} ({self.pool}) {how} with {self.pending} job(s) pending"

    def as_dict(self) -> dict[str, Any]:
        return {
            "pid": self.pid,
            "exit_code": self.exit_code,
            "pool": self.pool,
            "pending": self.pending,
            "failed_futures": self.failed_futures,
            "description": self.description,
        }


def torch_compile_pools() -> list[Any]:
    """The pools Inductor's async compile created in this process (none before import)."""
    module = sys.modules.get("torch._inductor.async_compile")
    pools = getattr(module, "_pool_set", None) if module is not None else None
    return list(pools) if pools else []


class CompileWorkerMonitor:
    def __init__(
        self,
        pools: Callable[[], Iterable[Any]] = torch_compile_pools,
        fail_pending: bool = True,
    ) -> None:
        self.pools = pools
        self.fail_pending = fail_pending
        self._reported: set[int] = set()

    def check(self) -> list[DeadWorker]:
        """Workers that died since the last call."""
        dead: list[DeadWorker] = []
        for pool in self.pools():
            try:
                dead.extend(self._check_pool(pool))
            except Exception:  # a pool torn down under our feet: look again next time
                continue
        return dead

    def _check_pool(self, pool: Any) -> list[DeadWorker]:
        out: list[DeadWorker] = []
        name = type(pool).__name__
        processes = getattr(pool, "_processes", None)
        if isinstance(processes, dict):  # concurrent.futures.ProcessPoolExecutor
            pending = len(getattr(pool, "_pending_work_items", {}) or {})
            for pid, proc in list(processes.items()):
                code = getattr(proc, "exitcode", None)
                if code not in (None, 0) and pid not in self._reported:
                    self._reported.add(pid)
                    out.append(DeadWorker(pid, code, name, pending))
        sidecar = getattr(pool, "process", None)
        if sidecar is not None and hasattr(sidecar, "poll"):  # Inductor's SubprocPool
            code = sidecar.poll()
            pid = sidecar.pid
            if code is not None and pid not in self._reported:
                futures = getattr(pool, "pending_futures", {}) or {}
                waiting = [f for f in list(futures.values()) if not f.done()]
                if waiting or getattr(pool, "running", False):
                    self._reported.add(pid)
                    failed = self._fail(waiting, pid, code) if self.fail_pending else 0
                    out.append(DeadWorker(pid, code, name, len(waiting), failed))
        return out

    @staticmethod
    def _fail(futures: list[Any], pid: int, code: int) -> int:
        failed = 0
        for fut in futures:
            try:
                fut.set_exception(
                    RuntimeError(
                        f"compile worker {pid} died (exit code {code}); failed by instep's"
                        " watchdog instead of waiting for ever"
                    )
                )
                failed += 1
            except Exception:  # already resolved meanwhile
                continue
        return failed
