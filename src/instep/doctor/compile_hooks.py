"""The glue between torch's compile internals and :class:`StageRecorder`.

Hooks are installed once per process, *when* the torch module concerned is imported (a
post-import hook on ``sys.meta_path``), so a script keeps its own import order and env
setup before ``import torch``; if torch is already imported they are installed at once.
They forward to the active recorder (:func:`activate`) and do nothing when there is none.
Every hook is guarded: an exception inside instep never reaches the compile.

- ``torch._dynamo.utils.ChromiumEventLogger.log_event_start/end``: every ``dynamo_timed``
  phase, with its compile id;
- ``torch._inductor.output_code.CompiledFxGraph``: the first run of each compiled graph;
- ``torch._inductor.async_compile.AsyncCompile.triton`` and ``torch._inductor.codecache``
  ``CppCodeCache/CppPythonBindingsCodeCache.load_async``: kernel names being compiled;
- ``torch._inductor.select_algorithm``: a feedback saver logging each autotuned op's
  inputs (shape, dtype, stride) and candidates with their timings (``inf``: failed);
- ``torch._inductor.runtime.triton_heuristics.CachingAutotuner``: configs benchmarked and
  the config whose precompile raised.

The names hooked are those of torch 2.13; a missing one is skipped (and listed by
:func:`installed_hooks`), never an error. Nothing here decides what is slow. The recorder
is whatever has the :class:`Recorder` methods (``stage_timing.StageRecorder``, which
imports this module to activate itself: this module never imports it).
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.machinery
import linecache
import logging
import re
import sys
import threading
import types
from collections.abc import Callable
from typing import Any, Protocol

FIRST_RUN_EVENT = "instep.first_run"  # the event the first run of a compiled graph records

log = logging.getLogger(__name__)


class Recorder(Protocol):
    """What the hooks call on the active recorder (``stage_timing.StageRecorder``)."""

    autotune: list[dict[str, Any]]
    graph_name_hint: Callable[[], str | None]
    _lock: threading.RLock

    def event_start(self, name: str, compile_id: str | None = None) -> None: ...

    def event_end(self, name: str) -> None: ...

    def kernel_started(self, kernel: str) -> None: ...

    def latest_graph_without_run(self) -> str | None: ...


_ACTIVE: Recorder | None = None
_INSTALLED: dict[str, bool] = {}  # hook name -> installed
_PENDING: dict[str, list[Callable[[types.ModuleType], None]]] = {}
_REQUESTED = False
_LOCK = threading.RLock()


def activate(recorder: Recorder) -> None:
    """Make ``recorder`` receive the events; installs the hooks (now or on import)."""
    global _ACTIVE
    _ACTIVE = recorder
    recorder.graph_name_hint = dynamo_frame_name
    install()


def deactivate(recorder: Recorder | None = None) -> None:
    global _ACTIVE
    if recorder is None or _ACTIVE is recorder:
        _ACTIVE = None


def active_recorder() -> Recorder | None:
    return _ACTIVE


def installed_hooks() -> dict[str, bool]:
    return dict(_INSTALLED)


def install() -> None:
    """Install every hook, each when its module is (or already was) imported."""
    global _REQUESTED
    with _LOCK:
        if _REQUESTED:
            return
        _REQUESTED = True
    when_imported("torch._dynamo.utils", _hook_event_logger)
    when_imported("torch._inductor.output_code", _hook_first_run)
    when_imported("torch._inductor.async_compile", _hook_async_compile)
    when_imported("torch._inductor.select_algorithm", _hook_select_algorithm)
    when_imported("torch._inductor.runtime.triton_heuristics", _hook_caching_autotuner)


# ------------------------------------------------------------------ post-import hooks


class _PostImportFinder(importlib.abc.MetaPathFinder):
    """Wraps the loader of watched modules so a callback runs right after they execute."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname not in _PENDING:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _CallbackLoader(spec.loader)
                return spec
        return None


class _CallbackLoader(importlib.abc.Loader):
    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> Any:
        return self.inner.create_module(spec)

    def exec_module(self, module: types.ModuleType) -> None:
        self.inner.exec_module(module)
        _run_pending(module.__name__, module)

    def __getattr__(self, name: str) -> Any:  # get_source, get_code, ... for tracebacks
        return getattr(self.inner, name)


_FINDER = _PostImportFinder()


def _run_pending(name: str, module: types.ModuleType) -> None:
    with _LOCK:
        callbacks = _PENDING.pop(name, [])
    for callback in callbacks:
        try:
            callback(module)
        except Exception:  # a hook that fails must not break the user's import
            log.debug("instep hook on %s failed", name, exc_info=True)


