"""Find the call in the *new* upstream that breaks a downstream replacement, or say there
is none.

A downstream override or monkey-patch whose parameters no longer fit the new upstream
signature breaks only when new upstream code calls it with the new argument shape (the
new parameter by keyword, or more positional arguments than the replacement takes, or
without an argument the replacement still requires). ``join/upstream_calls.py`` finds the
call sites of a name in the new upstream (a text filter, then the AST of the few files
that name it); :func:`search` decides, per site, whether the call reaches the downstream
object:

* an override of ``C.m`` in a downstream class ``D``: ``self.m(...)`` / ``cls.m(...)``
  in a method of ``C`` or one of its ancestors that ``D`` inherits (it does not override
  the calling method, nor every caller of a private calling method), or ``cls(...)`` /
  ``type(self)(...)`` for ``__init__``; a call on a class named in the source
  (``SIMDKernelFeatures(...)``, ``Base.m(...)``) goes to that class, never to ``D``;
* a patched function ``M.f``: a bare call ``f(...)`` in ``M`` (the module global is
  looked up at call time) or ``M.f(...)`` through a module name; ``M`` is the module the
  patch names, which may only have imported ``f`` from its origin ``O``: the patch then
  rebinds ``M``'s global alone, and a bare call in ``O`` or ``O.f(...)`` does not reach it;
  a bare call in another module binds the name at import, before or after the patch: not
  followed;
* a patched method ``C.m``: ``C.m(...)`` (or a subclass that inherits it) named in the
  source, ``self.m(...)`` in ``C`` or a subclass that inherits ``m``;
* a call in a method of an upstream *device class* (one upstream registers for a role of
  ``register_backend_for_device``, ``CppWrapperGpu``) that no class the downstream
  registers for that role inherits does not run for the backend: it goes elsewhere
  (overrides only; :mod:`~instep.impact.join.device_classes`);
* a call whose caller the downstream replaces as well (patched, or overridden in ``D``)
  is not live;
* a call on a path the new upstream adds whole, entered only for a class it adds, is no
  proven break (:mod:`~instep.impact.join.new_paths`, fact ``breaking_call_new_path``);
* a call of the method on a receiver whose type is not written down
  (``self.backend.m(...)``, ``self.get_backend(device).m(...)``) when, in the whole new
  upstream, only classes of ``C``'s hierarchy (``C``, its ancestors, its subclasses)
  define ``m`` and no module function or other class does: whatever the receiver is, it
  is one of them (:meth:`UpstreamCalls.definers`). This is how upstream reaches a
  backend's scheduling or kernel object, which it only knows through a registry.

Anything else (another receiver whose type is not written down, an unpacked ``*args``) is
*not followed*: the search says so and the verdict stays Test. Static only: nothing is
imported or run. This module neither picks a rule nor renders a report.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from instep.impact.downstream.class_escapes import ClassEscapes
from instep.impact.downstream.wholesale import Swap
from instep.impact.join.change_index import ChangeIndex
from instep.impact.join.fact_names import Fact
from instep.impact.join.new_paths import new_path
from instep.impact.join.patch_installs import PatchInstalls
from instep.impact.join.patched_callers import callers_replaced
from instep.impact.join.receivers import only_in_hierarchy
from instep.impact.join.upstream_calls import SELF_CONSTRUCTION, CallSite, UpstreamCalls
from instep.impact.model import ChangeKind, CouplingKind, Reference, SymbolChange
from instep.pyindex.model import SymbolKind, module_of
from instep.pyindex.signatures import call_problems, incompatibilities, parse_params

MAX_SITES = 200  # call sites of one name beyond which the search gives up (too many receivers)
LIVENESS_DEPTH = 3  # how many private callers up the search follows a caller's liveness
# what a search finds: a new-upstream call reaches the replacement and does not bind; every
# call with the new shape goes elsewhere (or there is none); a call with the new shape whose
# target could not be told; one that reaches it only under a condition never met; one that
# reaches it only on a path the new upstream adds for a class it adds
PATH_FACTS = frozenset(
    {
        Fact.BREAKING_PATH,
        Fact.NO_BREAKING_CALL,
        Fact.PATH_UNPROVEN,
        Fact.BREAKING_CALL_CONDITIONAL,
        Fact.BREAKING_CALL_NEW_PATH,
    }
)
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


@dataclass(frozen=True)
class PathVerdict:
    """The search's answer: ``kind`` is one of :data:`PATH_FACTS`, ``text`` its evidence."""

    kind: Fact
    text: str


