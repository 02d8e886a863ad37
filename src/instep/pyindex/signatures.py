"""Compare call signatures (as ``ast.unparse`` text) to decide if a replacement still fits.

A downstream fork, override, monkey-patch or same-op registration stands in for an
upstream function; upstream callers call it with upstream's *new* signature. The
replacement fits when every call the new signature allows is accepted by the
replacement. Pure syntax: defaults are compared as text, nothing is evaluated.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import lru_cache


@dataclass(frozen=True)
class Params:
    positional: tuple[str, ...]  # positional-only and positional-or-keyword, in order
    positional_only: int  # how many of `positional` are positional-only
    required: frozenset[str]  # parameters without a default
    keyword_only: tuple[str, ...]
    varargs: bool
    varkw: bool

    @property
    def names(self) -> frozenset[str]:
        return frozenset(self.positional) | frozenset(self.keyword_only)


@lru_cache(maxsize=4096)
def parse_params(signature: str) -> Params | None:
    """Parameters of ``'x, sizes, *, implicit=False'``; None when it cannot be parsed."""
    try:
        fn = ast.parse(f"def _f({signature}):\n    pass\n").body[0]
    except SyntaxError:
        return None
    assert isinstance(fn, ast.FunctionDef)
    a = fn.args
    pos = [p.arg for p in (*a.posonlyargs, *a.args)]
    n_def = len(a.defaults)
    required = set(pos[: len(pos) - n_def] if n_def else pos)
    for p, d in zip(a.kwonlyargs, a.kw_defaults, strict=True):
        if d is None:
            required.add(p.arg)
    return Params(
        positional=tuple(pos),
        positional_only=len(a.posonlyargs),
        required=frozenset(required),
        keyword_only=tuple(p.arg for p in a.kwonlyargs),
        varargs=a.vararg is not None,
        varkw=a.kwarg is not None,
    )


def _strip_self(p: Params) -> Params:
    if p.positional and p.positional[0] in ("self", "cls"):
        return Params(
            positional=p.positional[1:],
            positional_only=max(0, p.positional_only - 1),
            required=p.required - {p.positional[0]},
            keyword_only=p.keyword_only,
            varargs=p.varargs,
            varkw=p.varkw,
        )
    return p


def incompatibilities(replacement: str, upstream: str, *, method: bool = False) -> list[str]:
    """What calls valid for ``upstream`` the ``replacement`` would reject (empty: it fits).

    ``method`` drops a leading ``self``/``cls`` on both sides.
    """
    rep, up = parse_params(replacement), parse_params(upstream)
    if rep is None or up is None:
        return []
    if method:
        rep, up = _strip_self(rep), _strip_self(up)
    problems: list[str] = []
    rep_keywordable = set(rep.positional[rep.positional_only :]) | set(rep.keyword_only)
    # every parameter upstream callers may pass must be accepted
    for i, name in enumerate(up.positional):
        if i < len(rep.positional) or rep.varargs:
            continue
        if name in rep_keywordable or rep.varkw:
            continue
        problems.append(f"does not accept '{name}'")
    for name in up.keyword_only:
        if name not in rep_keywordable and not rep.varkw:
            problems.append(f"does not accept keyword '{name}'")
    if up.varargs and not rep.varargs:
        problems.append("does not accept *args")
    if up.varkw and not rep.varkw:
        problems.append("does not accept **kwargs")
    # every parameter the replacement requires must be supplied by upstream callers
    for name in sorted(rep.required):
        if name in up.names:
            continue
        problems.append(f"requires '{name}', which upstream callers no longer pass")
    return problems


def same_parameters(a: str, b: str) -> bool:
    pa, pb = parse_params(a), parse_params(b)
    return pa is not None and pa == pb


# --- calls the downstream makes -----------------------------------------------------


def call_shape(call: ast.Call) -> str:
    """How ``call`` passes its arguments, without the values: ``'2;fw,bw;*;**'``.

    Positional count, keyword names, then ``*`` / ``**`` when an argument is unpacked
    (such a call cannot be checked against a signature).
    """
    positional = sum(1 for a in call.args if not isinstance(a, ast.Starred))
    star = "*" if len(call.args) != positional else ""
    keywords = ",".join(k.arg for k in call.keywords if k.arg is not None)
    dstar = "**" if any(k.arg is None for k in call.keywords) else ""
    return f"{positional};{keywords};{star};{dstar}"


def call_problems(shape: str, signature: str, *, method: bool = False) -> list[str] | None:
    """Why a call of ``shape`` would not bind to ``signature`` (empty: it binds).

    None when it cannot be told: the call unpacks ``*args`` / ``**kwargs``, or the
    signature does not parse. ``method`` drops a leading ``self``/``cls`` (calls through
    an instance or the class constructor).
    """
    params = parse_params(signature)
    count, names, star, dstar = shape.split(";")
    if params is None or star or dstar:
        return None
    if method:
        params = _strip_self(params)
    n = int(count)
    problems: list[str] = []
    if n > len(params.positional) and not params.varargs:
        problems.append(f"passes {n} positional arguments, where it takes {len(params.positional)}")
    bound = set(params.positional[:n])
    keywordable = set(params.positional[params.positional_only :]) | set(params.keyword_only)
    for name in names.split(",") if names else ():
        if name in bound:
            problems.append(f"passes '{name}' twice")
        elif name in keywordable:
            bound.add(name)
        elif not params.varkw:
            problems.append(f"passes keyword '{name}', which it does not accept")
    for name in (*params.positional, *params.keyword_only):
        if name in params.required and name not in bound:
            problems.append(f"does not pass '{name}', which it requires")
    return problems