def when_imported(name: str, callback: Callable[[types.ModuleType], None]) -> None:
    """Call ``callback(module)`` now if ``name`` is imported, else right after its import."""
    module = sys.modules.get(name)
    if module is not None and not _importing(module):
        try:
            callback(module)
        except Exception:
            log.debug("instep hook on %s failed", name, exc_info=True)
        return
    with _LOCK:
        _PENDING.setdefault(name, []).append(callback)
        if _FINDER not in sys.meta_path:
            sys.meta_path.insert(0, _FINDER)


def _importing(module: types.ModuleType) -> bool:
    spec = getattr(module, "__spec__", None)
    return bool(spec is not None and getattr(spec, "_initializing", False))


# ------------------------------------------------------------------ the hooks


def _current_compile_id() -> str | None:
    guards = sys.modules.get("torch._guards")
    try:
        cid = guards.CompileContext.current_compile_id() if guards else None
    except Exception:
        return None
    return None if cid is None else str(cid)


def _hook_event_logger(utils: types.ModuleType) -> None:
    cls = getattr(utils, "ChromiumEventLogger", None)
    if cls is None or getattr(cls, "_instep_hooked", False):
        _INSTALLED["event_logger"] = cls is not None
        return
    orig_start, orig_end = cls.log_event_start, cls.log_event_end

    def log_event_start(self: Any, event_name: str, *args: Any, **kwargs: Any) -> Any:
        rec = _ACTIVE
        if rec is not None:
            try:
                explicit = kwargs.get("compile_id", args[3] if len(args) > 3 else None)
                cid = str(explicit) if explicit is not None else _current_compile_id()
                rec.event_start(event_name, cid)
            except Exception:
                log.debug("instep: event start failed", exc_info=True)
        return orig_start(self, event_name, *args, **kwargs)

    def log_event_end(self: Any, event_name: str, *args: Any, **kwargs: Any) -> Any:
        rec = _ACTIVE
        if rec is not None:
            try:
                rec.event_end(event_name)
            except Exception:
                log.debug("instep: event end failed", exc_info=True)
        return orig_end(self, event_name, *args, **kwargs)

    cls.log_event_start, cls.log_event_end = log_event_start, log_event_end
    cls._instep_hooked = True
    _INSTALLED["event_logger"] = True


def _hook_first_run(output_code: types.ModuleType) -> None:
    cls = getattr(output_code, "CompiledFxGraph", None)
    if cls is None or getattr(cls, "_instep_hooked", False):
        _INSTALLED["first_run"] = cls is not None
        return
    orig_init, orig_call = cls.__init__, cls.__call__

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        orig_init(self, *args, **kwargs)
        with contextlib.suppress(Exception):
            self._instep_compile_id = _current_compile_id()

    def __call__(self: Any, *args: Any, **kwargs: Any) -> Any:
        rec = _ACTIVE
        if rec is None or getattr(self, "_instep_ran", False):
            return orig_call(self, *args, **kwargs)
        try:
            self._instep_ran = True
        except Exception:
            return orig_call(self, *args, **kwargs)
        cid = getattr(self, "_instep_compile_id", None) or rec.latest_graph_without_run()
        rec.event_start(FIRST_RUN_EVENT, cid)
        try:
            return orig_call(self, *args, **kwargs)
        finally:
            rec.event_end(FIRST_RUN_EVENT)

    cls.__init__, cls.__call__ = __init__, __call__
    cls._instep_hooked = True
    _INSTALLED["first_run"] = True


_ASSIGNED = re.compile(r"^\s*(\w+)\s*=\s*async_compile\.")


def _assigned_name(frame: types.FrameType | None) -> str | None:
    """'cpp_fused_add_0' from the generated line 'cpp_fused_add_0 = async_compile.cpp(...'."""
    if frame is None:
        return None
    try:
        line = linecache.getline(frame.f_code.co_filename, frame.f_lineno)
    except Exception:
        return None
    match = _ASSIGNED.match(line)
    return match.group(1) if match else None


def _hook_async_compile(async_compile: types.ModuleType) -> None:
    cls = getattr(async_compile, "AsyncCompile", None)
    if cls is None or getattr(cls, "_instep_hooked", False):
        _INSTALLED["kernel_names"] = cls is not None
        return
    orig_triton = getattr(cls, "triton", None)
    if orig_triton is not None:

        def triton(self: Any, kernel_name: str, *args: Any, **kwargs: Any) -> Any:
            _note_kernel(str(kernel_name))
            return orig_triton(self, kernel_name, *args, **kwargs)

        cls.triton = triton
    for meth in ("cpp", "cpp_pybinding"):
        orig = getattr(cls, meth, None)
        if orig is None:
            continue

        def make(orig: Callable[..., Any]) -> Callable[..., Any]:
            def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
                _note_kernel(_assigned_name(sys._getframe(1)) or "cpp kernel")
                return orig(self, *args, **kwargs)

            return wrapper

        setattr(cls, meth, make(orig))
    cls._instep_hooked = True
    _INSTALLED["kernel_names"] = True


