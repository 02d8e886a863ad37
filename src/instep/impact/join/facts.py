"""The facts a verdict rule (``verdict_rules.toml``, beside this module) reads that come
from the evidence: the downstream reference, the upstream change and, for the facts that
need the rest of the tree, what the join knows (the resolver, the overridden members,
the names a file uses). Every fact is a member of :class:`~instep.impact.join.fact_names.
Fact`, which names this module or the pass that computes it.

:func:`facts_for` is what :func:`~instep.impact.join.verdicts.decide` calls for every
coupling; the passes compute the tree-level facts here too (``registration_facts``,
``override_facts``, ``member_facts``, :class:`DeadFallback`) and pass them as extra
facts. Nothing here matches references to changes or picks a rule.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Container

from instep.impact.downstream.version_predicates import holds
from instep.impact.join.constructor_calls import constructor_facts
from instep.impact.join.fact_names import Fact
from instep.impact.model import ChangeKind, CouplingKind, Reference, SymbolChange, VersionGate
from instep.impact.upstream import c_shims
from instep.impact.upstream.call_paths import CONSTRUCTION
from instep.pyindex.model import SymbolKind
from instep.pyindex.registrations import FALLBACK_CALLS, OVERRIDE_DECOMP, role_of
from instep.pyindex.signatures import call_problems, incompatibilities, same_parameters

_OVERLOAD_RE = re.compile(r"\(\.(\w+)\)")

# Kinds whose downstream function is *called by upstream code* in place of upstream's own
# (a fork is a copy the downstream calls itself: its signature only matters to it).
REPLACING_KINDS = frozenset(
    {
        CouplingKind.SUBCLASS_OVERRIDE,
        CouplingKind.MONKEYPATCH,
        CouplingKind.REGISTRATION,
    }
)


def _version_at_least(version: tuple[int, ...] | None, floor: tuple[int, ...]) -> bool:
    return version is not None and version[: len(floor)] >= floor


def facts_for(
    change: SymbolChange,
    ref: Reference,
    kind: CouplingKind,
    new_version: tuple[int, ...] | None,
    extra: frozenset[str] = frozenset(),
) -> tuple[frozenset[str], list[str]]:
    """The facts that rules test, and the signature problems found (for the text)."""
    facts = set(extra)
    if ref.gate is not None:
        facts |= _gate_facts(ref.gate, frozenset(facts), new_version)
    if change.aspects == {ChangeKind.ANNOTATION}:
        facts.add(Fact.ONLY_ANNOTATIONS)
    if kind is CouplingKind.C_SHIM and _shim_names_only(change):
        facts.add(Fact.SHIM_NAMES_ONLY)  # C callers bind by position: the names do not matter
    problems = _replacement_facts(change, ref, kind, facts)
    if (
        kind is CouplingKind.IMPORT_USE
        and Fact.CALLED_DIRECTLY in facts
        and ref.call_shapes is not None
        and ChangeKind.SIGNATURE in change.aspects
    ):
        fit, broken = _calls_against(change, ref.call_shapes)
        if broken:
            facts.add(Fact.CALL_BREAKS)
            problems = broken
        elif fit:
            facts.add(Fact.CALLS_FIT)
    ctor, ctor_problems = constructor_facts(change, ref, kind, frozenset(facts))
    if ctor_problems:
        problems = ctor_problems
    facts |= ctor
    if (
        kind is CouplingKind.IMPORT_USE
        and ref.owner is None
        and ref.detail.startswith(("from ", "import "))
        and not change.aspects & {ChangeKind.VALUE, ChangeKind.SIGNATURE}
    ):
        facts.add(Fact.IMPORT_LINE)  # binds a code object: its body runs only where it is used
    if ref.calls_original:
        facts.add(Fact.CALLS_ORIGINAL)
    if ref.matched_version == "old":
        facts.add(Fact.FORK_OLD)
    elif ref.matched_version == "new":
        facts.add(Fact.FORK_NEW)
    return frozenset(facts), problems


def _gate_facts(
    gate: VersionGate, facts: frozenset[str], new_version: tuple[int, ...] | None
) -> set[str]:
    """The facts of the gate around the place: ``guarded`` (unless the fallback fails
    too, or always runs), ``gated_for_new`` / ``old_only`` from its version range or
    version flag on the new upstream."""
    out: set[str] = set()
    if (
        gate.kind in ("hasattr", "try_import", "source_probe", "c_probe")
        and Fact.FALLBACK_FAILS not in facts
        and not (gate.requires and Fact.FALLBACK_RUNS in facts)
    ):
        out.add(Fact.GUARDED)
    past = gate.max_version is not None and _version_at_least(new_version, gate.max_version)
    if (
        gate.min_version
        and not past
        and (  # a bounded range (== 2.9) the new one is past
            _version_at_least(new_version, gate.min_version)
            or (new_version is None and gate.kind == "compat_comment")
        )
    ):
        out.add(Fact.GATED_FOR_NEW)
    if past:
        out.add(Fact.OLD_ONLY)
    if gate.predicate is not None and new_version is not None:
        on_new = holds(gate.predicate, new_version)  # a version flag's condition
        if on_new is True:
            out.add(Fact.GATED_FOR_NEW)
        elif on_new is False:
            out.add(Fact.OLD_ONLY)
    return out


def _shim_names_only(change: SymbolChange) -> bool:
    """A C shim declaration whose parameter types stayed (only their names changed)."""
    old_sig = change.old.signature if change.old is not None else None
    new_sig = change.new.signature if change.new is not None else None
    if old_sig is None or new_sig is None:
        return False
    return c_shims.parameter_types(old_sig) == c_shims.parameter_types(new_sig)


def _replacement_facts(
    change: SymbolChange, ref: Reference, kind: CouplingKind, facts: set[str]
) -> list[str]:
    """Add the facts of a place that puts its own function where upstream calls it (an
    override, a patch, a same-role registration) to ``facts``; the problems of its
    signature against the new one that the change made (or that were there before)."""
    if kind not in REPLACING_KINDS or (ref.signature is None and ref.body_hash is None):
        return []
    facts.add(Fact.HAS_REPLACEMENT)
    if Fact.NEW_BREAKING_CALL in facts or Fact.NEW_CALL_CONDITIONAL in facts:
        return []  # the change is the caller's: join/new_calls.py judged the replacement
    new_sig = change.new.signature if change.new is not None else None
    if ref.signature is None or new_sig is None:
        return []
    old_sig = change.old.signature if change.old is not None else None
    method = change.symbol_kind is SymbolKind.METHOD
    problems = incompatibilities(ref.signature, new_sig, method=method)
    before = incompatibilities(ref.signature, old_sig, method=method) if old_sig else []
    fresh = [p for p in problems if p not in before]
    if fresh:
        facts.add(Fact.INCOMPATIBLE)  # the change made the replacement stop fitting
        problems = fresh
    elif problems:
        facts.add(Fact.INCOMPATIBLE_BEFORE)  # it did not fit the old signature either
    if same_parameters(ref.signature, new_sig):
        facts.add(Fact.SAME_AS_NEW)
    return problems


def _calls_against(change: SymbolChange, shapes: tuple[str, ...]) -> tuple[bool, list[str]]:
    """(every call binds to the new signature, why a call that bound to the old one does
    not bind to the new). A call whose binding cannot be told (unpacked arguments) proves
    nothing; nor, for a method, does one that did not bind to the old signature either
    (``Cls.m(obj, ...)`` passes self: it would be miscounted)."""
    if not shapes:
        return True, []  # named, never called: no call to break
    if change.symbol_kind not in (SymbolKind.FUNCTION, SymbolKind.METHOD):
        return False, []  # a class's "signature" is its bases: calls go to its __init__
    old = change.old.signature if change.old is not None else None
    new = change.new.signature if change.new is not None else None
    if old is None or new is None:
        return False, []
    method = change.symbol_kind is SymbolKind.METHOD
    fit = True
    for shape in shapes:
        before = call_problems(shape, old, method=method)
        after = call_problems(shape, new, method=method)
        if before == [] and after:
            return False, [f"a call there {p}" for p in after]
        fit = fit and after == [] and (before == [] or not method)
    return fit, []


# --- facts the join computes from the whole tree ------------------------------------


def _registration_parts(detail: str) -> tuple[str, str | None]:
    """(registrar, overload) from a downstream registration reference's detail."""
    registrar = detail.split(" ", 1)[0] if detail else ""
    m = _OVERLOAD_RE.search(detail or "")
    return registrar, (m.group(1) if m else None)


