"""Match downstream references to upstream changes, one matcher per way of reaching one.

:class:`Join` indexes a run's changes (by dotted name, by class, by registration key,
by module for call paths) and collects couplings per unit, one per (kind, change, file,
line) (one per file for indirect evidence), each with its verdict
(:func:`~instep.impact.join.verdicts.decide`). The matchers: ``registration`` (same op
or key; C shim names against declarations), ``by_name`` (the exact upstream name),
``class_members`` (a member of a used or subclassed class changed), ``call_paths`` (an
upstream function the downstream uses reaches a changed one) and ``forks`` (a downstream
copy of a changed function). The facts the rules read come from
:mod:`instep.impact.join.facts`. Nothing here reads sources or builds the indexes.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Callable

from instep.impact.join import breaking_path
from instep.impact.join.extension_bases import ExtensionBases
from instep.impact.join.facts import (
    DeadFallback,
    assignment_facts,
    dead_override_facts,
    inherited_facts,
    member_facts,
    override_facts,
    registration_facts,
)
from instep.impact.join.renamed_classes import RenamedClasses
from instep.impact.join.verdicts import decide
from instep.impact.model import (
    ChangeKind,
    Coupling,
    CouplingKind,
    Reference,
    SymbolChange,
    UpstreamChange,
)
from instep.impact.upstream import call_paths
from instep.pyindex.model import SymbolKind

MIN_FORK_SIMILARITY = 0.6  # below this only a same-named, non-dunder function counts

BEHAVIOUR = frozenset(
    {
        ChangeKind.BODY,
        ChangeKind.SIGNATURE,
        ChangeKind.VALUE,
        ChangeKind.DECORATOR,
        ChangeKind.REMOVED,
        ChangeKind.RENAMED,
    }
)

# Changes followed through upstream call paths (inherited.path): behaviour changes, and
# annotation-only ones too, so that their evidence is shown (the rules judge them Check).
FOLLOWED = BEHAVIOUR | {ChangeKind.ANNOTATION}

Hit = tuple[int, SymbolChange]  # (unit index, change)


def relevant_keys(c: SymbolChange) -> set[str]:
    """Registration keys a change is about: a table's added/removed entries, else all."""
    if not (c.old and c.old.registrations) and not (c.new and c.new.registrations):
        return set()
    old = {r.key for r in c.old.registrations} if c.old else set()
    new = {r.key for r in c.new.registrations} if c.new else set()
    if c.symbol_kind in (SymbolKind.ASSIGNMENT, SymbolKind.CLASS_ATTRIBUTE):
        return old ^ new
    return old | new


def weak_fork(r: Reference, c: SymbolChange) -> bool:
    sim = r.similarity or 0.0
    if sim >= MIN_FORK_SIMILARITY:
        return False
    name = c.qualname.rsplit(".", 1)[-1]
    own = (r.owner or "").rsplit(".", 1)[-1]
    return own != name or (name.startswith("__") and name.endswith("__"))


def exposed_member(member: str, c: SymbolChange) -> bool:
    """Members a user of a class is exposed to: public ones and construction/call dunders."""
    if c.kind in (ChangeKind.ADDED, ChangeKind.REMOVED, ChangeKind.RENAMED):
        return False
    return member in call_paths.CONSTRUCTION or not member.startswith("_")


class PendingAdds:
    """Stands in for a :class:`Join` whose ``add`` is put off: each call is kept, to be made
    on the join later by :meth:`add_to`, in the same order. A pass that only adds (it
    never reads ``out``) can then run while an earlier pass's couplings are still to come
    (the hook-name child's) and add after them: ``Join.add`` keeps the first of equal keys,
    so the order of the adds, not of the work, is what must stay. Everything else is read
    from the join; a count a pass takes from ``out`` is then meaningless, :meth:`add_to`
    gives it."""

    def __init__(self, join: Join) -> None:
        self.join = join
        self.pending: list[tuple[tuple, dict]] = []

    def __getattr__(self, name: str):
        return getattr(self.join, name)

    def add(self, *args, **kwargs) -> None:
        self.pending.append((args, kwargs))

    def add_to(self) -> int:
        """Make the kept adds on the join, in their order; how many couplings were new."""
        out = self.join.out
        before = sum(len(v) for v in out.values())
        for args, kwargs in self.pending:
            self.join.add(*args, **kwargs)
        self.pending = []
        return sum(len(v) for v in out.values()) - before