def fresh_incompatibilities(change: SymbolChange, signature: str) -> list[str]:
    """What the new upstream signature allows and ``signature`` rejects, beyond what the
    old signature already allowed and it rejected (empty: the change broke nothing)."""
    new = change.new.signature if change.new is not None else None
    if new is None:
        return []
    old = change.old.signature if change.old is not None else None
    method = change.symbol_kind is SymbolKind.METHOD
    now = incompatibilities(signature, new, method=method)
    before = incompatibilities(signature, old, method=method) if old else []
    return [p for p in now if p not in before]


def needs_search(change: SymbolChange, ref: Reference, kind: CouplingKind) -> bool:
    """An override or patch that the signature change made stop fitting."""
    return (
        kind in (CouplingKind.SUBCLASS_OVERRIDE, CouplingKind.MONKEYPATCH)
        and ChangeKind.SIGNATURE in change.aspects
        and change.symbol_kind in (SymbolKind.FUNCTION, SymbolKind.METHOD)
        and ref.signature is not None
        and bool(fresh_incompatibilities(change, ref.signature))
    )


@dataclass
class _Context:
    change: SymbolChange
    ref: Reference
    kind: CouplingKind
    resolver: object
    overridden: set[tuple[str, str, str]]  # (downstream file, class, member it defines)
    patched: dict[str, str]  # upstream dotted name -> downstream place that replaces it
    swaps: tuple[Swap, ...] = ()  # upstream modules the downstream swaps wholesale
    calls: UpstreamCalls | None = None
    escapes: ClassEscapes | None = None  # where downstream classes leave downstream code
    installs: PatchInstalls | None = None  # patches installed only under a switch off
    typed_only: bool = False  # an untyped receiver is not followed (join/new_calls.py)
    changes: ChangeIndex | None = None  # what the diff added (join/new_paths.py)

    @property
    def method(self) -> bool:
        return self.change.symbol_kind is SymbolKind.METHOD

    @property
    def member(self) -> str:
        return self.change.qualname.rsplit(".", 1)[-1]

    @property
    def owner_cls(self) -> str | None:
        owner = self.ref.owner or ""
        return owner.rsplit(".", 1)[0] if "." in owner else None

    @property
    def cls(self) -> tuple[str, str] | None:
        if not self.method:
            return None
        return self.change.module, self.change.qualname.rsplit(".", 1)[0]


def _breaks_shape(site: CallSite, ctx: _Context) -> bool | None:
    """Does the call pass what the new signature takes and the replacement rejects?
    None: it unpacks arguments and names nothing the replacement rejects."""
    new = ctx.change.new.signature if ctx.change.new else None
    rep = ctx.ref.signature
    if new is None or rep is None:
        return False
    rp = parse_params(rep)
    if rp is None:
        return False
    old = ctx.change.old.signature if ctx.change.old else None
    got_rep = call_problems(site.shape, rep, method=ctx.method)
    got_new = call_problems(site.shape, new, method=ctx.method)
    if got_rep is None or got_new is None:  # *args / **kwargs: the named keywords still tell
        np = parse_params(new)
        op = parse_params(old) if old else None
        accepts_new = np is not None and (np.varkw or set(site.keywords) <= np.names)
        rejected = [k for k in site.keywords if k not in rp.names] if not rp.varkw else []
        if op is not None and not op.varkw:  # the new shape: a keyword the old one lacked
            rejected = [k for k in rejected if k not in op.names]
        return True if (rejected and accepts_new) else None
    if got_new != [] or got_rep == []:
        return False
    # the new argument shape: a call the old upstream signature bound as well broke the
    # replacement before the change too (it is no breaking path of this change)
    return old is None or call_problems(site.shape, old, method=ctx.method) != []