def _same_registration(c: SymbolChange, r: Reference, registrar: str, overload: str | None) -> bool:
    """Does the downstream registration (its ``registrar`` and ``overload``, from
    :func:`_registration_parts`) replace the upstream one (same role and overload)?"""
    role = role_of(registrar)
    if role is None:
        return False
    key = r.target.removeprefix("op:")
    for sym in (c.new, c.old):
        if sym is None:
            continue
        for reg in sym.registrations:
            same_role = role_of(reg.registrar) == role
            if reg.key == key and same_role and reg.overload == overload:
                return True
    return False


def _falls_back(registrar: str) -> bool:
    """A downstream registrar that sends the op to its eager kernel (``make_fallback``,
    the ``fallbacks`` table), not one that generates a lowering (``register_pointwise``)."""
    return registrar in FALLBACK_CALLS or registrar == "table:fallbacks"


def registration_facts(c: SymbolChange, r: Reference) -> tuple[bool, frozenset[str]]:
    """Whether a downstream registration of a changed upstream key replaces upstream's
    (same role and overload), and its facts: ``other_role``, ``masked_by_fallback`` and
    those of :func:`_registration_interplay`."""
    registrar, overload = _registration_parts(r.detail)
    same = _same_registration(c, r, registrar, overload)
    if not same:
        role = frozenset({Fact.OTHER_ROLE}) | _cross_registry(c, r, registrar)
        if _decomposed_first(c, r, registrar):
            role |= {Fact.DECOMPOSED_FIRST}
    elif r.signature is None and r.body_hash is None and _falls_back(registrar):
        role = frozenset({Fact.MASKED_BY_FALLBACK})  # no function of its own
    else:
        role = frozenset()
    return same, role | _registration_interplay(c, r, registrar, overload)


