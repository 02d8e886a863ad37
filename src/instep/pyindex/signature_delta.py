"""What changed between two signatures, as a reader wants it: ``+ *, strict_sum: bool =
False``, ``- grad`` / ``+ grad_output``, ``x=1 -> x=2``.

The two signatures are the ``ast.unparse`` text of a def's parameters (what the symbol
index stores: ``'cls, device: torch.device, *, strict_sum: bool=False'``) and, optionally,
its return annotations. The delta lists: the parameters removed, then those added (with
their kind when it is not positional-or-keyword; ``*, `` opens a keyword-only part the old
one did not have), so that a parameter renamed in place reads ``- grad``, ``+
grad_output``; then positional parameters moved to another place, and per parameter a
change of kind (positional -> keyword-only), default (added, removed, changed) or
annotation; then the return annotation.
Pure syntax: nothing is evaluated, defaults and annotations are compared as text. It does
not judge whether a call still binds (``signatures.incompatibilities`` does).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

POSITIONAL_ONLY = "positional-only"
POSITIONAL = "positional"
KEYWORD_ONLY = "keyword-only"
VAR_POSITIONAL = "*args"
VAR_KEYWORD = "**kwargs"


@dataclass(frozen=True)
class Param:
    name: str
    kind: str  # one of the kinds above
    annotation: str | None
    default: str | None

    def text(self) -> str:
        """The parameter as it is written: ``x: int = 1``, ``*args``, ``**kw: Any``."""
        star = "*" if self.kind == VAR_POSITIONAL else "**" if self.kind == VAR_KEYWORD else ""
        out = f"{star}{self.name}"
        if self.annotation is not None:
            out += f": {self.annotation}"
        if self.default is not None:
            out += f" = {self.default}" if self.annotation is not None else f"={self.default}"
        return out


def parse(signature: str) -> list[Param] | None:
    """The parameters of ``'x, sizes, *, implicit=False'`` in order; None when it does
    not parse (a C declaration, a truncated text)."""
    try:
        fn = ast.parse(f"def _f({signature}):\n    pass\n").body[0]
    except SyntaxError:
        return None
    assert isinstance(fn, ast.FunctionDef)
    a = fn.args
    out: list[Param] = []
    positional = [*a.posonlyargs, *a.args]
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(a.defaults))
    defaults += list(a.defaults)
    for i, (p, d) in enumerate(zip(positional, defaults, strict=True)):
        kind = POSITIONAL_ONLY if i < len(a.posonlyargs) else POSITIONAL
        out.append(Param(p.arg, kind, _text(p.annotation), _text(d)))
    if a.vararg is not None:
        out.append(Param(a.vararg.arg, VAR_POSITIONAL, _text(a.vararg.annotation), None))
    for p, d in zip(a.kwonlyargs, a.kw_defaults, strict=True):
        out.append(Param(p.arg, KEYWORD_ONLY, _text(p.annotation), _text(d)))
    if a.kwarg is not None:
        out.append(Param(a.kwarg.arg, VAR_KEYWORD, _text(a.kwarg.annotation), None))
    return out


def _text(node: ast.expr | None) -> str | None:
    return None if node is None else ast.unparse(node)


def signature_delta(
    old: str,
    new: str,
    old_returns: str | None = None,
    new_returns: str | None = None,
) -> list[str]:
    """The changes from ``old`` to ``new``, one item each (empty when they are the same).

    When either side does not parse, the one item is the two texts: ``(old) -> (new)``.
    """
    before, after = parse(old), parse(new)
    if before is None or after is None:
        return [] if old == new else [f"({old}) -> ({new})"]
    old_by = {p.name: p for p in before}
    new_by = {p.name: p for p in after}
    out = [f"- {p.text()}" for p in before if p.name not in new_by]
    opens_keyword_only = not any(p.kind in (KEYWORD_ONLY, VAR_POSITIONAL) for p in before)
    for p in after:
        if p.name in old_by:
            continue
        if p.kind == KEYWORD_ONLY and opens_keyword_only:
            out.append(f"+ *, {p.text()}")
            opens_keyword_only = False
        elif p.kind in (POSITIONAL_ONLY, KEYWORD_ONLY):
            out.append(f"+ {p.text()} ({p.kind})")
        else:
            out.append(f"+ {p.text()}")
    out += _moved(before, after)
    for p in after:
        q = old_by.get(p.name)
        if q is None:
            continue
        if q.kind != p.kind:
            out.append(f"{p.name}: {q.kind} -> {p.kind}")
        if q.default != p.default:
            out.append(f"{_with_default(q)} -> {_with_default(p)}")
        if q.annotation != p.annotation:
            out.append(f"{p.name}: {q.annotation or '(none)'} -> {p.annotation or '(none)'}")
    if old_returns != new_returns:
        out.append(f"returns {old_returns or '(none)'} -> {new_returns or '(none)'}")
    return out


def _with_default(p: Param) -> str:
    if p.default is None:
        return f"{p.name} (no default)"
    return f"{p.name}={p.default}"


def _moved(before: list[Param], after: list[Param]) -> list[str]:
    """Positional parameters both sides have, in another order (what a positional call
    binds differently)."""
    kept = {p.name for p in after} & {p.name for p in before}
    positional = (POSITIONAL_ONLY, POSITIONAL)
    old_order = [p.name for p in before if p.name in kept and p.kind in positional]
    new_order = [p.name for p in after if p.name in kept and p.kind in positional]
    if set(old_order) != set(new_order) or old_order == new_order:
        return []
    return [f"order ({', '.join(old_order)}) -> ({', '.join(new_order)})"]


def delta_text(
    old: str, new: str, old_returns: str | None = None, new_returns: str | None = None
) -> str:
    """:func:`signature_delta` on one line (``; `` between the items)."""
    return "; ".join(signature_delta(old, new, old_returns, new_returns))
