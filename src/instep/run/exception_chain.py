"""Exceptions as data: the whole chain of a Python exception, or the frames of a crash dump.

``exception_chain(exc)`` walks ``__cause__``, ``__context__`` and the inner exception
that torch's ``BackendCompilerFailed`` / ``InductorError`` carry (``inner_exception``),
and gives one dict per exception with its frames (file, module from the frame's globals
``__name__``, function, line). ``faulthandler_frames(text)`` reads the Python frames of a
faulthandler dump (segfault, abort, a hang dumped on timeout). Classification is not here.
"""

from __future__ import annotations

import re
from types import TracebackType
from typing import Any

MAX_EXCEPTIONS = 16
MAX_FRAMES = 120
MAX_MESSAGE = 4000
_INNER_ATTRS = ("inner_exception", "inner")


def qualified_name(exc: BaseException) -> str:
    cls = type(exc)
    module = cls.__module__
    return (
        cls.__qualname__ if module in ("builtins", "__main__") else f"{module}.{cls.__qualname__}"
    )


def exception_message(exc: BaseException) -> str:
    try:
        text = str(exc)
    except Exception as inner:  # a broken __str__ must not lose the outcome
        text = f"<unprintable {type(exc).__name__}: {type(inner).__name__}>"
    return text if len(text) <= MAX_MESSAGE else text[:MAX_MESSAGE] + "…"


def traceback_frames(tb: TracebackType | None) -> list[dict[str, Any]]:
    frames: list[dict[str, Any]] = []
    while tb is not None:
        frame = tb.tb_frame
        frames.append(
            {
                "file": frame.f_code.co_filename,
                "module": frame.f_globals.get("__name__"),
                "function": frame.f_code.co_name,
                "line": tb.tb_lineno,
            }
        )
        tb = tb.tb_next
    if len(frames) > MAX_FRAMES:  # keep both ends: the entry point and where it broke
        half = MAX_FRAMES // 2
        frames = [*frames[:half], {"elided": len(frames) - MAX_FRAMES}, *frames[-half:]]
    return frames


def exception_chain(exc: BaseException) -> list[dict[str, Any]]:
    """The chain outermost first; each entry says how it relates to the one before it."""
    chain: list[dict[str, Any]] = []
    seen: set[int] = set()
    todo: list[tuple[BaseException, str | None]] = [(exc, None)]
    while todo and len(chain) < MAX_EXCEPTIONS:
        current, relation = todo.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        chain.append(
            {
                "type": qualified_name(current),
                "message": exception_message(current),
                "relation": relation,
                "frames": traceback_frames(current.__traceback__),
            }
        )
        for attr in _INNER_ATTRS:
            inner = getattr(current, attr, None)
            if isinstance(inner, BaseException):
                todo.append((inner, "inner"))
                break
        if current.__cause__ is not None:
            todo.append((current.__cause__, "cause"))
        elif current.__context__ is not None and not current.__suppress_context__:
            todo.append((current.__context__, "context"))
    return chain


_FAULT_THREAD = re.compile(r"^(Current thread|Thread) 0x[0-9a-f]+")
_FAULT_FRAME = re.compile(r'^\s+File "(?P<file>.*)", line (?P<line>\d+) in (?P<function>\S+)')


def faulthandler_frames(text: str) -> dict[str, Any] | None:
    """The frames of the thread that crashed (or, for a dump on request, the main thread).

    faulthandler prints each thread's most recent call first; the frames are reversed
    here so they read like a traceback. The "Current thread" block is preferred.
    ``None`` when ``text`` holds no dump.
    """
    blocks: list[tuple[str, list[dict[str, Any]]]] = []
    fatal = None
    for line in text.splitlines():
        if line.startswith("Fatal Python error:"):
            fatal = line
        if _FAULT_THREAD.match(line):
            blocks.append((line, []))
            continue
        frame = _FAULT_FRAME.match(line)
        if frame and blocks:
            blocks[-1][1].append(
                {
                    "file": frame["file"],
                    "module": None,
                    "function": frame["function"],
                    "line": int(frame["line"]),
                }
            )
    if not blocks:
        return None
    header, frames = next((b for b in blocks if b[0].startswith("Current")), blocks[0])
    return {"header": fatal or header, "frames": list(reversed(frames))}


def module_from_path(path: str) -> str | None:
    """The dotted module a file of an installed package is, from its path (no import).

    ``.../site-packages/torch/_inductor/codegen/cpp.py`` -> ``torch._inductor.codegen.cpp``.
    Used for frames of a faulthandler dump, which carry files but no module names.
    """
    norm = path.replace("\\", "/")
    for marker in ("/site-packages/", "/dist-packages/"):
        if marker in norm:
            rel = norm.rsplit(marker, 1)[1]
            break
    else:
        return None
    if not rel.endswith(".py"):
        return None
    parts = rel[: -len(".py")].split("/")
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts) if parts and all(p.isidentifier() for p in parts) else None