def other_overload(c: SymbolChange, r: Reference) -> bool:
    """Does the downstream registration name one overload (``aten.arange.default``) and
    every upstream registration of the key in the changed symbol other overloads
    (``register_decomposition(aten.arange.start_step)``)? Then the two never meet: a graph
    node of one overload is dispatched to that overload's entries only. A packet on
    either side (``aten.arange``) claims every overload and meets all of them."""
    _, overload = _registration_parts(r.detail)
    if overload is None:
        return False
    key = r.target.removeprefix("op:")
    upstream = [
        g.overload
        for sym in (c.old, c.new)
        if sym is not None
        for g in sym.registrations
        if g.key == key
    ]
    return bool(upstream) and all(o is not None and o != overload for o in upstream)


def _decomposed_first(c: SymbolChange, r: Reference, registrar: str) -> bool:
    """The downstream registers a decomposition of the op and the changed upstream entries
    of it are all lowerings: the backend's decomposition rewrites the op before lowering,
    so upstream's lowering of it never runs there."""
    if role_of(registrar) != "decomposition":
        return False
    key = r.target.removeprefix("op:")
    roles = {
        role_of(g.registrar)
        for sym in (c.old, c.new)
        if sym is not None
        for g in sym.registrations
        if g.key == key
    }
    return roles == {"lowering"}


def _cross_registry(c: SymbolChange, r: Reference, registrar: str) -> frozenset[str]:
    """``cross_registry``: the changed upstream symbol is an entry of a registry with a
    role (a lowering, a fallback, a decomposition, ``inplaceable_ops``) for the key the
    downstream registers in another role that is a role too (not its own op table): the
    two registries meet on one op."""
    if role_of(registrar) is None:
        return frozenset()
    key = r.target.removeprefix("op:")
    for sym in (c.new, c.old):
        for reg in sym.registrations if sym is not None else ():
            if reg.key == key and role_of(reg.registrar) is not None:
                return frozenset({Fact.CROSS_REGISTRY})
    return frozenset()


