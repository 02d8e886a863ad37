"""Does an upstream method that calls a patched method ever run, when its every caller is
replaced downstream?

The breaking-path search (``join/breaking_path.py``) takes a call in a method ``C.m`` of
the new upstream to reach a downstream patch of a method unless ``C.m`` itself is
replaced downstream. :func:`callers_replaced` goes up from ``C.m``: every new-upstream
call of ``m`` that runs ``C.m`` (``self.m(...)`` / ``cls.m(...)`` in a class of ``C``'s
hierarchy that does not define its own ``m``, or ``X.m(...)`` on a class named in the
source) sits in a method that does not run either: one the downstream replaces on its
normal path, or one whose callers are all replaced in turn (up to
``breaking_path.LIVENESS_DEPTH`` levels). torch 2.15.0's
``Reduction.create_multilayer_helper`` is called only from ``create_multilayer`` and
``create_multilayer_existing_ranges``, called only from ``Reduction.create``: a backend
that replaces ``Reduction.create`` never runs the helper's call of it.

A method that upstream never calls, one the downstream calls on its normal path
(:meth:`~instep.impact.join.patch_installs.PatchInstalls.called_on_path`), a dunder (it
runs on construction or protocol use), a call on a receiver whose class is not read, or
more than ``MAX_SITES`` calls: not decided (''). Static only; this module picks no verdict.
"""

from __future__ import annotations

from instep.impact.join.upstream_calls import CallSite

MAX_SITES = 50  # calls of one name beyond which the callers are not followed


def callers_replaced(ctx, site_cls: tuple[str, str], caller: str, depth: int, live, resolve) -> str:
    """Why the method ``caller`` of ``site_cls`` never runs where the downstream object
    (a patched method, ``ctx``) would be reached, or ''. ``live`` is
    ``breaking_path._live`` ('' when a calling method runs), ``resolve`` its
    ``resolve_expr`` (the dotted name a receiver written at a site denotes)."""
    member = caller.rsplit(".", 1)[-1]
    if member.startswith("__") or ctx.calls is None or ctx.installs is None:
        return ""
    if ctx.installs.called_on_path(member):
        return ""
    sites = ctx.calls.sites(member)
    if not sites or len(sites) > MAX_SITES:
        return ""
    defined = f"{site_cls[0]}.{caller}"
    whys: list[str] = []
    for site in sites:
        runs = _runs_it(site, site_cls, member, defined, ctx, resolve)
        if runs is None:
            return ""
        if not runs:
            continue
        if site.caller is None or site.nested:
            return ""
        up = (site.module, site.cls) if site.cls else None
        why = live(site.module, up, site.caller, ctx, depth + 1)
        if not why:
            return ""
        whys.append(f"`{site.caller}` ({site.at}): {why}")
    if not whys:
        return ""
    return f"`{caller}` is called only from " + "; ".join(dict.fromkeys(whys))


def _runs_it(
    site: CallSite, site_cls: tuple[str, str], member: str, defined: str, ctx, resolve
) -> bool | None:
    """Does ``site`` run the method ``defined`` (True), another one (False), or cannot it
    be told (None)?"""
    r = ctx.resolver
    if site.receiver is None:
        return False  # a bare call of that name: a function, not the method
    if site.receiver in ("self", "cls"):
        if site.cls is None:
            return None
        here = (site.module, site.cls)
        related = site_cls in r.ancestors(*here) or here in r.ancestors(*site_cls)
        if not related:
            return False
        return r.find_member(*here, member) == defined
    dotted = resolve(site, site.receiver, ctx)
    target = r.class_of(dotted) if dotted is not None else None
    if target is None:
        return None
    return r.find_member(*target, member) == defined
