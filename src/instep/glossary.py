"""instep's glossary: one word per concept for every Chinese text it writes.

``data/glossary.toml`` (read once) fixes the zh word of each concept (layer 层, tier
档位, profile 配置档, triage 归因, unclassified 未分类...), the words a zh text must not use
for it, the zh words of the stored values (statuses, triad leg states, layer
descriptions) and the zh texts of each output, keyed as the English texts in the code
are. Renderers ask here; nothing here renders or reads the store. :func:`cut` shortens a
text at a word boundary and says so with an ellipsis.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any

from instep.tomlfile import load_toml

GLOSSARY = Path(__file__).resolve().parent / "data" / "glossary.toml"
LANGS = ("en", "zh")
ELLIPSIS = "…"


@functools.lru_cache(maxsize=1)
def glossary() -> dict[str, Any]:
    return load_toml(GLOSSARY)


def term(concept: str, lang: str) -> str:
    """The word of ``concept`` (a key of ``[terms]``) in ``lang``."""
    return str(glossary()["terms"][concept]["zh" if lang == "zh" else "en"])


def status(value: object, lang: str) -> str:
    """A stored status (``failed``) as a reader of ``lang`` says it; unknown ones as is."""
    entry = glossary()["status"].get(str(value))
    return str(entry["zh" if lang == "zh" else "en"]) if entry else str(value)


def leg_state(value: object, lang: str) -> str:
    """A triad leg's state (``ok``, ``fail``, ``mismatch``) in ``lang``."""
    entry = glossary()["leg"].get(str(value))
    return str(entry["zh" if lang == "zh" else "en"]) if entry else str(value)


def layer_description(layer: str) -> str | None:
    """What breaks in ``layer``, in Chinese (``None`` for a name that is not a layer)."""
    return glossary()["layer"].get(layer)


def texts(area: str, english: dict[str, Any], lang: str) -> dict[str, Any]:
    """The texts of ``area`` in ``lang``: ``english`` itself, or its zh texts here."""
    return english if lang != "zh" else dict(glossary()["texts"][area])


def avoided(text: str) -> list[str]:
    """The words of ``text`` that a zh text must not use (``[terms].*.avoid``)."""
    found = []
    for entry in glossary()["terms"].values():
        for pattern in entry.get("avoid", ()):
            found += [m.group(0) for m in re.finditer(pattern, text)]
    return found


def cut(text: str, limit: int) -> str:
    """``text`` on one line, at most ``limit`` characters; a cut ends at a word boundary
    (for text without spaces, at ``limit``) and with an ellipsis."""
    flat = " ".join(str(text).split())
    if len(flat) <= limit:
        return flat
    head = flat[: limit - 1]
    space = head.rfind(" ")
    if space > limit // 2:
        head = head[:space]
    return head.rstrip(" ,;:") + ELLIPSIS