def _resolve_expr(site: CallSite, expr: str | None, ctx: _Context) -> str | None:
    """The dotted upstream name that ``expr``, written at ``site`` as a name or a dotted
    name, denotes; None for anything else (a call, a subscript, a local variable)."""
    if expr is None or not _IDENT.match(expr):
        return None
    r = ctx.resolver
    head = expr.split(".", 1)[0]
    idx = r.index(site.module)  # type: ignore[attr-defined]
    local = idx is not None and (head in idx.symbols or head in idx.imports)
    if not local and head not in r.module_paths:  # type: ignore[attr-defined]
        return None
    dotted = f"{site.module}.{expr}" if local else expr
    return r.resolve(dotted)  # type: ignore[attr-defined]


def _is_module(dotted: str, ctx: _Context) -> bool:
    return dotted in ctx.resolver.module_paths  # type: ignore[attr-defined]


def _swapped(module: str, caller: str, ctx: _Context) -> str:
    """Why a module-level function is swapped out together with the replacement, or ''."""
    top = caller.split(".", 1)[0]
    for swap in ctx.swaps:
        if swap.replaces(module, top) and swap.installs(module_of(ctx.ref.path)):
            return (
                f"its caller `{top}` is swapped out wholesale together with this replacement: "
                f"{swap.at} rebinds every function of `{module}` that `{swap.downstream}` "
                "defines, and the replacement ships in that package"
            )
    return ""


def _live(
    module: str, site_cls: tuple[str, str] | None, caller: str, ctx: _Context, depth: int = 0
) -> str:
    """'' when the calling function runs for the downstream object, else why it does not."""
    dotted = f"{module}.{caller}"
    swapped = _swapped(module, caller, ctx) if site_cls is None else ""
    if swapped:
        return swapped
    if dotted in ctx.patched:
        return f"its caller `{caller}` is replaced downstream too ({ctx.patched[dotted]})"
    if ctx.kind is CouplingKind.MONKEYPATCH and site_cls is not None and depth < LIVENESS_DEPTH:
        return callers_replaced(ctx, site_cls, caller, depth, _live, _resolve_expr)
    if ctx.kind is not CouplingKind.SUBCLASS_OVERRIDE or site_cls is None:
        return ""
    member = caller.rsplit(".", 1)[-1]
    owner = ctx.owner_cls
    if owner and (ctx.ref.path, owner, member) in ctx.overridden:
        return f"{owner} overrides the caller `{caller}`"
    private = member.startswith("_") and not member.startswith("__")
    if not private or depth >= LIVENESS_DEPTH or ctx.cls is None:
        return ""
    callers: list[tuple[tuple[str, str], str]] = []
    for amod, aqual in ctx.resolver.ancestors(*ctx.cls):  # type: ignore[attr-defined]
        idx = ctx.resolver.index(amod)  # type: ignore[attr-defined]
        if idx is None:
            continue
        for q, sym in idx.symbols.items():
            direct = q.startswith(aqual + ".") and q.count(".") == aqual.count(".") + 1
            if direct and f"self.{member}" in sym.calls:
                callers.append(((amod, aqual), q))
    if not callers:
        return ""
    why = [_live(c[0], c, q, ctx, depth + 1) for c, q in callers]
    if all(why):
        return f"`{caller}` is called only from {', '.join(f'`{q}`' for _, q in callers)}: " + (
            "; ".join(dict.fromkeys(why))
        )
    return ""


def _patched_module(ctx: _Context) -> str:
    """The upstream module whose global a patch of a function rebinds: the module written
    in the patch (``fake_tensor_prop.snapshot_fake = f`` rebinds ``fake_tensor_prop``'s
    global, even where that module only imported the name from ``proxy_tensor``), else the
    module that defines the function."""
    owner = ctx.ref.target.rpartition(".")[0]
    module = ctx.resolver.resolve(owner) if owner else None  # type: ignore[attr-defined]
    return module if module and _is_module(module, ctx) else ctx.change.module


