"""Which Inductor cache a compile will use, and whether it held anything beforehand.

A figure from a warm cache and one from a cold cache are not the same figure, so every
command that compiles (``instep run``, ``instep doctor compile``) records both. The
caller's ``TORCHINDUCTOR_CACHE_DIR`` / ``TRITON_CACHE_DIR`` are never replaced; this
module only reads the environment and the directory, it never creates or clears one.
"""

from __future__ import annotations

import getpass
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

#: Where Inductor and Triton keep compiled artifacts; a caller's value is never replaced.
CACHE_VARIABLES = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")


def inductor_cache(env: Mapping[str, str]) -> Path:
    """The Inductor cache directory a process with ``env`` will use, as torch chooses it."""
    if env.get("TORCHINDUCTOR_CACHE_DIR"):
        return Path(env["TORCHINDUCTOR_CACHE_DIR"])
    user = getpass.getuser().replace("\\", "_")  # torch._inductor.runtime.cache_dir_utils
    return Path(tempfile.gettempdir()) / f"torchinductor_{user}"


def cache_state(env: Mapping[str, str]) -> dict[str, Any]:
    """``inductor_cache_dir`` and ``inductor_cache_empty_at_start`` for ``env``, now."""
    cache = inductor_cache(env)
    try:
        empty = not any(cache.iterdir())
    except OSError:
        empty = True  # not there yet: torch creates it
    return {"inductor_cache_dir": str(cache), "inductor_cache_empty_at_start": empty}