def _registration_interplay(
    c: SymbolChange, r: Reference, registrar: str, overload: str | None
) -> frozenset[str]:
    """Facts of an upstream registration change meeting a downstream registration of the
    same key, beyond the roles (see join/verdict_rules.toml):

    * ``whole_upstream_table``: upstream added or removed a whole op table (a module-level
      dict/list/set of ops that is no known registry) that the downstream does not write;
    * ``decomposition_meets_fallback``: upstream now decomposes the op and the downstream
      calls ``make_fallback`` on one of its overloads (``aten.x.default``) without
      ``override_decomp``: upstream make_fallback asserts ``op not in decompositions``
      and raises "both a fallback and a decomp for same op" when the decomposition is in
      Inductor's table;
    * ``decomposition_meets_packet_fallback``: the same with the packet (``aten.x``): the
      table is keyed by overloads, so the assert cannot fire (make_fallback raises only
      under the ``CI`` environment variable), but the decomposition now runs before the
      fallback is reached;
    * ``decomposition_bypasses_lowering``: upstream now decomposes the op that the
      downstream lowers: the decomposition runs first, the lowering may no longer be
      reached;
    * ``decomposition_removed``: upstream no longer decomposes the op the downstream lowers
      or falls back on: the downstream code now receives it.
    """
    key = r.target.removeprefix("op:")
    old = [g for g in (c.old.registrations if c.old else ()) if g.key == key]
    new = [g for g in (c.new.registrations if c.new else ()) if g.key == key]
    facts: set[str] = set()
    if (
        c.kind in (ChangeKind.ADDED, ChangeKind.REMOVED)
        and (old or new)
        and all(
            g.registrar.startswith("table:")
            and role_of(g.registrar) is None
            and g.registrar != registrar
            for g in (*old, *new)
        )
    ):
        facts.add(Fact.WHOLE_UPSTREAM_TABLE)

    def decomposes(regs: list) -> bool:
        return any(
            role_of(g.registrar) == "decomposition"
            and (g.overload is None or overload is None or g.overload == overload)
            for g in regs
        )

    lowers = role_of(registrar) == "lowering"
    if decomposes(new) and not decomposes(old):
        if registrar in FALLBACK_CALLS:
            if f"[{OVERRIDE_DECOMP}]" not in r.detail:
                facts.add(
                    Fact.DECOMPOSITION_MEETS_FALLBACK
                    if overload
                    else Fact.DECOMPOSITION_MEETS_PACKET_FALLBACK
                )
        elif lowers:
            facts.add(Fact.DECOMPOSITION_BYPASSES_LOWERING)
    elif decomposes(old) and not decomposes(new) and lowers:
        facts.add(Fact.DECOMPOSITION_REMOVED)
    return frozenset(facts)


def override_facts(c: SymbolChange, r: Reference, resolver, overridden) -> frozenset[str]:
    """``callers_overridden`` when the downstream class overrides every upstream caller."""
    if r.kind is not CouplingKind.SUBCLASS_OVERRIDE or ChangeKind.SIGNATURE not in c.aspects:
        return frozenset()
    if c.symbol_kind is not SymbolKind.METHOD or not r.owner or "." not in r.owner:
        return frozenset()
    owner_cls = r.owner.rsplit(".", 1)[0]
    cls_qual, member = c.qualname.rsplit(".", 1)
    callers: set[str] = set()
    for mod, qual in resolver.ancestors(c.module, cls_qual):
        idx = resolver.index(mod)
        if idx is None:
            continue
        for q, sym in idx.symbols.items():
            if q.startswith(qual + ".") and f"self.{member}" in sym.calls:
                callers.add(q.rsplit(".", 1)[1])
    if callers and all((owner_cls, name) in overridden for name in callers):
        return frozenset({Fact.CALLERS_OVERRIDDEN})
    return frozenset()


def assignment_facts(c: SymbolChange, r: Reference, resolver) -> frozenset[str]:
    """``assigns_only`` for a monkey-patch of a removed or renamed name that only assigns
    it: the object it is set on still exists in the new upstream and the patch does not
    read the original, so the assignment cannot fail (the patch goes dead). A
    ``unittest.mock`` patcher reads the original when it starts, unless ``create=True``."""
    if r.kind is not CouplingKind.MONKEYPATCH or r.calls_original:
        return frozenset()
    if r.detail.startswith(("patch.object:", "patch:")):
        return frozenset()  # unittest.mock reads the original first: AttributeError
    if c.kind not in (ChangeKind.REMOVED, ChangeKind.RENAMED) or "." not in r.target:
        return frozenset()
    owner = resolver.resolve(r.target.rsplit(".", 1)[0])
    return frozenset({Fact.ASSIGNS_ONLY}) if resolver.defined(owner) else frozenset()