def _reaches(site: CallSite, ctx: _Context) -> tuple[bool | None, str]:
    """(True: the call reaches the downstream object; False: it goes elsewhere; None:
    not followed), with the reason."""
    site_cls = (site.module, site.cls) if site.cls else None
    if site.caller and site.nested and site_cls is None:
        why = _swapped(site.module, site.caller, ctx)
        if why:
            return False, why
    if site.caller and not site.nested:
        why = _live(site.module, site_cls, site.caller, ctx)
        if why:
            return False, why
    if ctx.kind is CouplingKind.MONKEYPATCH and not ctx.method:
        return _reaches_patched_function(site, ctx)
    cls = ctx.cls
    if cls is None:
        return None, "not a method"
    if site.name == SELF_CONSTRUCTION or site.receiver in ("self", "cls"):
        return _reaches_through_self(site, site_cls, cls, ctx)
    return _reaches_named(site, ctx)


def _reaches_patched_function(site: CallSite, ctx: _Context) -> tuple[bool | None, str]:
    """:func:`_reaches` for a patched module function ``M.f``: a bare ``f(...)`` or a
    call through a module name."""
    r = ctx.resolver
    patched = _patched_module(ctx)
    if site.receiver is None:
        idx = r.index(site.module)  # type: ignore[attr-defined]
        name = ctx.member
        dotted = f"{site.module}.{name}"
        bound = idx is not None and (
            name in idx.symbols or (name in idx.imports and r.resolve(dotted) == ctx.change.dotted)  # type: ignore[attr-defined]
        )
        if bound and site.module == patched:
            return True, "it looks the module global up at call time"
        if bound and site.module == ctx.change.module:
            return False, (
                f"it looks up `{site.module}`'s own global `{name}`; the patch rebinds "
                f"`{patched}.{name}`, a name `{patched}` imported from it"
            )
        if bound and name in idx.imports:  # type: ignore[union-attr]
            source = idx.imports[name].rpartition(".")[0]  # type: ignore[union-attr]
            if patched != ctx.change.module and r.resolve(source) != patched:  # type: ignore[attr-defined]
                return False, (
                    f"it imports `{name}` from `{source}`, whose global the patch of "
                    f"`{patched}.{name}` does not rebind"
                )
            return None, "it binds the name at import, before or after the patch"
        return False, "another function of that name"
    target = _resolve_expr(site, site.receiver, ctx)
    if target is None:
        return None, f"receiver `{site.receiver}` not resolved"
    if target == patched:
        return True, f"`{site.receiver}` is the patched module"
    return False, f"`{site.receiver}` is `{target}`"


def _reaches_through_self(
    site: CallSite, site_cls: tuple[str, str] | None, cls: tuple[str, str], ctx: _Context
) -> tuple[bool | None, str]:
    """:func:`_reaches` for ``self.m(...)``, ``cls.m(...)``; ``cls(...)`` /
    ``type(self)(...)`` for ``__init__``: the enclosing class decides."""
    if site_cls is None:
        return None, "no enclosing class"
    if site_cls in ctx.resolver.ancestors(*cls):  # type: ignore[attr-defined]
        kept = _kept_downstream(site, ctx)
        if kept:
            return False, kept
        recv = site.receiver or "cls"
        return True, f"`{recv}` in `{site.caller}`, which {_who(ctx)} inherits"
    below = ctx.resolver.ancestors(*site_cls)  # type: ignore[attr-defined]
    if cls in below:
        if ctx.kind is CouplingKind.MONKEYPATCH:
            found = ctx.resolver.find_member(*site_cls, ctx.member)  # type: ignore[attr-defined]
            if found == ctx.change.dotted:
                return True, f"`{site_cls[1]}` inherits the patched `{ctx.change.qualname}`"
            return False, f"`{site_cls[1]}` overrides `{ctx.member}`"
        return None, f"a call in subclass `{site_cls[1]}`, not known to be {_who(ctx)}'s base"
    return False, f"`{site_cls[1]}` is not in the class hierarchy"


