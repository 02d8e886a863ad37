"""Well-known upstream handles and config modules, from ``data/handles.toml``.

:func:`apply_handles` rewrites ``V.graph.sizevars`` to ``SizeVarAllocator`` and the like;
:func:`config_key` says whether a dotted name is an upstream config key. Data only.
"""

from __future__ import annotations

import re
from functools import lru_cache
from importlib import resources

from instep.impact.upstream.c_shims import shim_name_pattern
from instep.tomlfile import parse_toml


@lru_cache(maxsize=1)
def _data() -> tuple[tuple[tuple[str, str], ...], tuple[str, ...], frozenset[str], re.Pattern]:
    text = (resources.files("instep.impact") / "data" / "handles.toml").read_text("utf-8")
    raw = parse_toml(text, "instep/impact/data/handles.toml")
    handles = tuple(sorted(raw.get("handles", {}).items(), key=lambda kv: -len(kv[0])))
    cfg = raw.get("config", {})
    shim = shim_name_pattern()
    return handles, tuple(cfg.get("modules", ())), frozenset(cfg.get("api", ())), shim


def handles() -> dict[str, str]:
    return dict(_data()[0])


@lru_cache(maxsize=1)
def handle_classes() -> frozenset[str]:
    """The classes the handles hold instances of: a chain that a handle rewrites to one of
    these names an instance (``V.graph``), never the class object, so it never
    constructs one."""
    return frozenset(v for _, v in _data()[0])


@lru_cache(maxsize=1)
def _handle_map() -> dict[str, str]:
    return dict(_data()[0])


def apply_handles(dotted: str) -> tuple[str, bool]:
    """Rewrite well-known handle prefixes; returns (name, whether a handle applied)."""
    table = _handle_map()
    used = False
    for _ in range(8):
        parts = dotted.split(".")
        for i in range(len(parts), 1, -1):  # longest prefix first
            key = ".".join(parts[:i])
            value = table.get(key)
            if value is not None:
                dotted = value + dotted[len(key) :]
                used = True
                break
        else:
            break
    return dotted, used


def config_key(dotted: str) -> tuple[str, str] | None:
    """'torch._inductor.config.triton.x' -> ('torch._inductor.config', 'triton.x')."""
    _, modules, api, _ = _data()
    for mod in modules:
        if dotted.startswith(mod + "."):
            key = dotted[len(mod) + 1 :]
            if key.split(".", 1)[0] in api:
                return None
            return mod, key
    return None
