"""What a receiver whose type upstream does not write down can be.

``self.backend.m(...)``, ``self.get_backend(device).m(...)``: upstream reaches a backend's
scheduling or kernel object only through a registry, so the breaking-path search
(:mod:`~instep.impact.join.breaking_path`) follows such a call when, in the whole new
upstream, only the changed class's hierarchy (the class, its ancestors, its subclasses)
defines the method, and neither a module function, another class nor Python's standard
library does (:func:`only_in_hierarchy`). Static only; it decides nothing.
"""

from __future__ import annotations

import functools
import re
import sysconfig
from pathlib import Path

from instep.impact.join.upstream_calls import UpstreamCalls

_METHOD_DEF = re.compile(rb"^[ \t]+(?:async[ \t]+)?def[ \t]+(\w+)[ \t]*\(", re.MULTILINE)


@functools.lru_cache(maxsize=1)
def _stdlib_methods() -> frozenset[bytes]:
    """The method names Python's standard library defines (indented ``def``s), read from
    the running interpreter's stdlib sources (tests left out): a receiver that upstream
    does not type could be one of those objects (``handler.emit``, ``thread.run``)."""
    root = Path(sysconfig.get_paths()["stdlib"])
    names: set[bytes] = set()
    for path in root.rglob("*.py"):
        rel = path.relative_to(root).parts
        if rel[0] in ("site-packages", "dist-packages") or "test" in rel or "tests" in rel:
            continue
        try:
            names.update(_METHOD_DEF.findall(path.read_bytes()))
        except OSError:
            continue
    return frozenset(names)


def only_in_hierarchy(
    cls: tuple[str, str], member: str, calls: UpstreamCalls, resolver, patched: bool
) -> str | None:
    """Why any receiver of ``.member(...)`` is in the hierarchy of ``cls`` (the changed
    class), or None when another class, a module function or a class attribute of that
    name exists; ``patched``: a patched method, reached only where no other class
    defines it."""
    if member.encode() in _stdlib_methods():
        return None
    definers = calls.definers(member, resolver)
    if not definers:
        return None
    r = resolver
    if patched and definers != {cls}:
        return None  # a patched method is reached only where no other class defines it
    up = set(r.ancestors(*cls))  # type: ignore[attr-defined]
    for d in definers:
        if d not in up and cls not in r.ancestors(*d):  # type: ignore[attr-defined]
            return None
    return (
        f"only `{cls[1]}`'s class hierarchy defines `{member}` in the new upstream "
        f"({len(definers)} class(es)), so the receiver is one of them"
    )