def _reaches_named(site: CallSite, ctx: _Context) -> tuple[bool | None, str]:
    """:func:`_reaches` for a call on a receiver named in the source (``Cls(...)``,
    ``x.m(...)``): the class it resolves to decides, or, untyped, the hierarchy alone."""
    if ctx.member == "__init__":  # Cls(...) / mod.Cls(...): the class named
        expr = f"{site.receiver}.{site.name}" if site.receiver else site.name
    elif site.receiver is None:
        return False, "another function of that name"
    else:
        expr = site.receiver
    target = _resolve_expr(site, expr, ctx)
    found = ctx.resolver.class_of(target) if target is not None else None  # type: ignore[attr-defined]
    kept = _kept_downstream(None, ctx) if found is None else ""
    if kept:  # whatever the receiver is, upstream never holds the downstream class
        return False, f"receiver `{expr}` is never {_who(ctx)}: {kept}"
    if target is None:
        only = (
            None
            if ctx.member == "__init__" or ctx.typed_only or ctx.cls is None or ctx.calls is None
            else only_in_hierarchy(
                ctx.cls, ctx.member, ctx.calls, ctx.resolver, ctx.kind is CouplingKind.MONKEYPATCH
            )
        )
        if only:
            return True, f"receiver `{expr}` is not typed, but {only}"
        return None, f"receiver `{expr}` not resolved (dynamic dispatch)"
    if found is None:
        return None, f"receiver `{expr}` is not a class read statically"
    if ctx.kind is CouplingKind.SUBCLASS_OVERRIDE:
        return False, f"it names the upstream class `{found[1]}`, never {_who(ctx)}"
    member = ctx.resolver.find_member(*found, ctx.member)  # type: ignore[attr-defined]
    if member == ctx.change.dotted:
        return True, f"`{expr}.{ctx.member}` is the patched attribute"
    return False, f"`{found[1]}` has its own `{ctx.member}`"


def _kept_downstream(site: CallSite | None, ctx: _Context) -> str:
    """Why an upstream call cannot run on the downstream class's instances, or '': the
    class never leaves downstream code (:mod:`~instep.impact.downstream.class_escapes`)
    and, for a call in an inherited method (``site``), the downstream never names that
    method nor any upstream method of the hierarchy that calls it through ``self``."""
    owner = ctx.owner_cls
    if ctx.escapes is None or owner is None or ctx.kind is not CouplingKind.SUBCLASS_OVERRIDE:
        return ""
    kept = ctx.escapes.kept_downstream(owner)
    if not kept or site is None:
        return kept or ""
    if site.caller is None or site.nested:
        return ""
    callers = {site.caller.rsplit(".", 1)[-1]}
    ancestors = list(ctx.resolver.ancestors(*ctx.cls)) if ctx.cls else []  # type: ignore[attr-defined]
    for _ in range(LIVENESS_DEPTH):
        more = set(callers)
        for amod, aqual in ancestors:
            idx = ctx.resolver.index(amod)  # type: ignore[attr-defined]
            for q, sym in idx.symbols.items() if idx is not None else ():
                direct = q.startswith(aqual + ".") and q.count(".") == aqual.count(".") + 1
                if direct and any(f"self.{c}" in sym.calls for c in callers):
                    more.add(q.rsplit(".", 1)[-1])
        if more == callers:
            break
        callers = more
    if any(c.startswith("__") or ctx.escapes.named(c) for c in callers):
        return ""  # a dunder runs on construction or protocol use; a named one may be called
    names = ", ".join(f"`{c}`" for c in sorted(callers))
    return f"{kept}, and the downstream never calls {names} on it"


