"""SUBCLASS_OVERRIDE: a downstream class with an upstream ancestor (through downstream
bases too) and the methods it overrides. Works on the records of the index; the classes
themselves are recorded by ``definitions``.
"""

from __future__ import annotations

from collections.abc import Iterable

from instep.impact.downstream.records import DownstreamClass, DownstreamFunction
from instep.impact.model import CouplingKind, Reference


def ancestors(
    cls: str, classes: dict[str, DownstreamClass], roots: frozenset[str], depth: int = 0
) -> list[str]:
    """Upstream ancestors of a downstream class (nearest first), through downstream bases."""
    info = classes.get(cls)
    if info is None or depth > 20:
        return []
    out: list[str] = []
    for b in info.bases:
        if b.split(".", 1)[0] in roots:
            out.append(b)
        else:
            out.extend(a for a in ancestors(b, classes, roots, depth + 1) if a not in out)
    return out


def members_defined(cls: str, classes: dict[str, DownstreamClass]) -> frozenset[str]:
    """The method names a downstream class defines, its downstream bases' included (what it
    does not inherit from upstream)."""
    names: set[str] = set()
    todo, seen = [cls], set()
    while todo:
        cur = todo.pop()
        if cur in seen or cur not in classes:
            continue
        seen.add(cur)
        names.update(m.rsplit(".", 1)[-1] for m in classes[cur].methods)
        todo.extend(classes[cur].bases)
    return frozenset(names)


def subclass_refs(
    info: DownstreamClass,
    ancestors: list[str],
    functions: dict[str, DownstreamFunction],
    lines_snippet: str,
    gate_of,
    via: str,
) -> list[Reference]:
    base = ancestors[0]
    detail = "subclass" + (f" (via {via})" if via else "")
    out = [
        Reference(
            CouplingKind.SUBCLASS_OVERRIDE,
            base,
            info.path,
            info.line,
            lines_snippet,
            detail=detail,
            owner=info.qualname,
            gate=gate_of(info.line),
        )
    ]
    for mq in info.methods:
        fn = functions.get(mq)
        if fn is None:
            continue
        name = mq.rsplit(".", 1)[-1]
        target = f"{base}.{name}"
        calls_orig = name in fn.super_calls or any(
            c == f"{a}.{name}" for a in ancestors for c in fn.upstream_calls
        )
        out.append(
            Reference(
                CouplingKind.SUBCLASS_OVERRIDE,
                target,
                info.path,
                fn.line,
                fn.snippet,
                detail="overrides method",
                owner=mq,
                signature=fn.signature,
                body_hash=fn.body_hash,
                calls_original=calls_orig,
                gate=gate_of(fn.line),
                # how it calls the member it overrides through super(): constructor facts
                call_shapes=tuple(s for m, s in fn.super_call_shapes if m == name) or None,
            )
        )
    return out


def local_subclass_refs(
    classes: list[DownstreamClass],
    module: str,
    functions: dict[str, DownstreamFunction],
    upstream_roots: Iterable[str],
    gate_of,
) -> list[Reference]:
    """The SUBCLASS_OVERRIDE references of the classes of one file whose upstream
    ancestors this file shows; each such class is marked ``upstream_direct``."""
    local_classes = {f"{module}.{c.qualname}": c for c in classes}
    roots = frozenset(upstream_roots)
    out: list[Reference] = []
    for c in classes:
        anc = ancestors(f"{module}.{c.qualname}", local_classes, roots)
        if anc:
            c.upstream_direct = True
            direct = any(b.split(".", 1)[0] in roots for b in c.bases)
            via = "" if direct else "downstream base"
            out.extend(subclass_refs(c, anc, functions, c.snippet, gate_of, via))
    return out