def dead_override_facts(
    c: SymbolChange, r: Reference, target: str, successor_has: Callable[[str], bool]
) -> frozenset[str]:
    """``dead_override`` for a downstream method that overrides a removed or renamed
    upstream method without calling the original (``super().m``, ``Base.m``): defining a
    method reads nothing of the base, so it cannot fail, and upstream no longer calls it
    by that name (a caller left in upstream would call the override, which still works).
    Not when a renamed class's successor still has ``m``: upstream calls that one, and a
    change of its parameters is a break the signature rules judge."""
    if r.kind is not CouplingKind.SUBCLASS_OVERRIDE or r.calls_original:
        return frozenset()
    if not r.detail.startswith("overrides method") or c.symbol_kind is not SymbolKind.METHOD:
        return frozenset()
    if c.kind not in (ChangeKind.REMOVED, ChangeKind.RENAMED) or successor_has(target):
        return frozenset()
    return frozenset({Fact.DEAD_OVERRIDE})


def member_facts(
    c: SymbolChange,
    member: str,
    names_in_file: Callable[[], Container[str]],
    constructs: bool = True,
) -> frozenset[str]:
    """Facts of a class use whose ``member`` changed: calling the class calls its
    ``__init__``, unless the place never calls the class (``constructs`` false: it only
    holds an instance, ``V.graph``); a member the file never names (``.member``,
    ``"member"``: the names ``names_in_file()`` gives, read only when needed) is not
    called there, so a signature change cannot break a call there, and a changed body
    runs only where upstream code calls it. The other construction and call dunders
    (``__call__``, ``__new__``) are called without being named, so they always count as
    named."""
    if member == "__init__":
        return frozenset({Fact.CALLED_DIRECTLY if constructs else Fact.NEVER_CONSTRUCTED})
    if member in CONSTRUCTION:
        return frozenset()
    if member not in names_in_file():
        return frozenset({Fact.MEMBER_NOT_NAMED})
    return frozenset()


def inherited_facts(
    c: SymbolChange,
    member: str,
    overrides: Callable[[], frozenset[str]],
    names_in_file: Callable[[], Container[str]],
) -> frozenset[str]:
    """Facts of a downstream subclass that inherits the changed ``member`` unoverridden:

    * ``member_not_named``: the subclass's file never names the member (``.member``,
      ``"member"``), so the backend never calls it itself: upstream code does;
    * ``touches_override``: the member's body (old or new) calls ``self.<m>`` for an
      ``m`` the subclass overrides (``overrides()``): the upstream code runs into the
      backend's own methods, so the change meets the backend's code.
    """
    if member in CONSTRUCTION or member.startswith("__"):
        return frozenset()  # called unnamed (construction, operators, protocols)
    facts = set()
    if member not in names_in_file():
        facts.add(Fact.MEMBER_NOT_NAMED)
    own = overrides()
    for sym in (c.old, c.new):
        if sym is not None and any(f"self.{m}" in sym.calls for m in own):
            facts.add(Fact.TOUCHES_OVERRIDE)
    return frozenset(facts)


class DeadFallback:
    """``old_only`` for an ``except ImportError`` branch whose ``try`` imports all exist in
    the new upstream: the new torch never runs it (compat code for older ones)."""

    def __init__(self, resolver, roots: frozenset[str]) -> None:
        self.resolver = resolver
        self.roots = roots
        self.memo: dict[tuple[str, ...], bool] = {}

    def __call__(self, gate) -> bool:
        needs = gate.requires
        if needs not in self.memo:
            self.memo[needs] = all(
                t.split(".", 1)[0] in self.roots and self.resolver.defined(self.resolver.resolve(t))
                for t in needs
            )
        return self.memo[needs]

    def fails(self, gate) -> str | None:
        """The first name the ``except ImportError`` fallback of a ``try`` import asks
        for that the new upstream does not define: then the fallback raises too."""
        for t in gate.fallback:
            if t.split(".", 1)[0] in self.roots and not self.resolver.defined(
                self.resolver.resolve(t)
            ):
                return t
        return None

    def runs(self, gate) -> bool:
        """``fallback_runs`` for an ``except ImportError`` branch whose ``try`` imports are
        all upstream names and one of them is gone from the new upstream: the new upstream
        always runs the branch, so nothing guards the imports in it (an import of a package
        outside the upstream, ``triton``, may fail or not: that branch stays guarded)."""
        needs = gate.requires
        return all(t.split(".", 1)[0] in self.roots for t in needs) and not self(gate)