def _who(ctx: _Context) -> str:
    if ctx.kind is CouplingKind.MONKEYPATCH and ctx.cls is not None:
        return f"the patched `{ctx.cls[1]}`"
    return ctx.owner_cls or "the downstream class"


def _keyword_only_needles(ctx: _Context) -> tuple[str, ...]:
    """The new keyword-only parameters, when they are all the replacement rejects (then a
    breaking call must name one of them); () when a call could break it otherwise."""
    new = parse_params(ctx.change.new.signature or "") if ctx.change.new else None
    if new is None or ctx.ref.signature is None:
        return ()
    problems = fresh_incompatibilities(ctx.change, ctx.ref.signature)
    names = []
    for p in problems:
        m = re.fullmatch(r"does not accept keyword '(\w+)'", p)
        if m is None or m.group(1) not in new.keyword_only or m.group(1) in new.required:
            return ()
        names.append(m.group(1))
    return tuple(sorted(names))


def _sites(calls: UpstreamCalls, ctx: _Context) -> list[CallSite]:
    keywords = _keyword_only_needles(ctx)
    if ctx.member != "__init__":
        return list(calls.sites(ctx.member, keywords=keywords))
    cls = ctx.cls
    if cls is None:
        return []
    out = list(calls.sites(cls[1].rsplit(".", 1)[-1], keywords=keywords))
    files = {
        ctx.resolver.module_paths.get(m)  # type: ignore[attr-defined]
        for m, _ in ctx.resolver.ancestors(*cls)  # type: ignore[attr-defined]
    }
    for path in sorted(p for p in files if p):
        out.extend(calls.sites(SELF_CONSTRUCTION, only_in=path))
    return out


def search(
    calls: UpstreamCalls,
    change: SymbolChange,
    ref: Reference,
    kind: CouplingKind,
    resolver,
    overridden: set[tuple[str, str, str]],
    patched: dict[str, str],
    swaps: tuple[Swap, ...] = (),
    escapes: ClassEscapes | None = None,
    devices=None,
    installs: PatchInstalls | None = None,
    changes: ChangeIndex | None = None,
) -> PathVerdict:
    """Is there a new-upstream call that passes the new argument shape to ``ref``'s
    replacement of ``change``? The text quotes it, or says why none was found.
    ``devices`` (:class:`~instep.impact.join.device_classes.DeviceClasses`): a call in a
    method of an upstream device class the backend never registers goes elsewhere;
    ``installs`` (:class:`~instep.impact.join.patch_installs.PatchInstalls`): a patch
    installed only under a switch off by default breaks only when it is on; ``changes``
    (the run's :class:`~instep.impact.join.change_index.ChangeIndex`): a call on a path
    the diff adds whole, entered for a class it adds, is no proven break."""
    ctx = _Context(
        change, ref, kind, resolver, overridden, patched, swaps, calls, escapes, installs
    )
    ctx.changes = changes
    new_params = _new_parameters(change)
    what = ", ".join(f"`{p}`" for p in new_params) or "the new argument shape"
    shaped = [
        (s, shape) for s in _sites(calls, ctx) if (shape := _breaks_shape(s, ctx)) is not False
    ]
    if len(shaped) > MAX_SITES:
        return PathVerdict(
            Fact.PATH_UNPROVEN,
            f"{len(shaped)} calls of `{ctx.member}` in the new upstream may pass {what}: "
            "too many receivers to follow",
        )
    return _verdict(shaped, ctx, devices, what)


def follow(
    inputs, change: SymbolChange, ref: Reference, kind, site: CallSite, passed
) -> PathVerdict:
    """:func:`search`'s answer for one call ``site`` known to break ``ref``'s replacement
    of ``change`` (it passes the keywords ``passed``), with the services of ``inputs``
    (:class:`~instep.impact.join.pass_api.JoinInputs`), a receiver whose type is not
    written down not followed: ``join/new_calls.py``."""
    i = inputs
    where = (i.overrides.overridden_in, i.patched_on_path, i.swaps, i.calls, i.escapes)
    ctx = _Context(
        change, ref, kind, i.resolver, *where, i.installs, typed_only=True, changes=i.changes
    )
    what = ", ".join(f"`{k}`" for k in passed)
    return _verdict([(site, True)], ctx, inputs.devices, what)