def _note_kernel(name: str) -> None:
    rec = _ACTIVE
    if rec is not None:
        with contextlib.suppress(Exception):
            rec.kernel_started(name)


def _describe_node(node: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"name": _safe(lambda: node.get_name())}
    out["shape"] = _safe(lambda: [str(s) for s in node.get_size()])
    out["stride"] = _safe(lambda: [str(s) for s in node.get_stride()])
    out["dtype"] = _safe(lambda: str(node.get_dtype()))
    out["device"] = _safe(lambda: str(node.get_device()))
    return out


def _one_line(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {' '.join(str(exc).split())[:500]}"


def _safe(fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except Exception:
        return None


def _hook_select_algorithm(select_algorithm: types.ModuleType) -> None:
    add = getattr(select_algorithm, "add_feedback_saver", None)
    if add is None:
        _INSTALLED["autotune_select_algorithm"] = False
        return

    def saver(timings: Any, name: str, input_nodes: Any, choices: Any, *rest: Any) -> None:
        rec = _ACTIVE
        if rec is None:
            return
        candidates = []
        for choice, seconds in dict(timings).items():
            candidates.append(
                {
                    "choice": _safe(lambda c=choice: c.name) or str(choice),
                    "description": _safe(lambda c=choice: c.description),
                    "time_ms": None if seconds is None else float(seconds),
                    "failed": seconds is None or seconds == float("inf"),
                }
            )
        entry = {
            "kind": "select_algorithm",
            "op": name,
            "compile_id": _current_compile_id(),
            "inputs": [_describe_node(n) for n in (input_nodes or [])],
            "candidates": candidates,
            "failed": [c["choice"] for c in candidates if c["failed"]],
        }
        with rec._lock:
            rec.autotune.append(entry)

    add(saver)
    _INSTALLED["autotune_select_algorithm"] = True


def _hook_caching_autotuner(triton_heuristics: types.ModuleType) -> None:
    cls = getattr(triton_heuristics, "CachingAutotuner", None)
    if cls is None or getattr(cls, "_instep_hooked", False):
        _INSTALLED["autotune_triton"] = cls is not None
        return
    orig_bench = getattr(cls, "benchmark_all_configs", None)
    orig_pre = getattr(cls, "_precompile_config", None)

    def kernel_of(self: Any) -> str:
        return str(
            _safe(lambda: self.fn.__name__) or _safe(lambda: self.inductor_meta["kernel_name"])
        )

    if orig_bench is not None:

        def benchmark_all_configs(self: Any, *args: Any, **kwargs: Any) -> Any:
            timings = orig_bench(self, *args, **kwargs)
            rec = _ACTIVE
            if rec is not None:
                try:
                    entry = {
                        "kind": "triton",
                        "kernel": kernel_of(self),
                        "compile_id": _current_compile_id(),
                        "inputs": [
                            {
                                "shape": list(a.shape),
                                "stride": list(a.stride()),
                                "dtype": str(a.dtype),
                            }
                            for a in args
                            if hasattr(a, "shape") and hasattr(a, "stride")
                        ],
                        "candidates": [
                            {
                                "config": str(_safe(lambda la=launcher: la.config)),
                                "time_ms": float(t),
                            }
                            for launcher, t in dict(timings).items()
                        ],
                    }
                    with rec._lock:
                        rec.autotune.append(entry)
                except Exception:
                    pass
            return timings

        cls.benchmark_all_configs = benchmark_all_configs
    if orig_pre is not None:

        def _precompile_config(self: Any, cfg: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                return orig_pre(self, cfg, *args, **kwargs)
            except BaseException as exc:
                rec = _ACTIVE
                if rec is not None:
                    with rec._lock:
                        rec.autotune.append(
                            {
                                "kind": "triton_precompile_failure",
                                "kernel": kernel_of(self),
                                "compile_id": _current_compile_id(),
                                "config": str(cfg),
                                "error": _one_line(exc),
                            }
                        )
                raise

        cls._precompile_config = _precompile_config
    cls._instep_hooked = True
    _INSTALLED["autotune_triton"] = True


# ------------------------------------------------------------------ graph names


def dynamo_frame_name() -> str | None:
    """'fn (file.py:12)' for the frame Dynamo is compiling, read from the call stack."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name in ("_compile", "compile_inner", "_compile_inner"):
            code = frame.f_locals.get("code")
            if isinstance(code, types.CodeType):
                return f"{code.co_name} ({code.co_filename}:{code.co_firstlineno})"
        frame = frame.f_back
    return None