class Join:
    """The couplings of one run: the changes indexed, the couplings found so far."""

    def __init__(
        self,
        units: list[UpstreamChange],
        resolver,
        roots: frozenset[str],
        new_version: tuple[int, ...] | None,
        names_in: Callable[[str], frozenset[str]],
        calls: breaking_path.UpstreamCalls | None = None,
    ) -> None:
        self.resolver = resolver
        self.calls = calls  # call sites of the new upstream, for breaking paths
        self.new_version = new_version
        self.names_in = names_in  # attribute names and quoted identifiers of a file
        self.dead_fallback = DeadFallback(resolver, roots)
        self.renamed_classes = RenamedClasses(units, resolver)
        self._extension_bases: ExtensionBases | None = None  # built once probes is set
        self.by_dotted: dict[str, list[Hit]] = defaultdict(list)
        self.by_class: dict[str, list[Hit]] = defaultdict(list)
        self.by_key: dict[str, list[Hit]] = defaultdict(list)
        self.changed_in_module: dict[str, dict[str, list[Hit]]] = defaultdict(
            lambda: defaultdict(list)
        )
        for i, u in enumerate(units):
            for c in u.changes:
                self.by_dotted[c.dotted].append((i, c))
                if c.renamed_from:
                    old_q = c.renamed_from.split("::")[-1]
                    self.by_dotted[f"{c.module}.{old_q}"].append((i, c))
                if c.symbol_kind in (SymbolKind.METHOD, SymbolKind.CLASS_ATTRIBUTE):
                    self.by_class[c.dotted.rsplit(".", 1)[0]].append((i, c))
                for key in relevant_keys(c):
                    self.by_key[key if ":" in key else f"op:{key}"].append((i, c))
                if c.aspects & FOLLOWED:
                    self.changed_in_module[c.module][c.qualname].append((i, c))
        self.out: dict[int, dict[tuple, Coupling]] = defaultdict(dict)
        self.overridden: set[tuple[str, str]] = set()  # (downstream class, member it defines)
        self.overridden_in: set[tuple[str, str, str]] = set()  # (file, class, member)
        self.patched: dict[str, str] = {}  # upstream dotted name -> downstream patch site
        self.swaps: tuple = ()  # downstream/wholesale.Swap: modules swapped wholesale
        self.op_arguments = None  # join/op_arguments.OpArguments of the new upstream
        self.escapes = None  # downstream/class_escapes.ClassEscapes of the downstream tree
        self.devices = None  # join/device_classes.DeviceClasses: device classes registered
        self.reach_memo: dict[str, dict[str, list[str]]] = {}
        self.probes = None  # join/probe_outcomes.ProbeOutcomes: decides source probes
        self.inductor = None  # downstream/inductor_use.InductorUse: runs Inductor at all?

    def add(
        self,
        i: int,
        change: SymbolChange,
        ref: Reference,
        kind: CouplingKind | None = None,
        chain: list[str] | None = None,
        detail: str = "",
        extra: frozenset[str] = frozenset(),
        per_file: bool = False,
        evidence: str = "",
    ) -> None:
        k = kind or ref.kind
        if ref.gate is not None and ref.gate.requires:
            if self.dead_fallback(ref.gate):
                extra = extra | {"old_only"}
            elif self.dead_fallback.runs(ref.gate):
                extra = extra | {"fallback_runs"}
        if ref.gate is not None and ref.gate.fallback:
            missing = self.dead_fallback.fails(ref.gate)
            if missing is not None:
                extra = extra | {"fallback_fails"}
                evidence = evidence or (
                    f"the `except ImportError` fallback of the import at {ref.gate.path}:"
                    f"{ref.gate.line} asks for `{missing}`, which the new upstream does not "
                    "define either: the fallback raises too"
                )
        if ref.gate is not None and ref.gate.probe is not None and self.probes is not None:
            extra = extra | self.probes.facts(ref.gate)
        per_file = per_file or k is CouplingKind.INHERITED_PATH
        line = None if per_file else ref.line  # indirect evidence: one per file is enough
        key = (k, change.ref, ref.path, line)
        if key in self.out[i]:
            return
        if self.calls is not None and breaking_path.needs_search(change, ref, k):
            path = breaking_path.search(
                self.calls,
                change,
                ref,
                k,
                self.resolver,
                self.overridden_in,
                self.patched,
                self.swaps,
                self.escapes,
                self.devices,
            )
            extra, evidence = extra | {path.kind.value}, path.text
        self.out[i][key] = decide(
            change,
            ref,
            kind=k,
            new_version=self.new_version,
            chain=chain,
            detail=detail,
            extra_facts=extra,
            evidence=evidence,
        )

    def references(self, refs: list[Reference]) -> None:
        """Match every downstream reference (forks apart: :meth:`forks`)."""
        for r in refs:
            if r.kind is CouplingKind.SUBCLASS_OVERRIDE and r.owner and "." in r.owner:
                owner_cls, member = r.owner.rsplit(".", 1)
                self.overridden.add((owner_cls, member))
                self.overridden_in.add((r.path, owner_cls, member))
            elif r.kind is CouplingKind.MONKEYPATCH and r.signature is not None:
                self.patched.setdefault(self.resolver.resolve(r.target), r.at)
        for r in refs:
            if r.kind is CouplingKind.REGISTRATION or r.target.startswith(
                ("op:", "backend:", "device_", "c_shim:")
            ):
                self.registration(r)
                continue
            if r.through is not None:
                r = self.through_declared_type(r)
                if r is None:
                    continue
            target = self.resolver.resolve(r.target)
            self.by_name(r, target)
            cls = self.resolver.class_of(target)
            if cls is not None:
                self.class_members(cls, r)
            if r.kind is CouplingKind.IMPORT_USE:
                self.call_paths(target, r)

    def through_declared_type(self, r: Reference) -> Reference | None:
        """``Cls.attr.member`` used through an instance's ``attr`` (downstream/typed_params)
        as a use of ``T.member``, where ``T`` is the class upstream declares ``attr`` to be;
        None (no coupling) when upstream declares no class for it."""
        owner, member = r.target.rsplit(".", 1)
        declared = self.resolver.declared_type(self.resolver.resolve(owner))
        if declared is None:
            return None
        return dataclasses.replace(r, target=f"{declared[0]}.{declared[1]}.{member}")

    def registration(self, r: Reference) -> None:
        """The same op or key registered downstream; a C shim name against a declaration."""
        for i, c in self.by_key.get(r.target, ()):
            if r.kind is CouplingKind.C_SHIM:
                self.add(i, c, r, detail=f"{r.detail}; upstream shim {c.qualname}")
                continue
            same, facts = registration_facts(c, r)
            ref = r if same else dataclasses.replace(r, signature=None, body_hash=None)
            why = ""
            if "other_role" in facts and self.inductor and self.inductor.only_inductor(c.path):
                facts |= {"inductor_not_run"}  # the op meets the change only in Inductor
                why = f"the downstream never runs Inductor: {self.inductor.evidence}"
            if same and self.op_arguments is not None:
                not_arg, why = self.op_arguments.judge(c, ref)
                facts |= not_arg
            self.add(
                i,
                c,
                ref,
                CouplingKind.REGISTRATION,
                detail=r.detail or r.target,
                extra=facts,
                evidence=why,
            )

    def by_name(self, r: Reference, target: str) -> None:
        """The exact upstream name (resolved through re-exports; a rename's old name too)."""
        still_there = (
            self.resolver.defined(target)
            or self.resolver.imported(r.target)
            or self.resolver.reachable(target) is not None
        )
        direct = self.by_dotted.get(target, []) + (
            self.by_dotted.get(r.target, []) if target != r.target else []
        )
        for i, c in direct:
            if still_there and c.kind in (ChangeKind.REMOVED, ChangeKind.RENAMED):
                continue  # moved or now inherited: the name the downstream uses still works
            if self.renamed_classes.survives(target, c) is not None:
                continue  # a member of a renamed class: the class name is the one break
            extra = override_facts(c, r, self.resolver, self.overridden) | {"called_directly"}
            extra |= assignment_facts(c, r, self.resolver)
            extra |= dead_override_facts(c, r, target, self.renamed_classes.successor_has)
            why = ""
            if c.kind is ChangeKind.REMOVED and c.symbol_kind is SymbolKind.METHOD:
                why = self.extension_bases().declares(*target.rsplit(".", 1)) or ""
                extra |= {"declared_by_extension_base"} if why else frozenset()
            self.add(i, c, r, chain=[c.ref, f"{r.kind} at {r.at}"], extra=extra, evidence=why)

    def extension_bases(self) -> ExtensionBases:
        """Members inherited from extension types, read from the new side's stubs."""
        if self._extension_bases is None:
            self._extension_bases = ExtensionBases(self.resolver, self.probes)
        return self._extension_bases

    def class_members(self, cls: tuple[str, str], r: Reference) -> None:
        """A member of a class the downstream uses or subclasses changed (ancestors too)."""
        module, qual = cls
        owner_cls = r.owner.split(".")[0] if r.owner else None
        for amod, aqual in self.resolver.ancestors(module, qual):
            for i, c in self.by_class.get(f"{amod}.{aqual}", []):
                member = c.qualname.rsplit(".", 1)[-1]
                if r.kind is CouplingKind.SUBCLASS_OVERRIDE and r.detail.startswith("subclass"):
                    if owner_cls and (owner_cls, member) in self.overridden:
                        continue  # the override reference couples directly
                    if c.kind in (ChangeKind.ADDED, ChangeKind.REMOVED, ChangeKind.RENAMED):
                        continue  # nothing inherited changed behaviour
                    self.add(
                        i,
                        c,
                        r,
                        CouplingKind.INHERITED_PATH,
                        chain=[c.ref, f"inherited by {owner_cls or r.owner} at {r.at}"],
                        detail=f"{owner_cls or 'subclass'} inherits {aqual}.{member}",
                        extra=inherited_facts(
                            c,
                            member,
                            lambda: frozenset(m for k, m in self.overridden if k == owner_cls),
                            lambda: self.names_in(r.path),
                        ),
                    )
                elif r.kind is CouplingKind.IMPORT_USE and exposed_member(member, c):
                    self.add(
                        i,
                        c,
                        r,
                        CouplingKind.IMPORT_USE,
                        chain=[c.ref, f"{qual} used at {r.at}"],
                        detail=f"uses {qual}, whose {member} changed",
                        # calls of the class are calls of its __init__: each place is
                        # judged on its own calls; other members, one place per file
                        per_file=member != "__init__",
                        extra=member_facts(c, member, lambda: self.names_in(r.path)),
                    )

    def call_paths(self, target: str, r: Reference) -> None:
        """An upstream function the downstream uses reaches a changed one in its module."""
        resolver, memo, changed = self.resolver, self.reach_memo, self.changed_in_module
        module, rest = resolver.split(target)
        if module is None or not rest or module not in changed:
            return
        if target not in memo:
            idx = resolver.index(module)
            if idx is None:
                memo[target] = {}
            else:
                key = f"<methods>{module}"
                if key not in memo:  # (setdefault would build the table on every call)
                    memo[key] = call_paths.methods_by_name(idx.symbols)
                methods = memo[key]
                targets = set(changed[module])
                memo[target] = call_paths.reached(idx.symbols, rest, targets, methods=methods)
        for qual, chain in memo[target].items():
            for i, c in changed[module][qual]:
                self.add(
                    i,
                    c,
                    r,
                    CouplingKind.INHERITED_PATH,
                    chain=[f"{r.at} uses {rest}", *chain[1:]],
                    detail=f"via {' -> '.join(chain)}",
                )

    def forks(self, fork_refs: list[Reference]) -> int:
        """Downstream functions that copy a changed upstream function; how many counted."""
        kept = 0
        for r in fork_refs:
            for i, c in self.by_dotted.get(r.target, []):
                if weak_fork(r, c):
                    continue
                kept += 1
                self.add(i, c, r, CouplingKind.FORK, detail=r.detail)
        return kept

    def couplings(self) -> dict[int, list[Coupling]]:
        return {i: list(d.values()) for i, d in self.out.items()}