def _verdict(
    shaped: list[tuple[CallSite, bool | None]], ctx: _Context, devices, what: str
) -> PathVerdict:
    """:func:`search`'s answer from the call sites that may pass the new shape (``True``,
    or ``None`` where unpacked arguments hide it): the first that reaches the replacement
    outside a condition the backend never meets, else what the others say."""
    ref = ctx.ref
    not_followed: list[str] = []
    elsewhere: list[str] = []
    conditional: list[str] = []
    on_new_path: list[str] = []
    for site, shape in shaped:
        unused = _device_class_unused(site, ctx, devices)
        if unused:
            elsewhere.append(f"{site.at}: {unused}")
            continue
        reach, why = _reaches(site, ctx)
        if shape is None:
            if reach is not False:
                not_followed.append(f"{site.at} unpacks its arguments")
            continue
        if reach:
            text = (
                f"the new upstream calls it at {site.at}"
                f"{f' (in `{site.caller}`)' if site.caller else ''} passing {what}, "
                f"and the call reaches {ref.path}:{ref.line}: {why}"
            )
            guard = f"under {site.guard}" if site.guard else _installed_off(ctx)
            if guard is not None:
                conditional.append(f"{text}; but only {guard}")
                continue
            added = (
                new_path(site, ctx.calls, ctx.changes, lambda s, e: _resolve_expr(s, e, ctx))
                if ctx.changes is not None and ctx.calls is not None
                else ""
            )
            if not added:
                return PathVerdict(Fact.BREAKING_PATH, text)
            on_new_path.append(f"{text}; but {added}")
            continue
        (elsewhere if reach is False else not_followed).append(f"{site.at}: {why}")
    if on_new_path and not not_followed:
        return PathVerdict(Fact.BREAKING_CALL_NEW_PATH, "; ".join(on_new_path[:2]))
    if conditional and not not_followed:
        return PathVerdict(Fact.BREAKING_CALL_CONDITIONAL, "; ".join(conditional[:2]))
    if not_followed:
        return PathVerdict(
            Fact.PATH_UNPROVEN,
            f"a new-upstream call passes {what} but its target was not followed "
            f"({'; '.join(not_followed[:2])})",
        )
    reason = f"no new-upstream call passes {what} to it"
    if elsewhere:
        reason += f" (the calls that pass it go elsewhere: {'; '.join(elsewhere[:2])})"
    return PathVerdict(Fact.NO_BREAKING_CALL, reason)


def _installed_off(ctx: _Context) -> str | None:
    """For a patch installed only under a switch off by default, that switch said."""
    if ctx.installs is None or ctx.kind is not CouplingKind.MONKEYPATCH:
        return None
    why = ctx.installs.off_by_default(ctx.ref.path, ctx.ref.line, ctx.ref.owner)
    return f"when the patch is installed: {why}" if why else None


def _device_class_unused(site: CallSite, ctx: _Context, devices) -> str:
    """Why the method of an upstream device class holding ``site`` never runs for the
    backend, or '' (:mod:`~instep.impact.join.device_classes`). Overrides only: a patched
    global is reached from an in-tree device's code in the same process as well."""
    if devices is None or ctx.kind is not CouplingKind.SUBCLASS_OVERRIDE:
        return ""
    if site.cls is None or site.caller is None or site.caller.rpartition(".")[0] != site.cls:
        return ""
    return devices.never_runs((site.module, site.cls), site.caller)


def _new_parameters(change: SymbolChange) -> list[str]:
    old = parse_params(change.old.signature or "") if change.old else None
    new = parse_params(change.new.signature or "") if change.new else None
    if new is None:
        return []
    before = old.names if old is not None else frozenset()
    return [n for n in (*new.positional, *new.keyword_only) if n not in before]
