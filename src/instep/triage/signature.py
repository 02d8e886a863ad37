"""Normalised failure signatures: the same root cause gives the same text in every run.

:func:`normalize_message` strips what changes from one run or host to the next while the
cause stays the same: memory addresses, hashes, temporary and cache paths, numbers,
shapes, symbolic sizes (``s0``, ``u1``) and the numeric suffixes of generated kernel
names (``triton_poi_fused_add_0`` -> ``triton_poi_fused_add``). :func:`failure_signature`
builds the stored signature from the exception type and the first meaningful line of its
message. Nothing here decides a layer or a category (see ``classifier.py``).
"""

from __future__ import annotations

import re

#: The store's ``Outcome.signature`` column is 200 characters wide.
MAX_SIGNATURE = 200

_SUBSTITUTIONS: tuple[tuple[re.Pattern[str], str], ...] = (
    # generated kernel names: keep the fused op names, drop the running number
    (re.compile(r"\b((?:triton|cpp|cuda|npu)_\w*?fused\w*?)_\d+\b"), r"\1"),
    (re.compile(r"\b(triton_(?:poi|red|per|tem|unk|spl)_\w+?)_\d+\b"), r"\1"),
    (re.compile(r"\b0x[0-9a-fA-F]+\b"), "0x?"),
    # files in temporary and cache directories: keep only the basename's kind
    (
        re.compile(
            r"(?:/tmp|/var/folders|[\w.~-]*/torchinductor_\w+|[\w/.-]*inductor_cache)[\w/.+-]*"
        ),
        "<tmp>",
    ),
    (re.compile(r"/(?:[\w.+-]+/)+([\w.+-]+\.(?:py|cpp|h|so|json))"), r"<path>/\1"),
    # hashes: long runs of hex / base32 characters holding at least one digit
    (re.compile(r"\b(?=[0-9a-z]*\d)(?=[0-9a-z]*[a-z])[0-9a-z]{16,}\b"), "<hash>"),
    (re.compile(r"torch\.Size\(\[[^\]]*\]\)"), "torch.Size([*])"),
    (re.compile(r"\[(?:\s*-?\d+\s*,)+\s*-?\d+\s*,?\s*\]"), "[*]"),
    (re.compile(r"\((?:\s*-?\d+\s*,)+\s*-?\d*\s*\)"), "(*)"),
    (re.compile(r"\b([suqzp])\d+\b"), r"\1N"),  # symbolic sizes s0, u1, ...
    (re.compile(r"-?\b\d+(?:\.\d+)?(?:[eE][-+]?\d+)?\b"), "N"),
    (re.compile(r"[ \t]+"), " "),
)


def normalize_message(text: str) -> str:
    """``text`` with run-specific details replaced by placeholders (see the module doc)."""
    out = text.strip()
    for pattern, repl in _SUBSTITUTIONS:
        out = pattern.sub(repl, out)
    return out


def headline(message: str) -> str:
    """The first line of ``message`` that says something (skips blank and ``^`` lines)."""
    for line in message.splitlines():
        stripped = line.strip()
        if stripped and not set(stripped) <= set("^~-=*"):
            return stripped
    return ""


def short_type(exception_type: str | None) -> str:
    """``torch._inductor.exc.LoweringException`` -> ``LoweringException``."""
    return (exception_type or "").rsplit(".", 1)[-1]


def failure_signature(exception_type: str | None, message: str | None) -> str:
    """``Type: normalised headline``, at most :data:`MAX_SIGNATURE` characters."""
    head = normalize_message(headline(message or ""))
    kind = short_type(exception_type)
    text = f"{kind}: {head}" if kind and head else (kind or head or "<no message>")
    return text if len(text) <= MAX_SIGNATURE else text[: MAX_SIGNATURE - 1] + "…"
