"""The pass that matches the downstream references to the changes, one matcher per way a
downstream place reaches a change.

Every reference of the downstream index (imports and uses, overrides, monkey-patches,
registrations, config keys, C shim names: the recognisers of ``impact/downstream/``) is
matched, in the index's order, by: ``registration`` (the same op or key; a C shim name
against a declaration), ``by_name`` (the exact upstream name, resolved through
re-exports; a rename's old name too), ``class_members`` (a member of a used or
subclassed class changed, ancestors included) and ``call_paths`` (an upstream function
the downstream uses reaches a changed one in its module). The facts these matchers need
from the whole tree come from :mod:`instep.impact.join.facts`. Forks, ATen schemas,
higher-order ops, hook names and dropped attributes are passes of their own.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Container, Mapping

from instep.impact.downstream.scope import code_member_receivers
from instep.impact.join.fact_names import Fact
from instep.impact.join.facts import (
    assignment_facts,
    dead_override_facts,
    inherited_facts,
    member_facts,
    other_overload,
    override_facts,
    registration_facts,
)
from instep.impact.join.pass_api import Findings, Found, JoinInputs, JoinPass
from instep.impact.model import ChangeKind, CouplingKind, Reference, SymbolChange
from instep.impact.upstream import call_paths
from instep.pyindex.model import SymbolKind

_REGISTRATION_TARGETS = ("op:", "backend:", "device_", "c_shim:")


def exposed_member(member: str, c: SymbolChange) -> bool:
    """Members a user of a class is exposed to: public ones and construction/call dunders."""
    if c.kind in (ChangeKind.ADDED, ChangeKind.REMOVED, ChangeKind.RENAMED):
        return False
    return member in call_paths.CONSTRUCTION or not member.startswith("_")


_CLASS_LEVEL = frozenset({"classmethod", "staticmethod"})


def class_level(c: SymbolChange) -> bool:
    """The changed member is a classmethod or staticmethod on every side that has it."""
    sides = [s for s in (c.old, c.new) if s is not None]
    return bool(sides) and all(
        s.kind is SymbolKind.METHOD and _CLASS_LEVEL.intersection(s.decorators) for s in sides
    )


class ReferencePass(JoinPass):
    """import_use, subclass_override, inherited_path, monkeypatch, registration, config
    and c_shim couplings: the downstream references matched to the changes."""

    name = "references"
    kinds = frozenset(
        {
            CouplingKind.IMPORT_USE,
            CouplingKind.SUBCLASS_OVERRIDE,
            CouplingKind.INHERITED_PATH,
            CouplingKind.MONKEYPATCH,
            CouplingKind.REGISTRATION,
            CouplingKind.CONFIG,
            CouplingKind.C_SHIM,
        }
    )

    def run(self, inputs: JoinInputs, earlier: Mapping[str, Findings]) -> Findings:
        self.inputs = inputs
        self.found: list[Found] = []
        self.reach_memo: dict[str, dict[str, list[str]]] = {}
        self.spans: dict[tuple[str, str], tuple[int, int]] | None = None
        refs = inputs.references
        for r in refs:
            if r.kind is CouplingKind.REGISTRATION or r.target.startswith(_REGISTRATION_TARGETS):
                self.registration(r)
                continue
            if r.through is not None:
                r = self.through_declared_type(r)
                if r is None:
                    continue
            target = inputs.resolver.resolve(r.target)
            self.by_name(r, target)
            cls = inputs.resolver.class_of(target)
            if cls is not None:
                self.class_members(cls, r)
            if r.kind is CouplingKind.IMPORT_USE and not r.type_only:
                self.call_paths(target, r)  # a name in a type position calls nothing
        return Findings(self.found, stats={"downstream_references": len(refs)})

    def through_declared_type(self, r: Reference) -> Reference | None:
        """``Cls.attr.member`` used through an instance's ``attr`` (downstream/typed_params)
        as a use of ``T.member``, where ``T`` is the class upstream declares ``attr`` to be;
        None (no coupling) when upstream declares no class for it."""
        owner, member = r.target.rsplit(".", 1)
        resolver = self.inputs.resolver
        declared = resolver.declared_type(resolver.resolve(owner))
        if declared is None:
            return None
        return dataclasses.replace(r, target=f"{declared[0]}.{declared[1]}.{member}")

    def registration(self, r: Reference) -> None:
        """The same op or key registered downstream; a C shim name against a declaration."""
        inputs = self.inputs
        for i, c in inputs.changes.by_key.get(r.target, ()):
            if r.kind is CouplingKind.C_SHIM:
                self.found.append(Found(i, c, r, detail=f"{r.detail}; upstream shim {c.qualname}"))
                continue
            if other_overload(c, r):
                continue  # aten.x.default against entries of aten.x.start_step only
            same, facts = registration_facts(c, r)
            ref = r if same else dataclasses.replace(r, signature=None, body_hash=None)
            why = ""
            if Fact.OTHER_ROLE in facts and inputs.inductor.only_inductor(c.path):
                facts |= {Fact.INDUCTOR_NOT_RUN}  # the op meets the change only in Inductor
                why = f"the downstream never runs Inductor: {inputs.inductor.evidence}"
            if same:
                not_arg, why = inputs.op_arguments.judge(c, ref)
                facts |= not_arg
            self.found.append(
                Found(
                    i,
                    c,
                    ref,
                    CouplingKind.REGISTRATION,
                    detail=r.detail or r.target,
                    extra=facts,
                    evidence=why,
                )
            )

    def by_name(self, r: Reference, target: str) -> None:
        """The exact upstream name (resolved through re-exports; a rename's old name too)."""
        inputs = self.inputs
        resolver, renamed = inputs.resolver, inputs.renamed_classes
        still_there = (
            resolver.defined(target)
            or resolver.imported(r.target)
            or resolver.reachable(target) is not None
        )
        by_dotted = inputs.changes.by_dotted
        direct = by_dotted.get(target, []) + (
            by_dotted.get(r.target, []) if target != r.target else []
        )
        overridden = inputs.overrides.overridden
        for i, c in direct:
            if still_there and c.kind in (ChangeKind.REMOVED, ChangeKind.RENAMED):
                continue  # moved or now inherited: the name the downstream uses still works
            if renamed.survives(target, c) is not None:
                continue  # a member of a renamed class: the class name is the one break
            extra = override_facts(c, r, resolver, overridden) | {Fact.CALLED_DIRECTLY}
            extra |= assignment_facts(c, r, resolver)
            extra |= dead_override_facts(c, r, target, renamed.successor_has)
            if r.type_only and c.kind not in (ChangeKind.REMOVED, ChangeKind.RENAMED):
                extra |= {Fact.TYPE_POSITION_ONLY}  # an annotation, isinstance, except
            why = ""
            if c.kind is ChangeKind.REMOVED and c.symbol_kind is SymbolKind.METHOD:
                why = inputs.extension_bases.declares(*target.rsplit(".", 1)) or ""
                extra |= {Fact.DECLARED_BY_EXTENSION_BASE} if why else frozenset()
            chain = [c.ref, f"{r.kind} at {r.at}"]
            self.found.append(Found(i, c, r, chain=chain, extra=extra, evidence=why))

    def class_members(self, cls: tuple[str, str], r: Reference) -> None:
        """A member of a class the downstream uses or subclasses changed (ancestors too)."""
        module, qual = cls
        owner_cls = r.owner.split(".")[0] if r.owner else None
        inputs = self.inputs
        overridden = inputs.overrides.overridden
        touched = self.touched(r) if r.type_only else None
        # the place only calls the class (``C(...)``, never passes it on or reads it): a
        # construction runs __new__/__init__/__post_init__, never a classmethod or
        # staticmethod (``C.create``), which only the class object reaches
        constructs_only = r.kind is CouplingKind.IMPORT_USE and bool(r.call_shapes)
        # a use that never calls the class (it holds an instance: ``V.graph``) runs no
        # __init__ of its own; an import line answers for its file, judged by the rules
        constructs = not (r.detail == "use" and r.call_shapes == ())
        for amod, aqual in inputs.resolver.ancestors(module, qual):
            for i, c in inputs.changes.by_class.get(f"{amod}.{aqual}", []):
                member = c.qualname.rsplit(".", 1)[-1]
                if touched is not None and member not in touched:
                    continue  # named in a type position only, and the place never names it
                if isinstance(touched, dict) and self.others_only(touched[member], amod, aqual):
                    continue  # named only as another class's member (``Pointwise.create``)
                if constructs_only and class_level(c):
                    continue  # a construction calls no classmethod
                if r.kind is CouplingKind.SUBCLASS_OVERRIDE and r.detail.startswith("subclass"):
                    if owner_cls and (owner_cls, member) in overridden:
                        continue  # the override reference couples directly
                    if c.kind in (ChangeKind.ADDED, ChangeKind.REMOVED, ChangeKind.RENAMED):
                        continue  # nothing inherited changed behaviour
                    self.found.append(self._inherited(i, c, r, member, aqual, owner_cls))
                elif r.kind is CouplingKind.IMPORT_USE and exposed_member(member, c):
                    self.found.append(
                        Found(
                            i,
                            c,
                            r,
                            CouplingKind.IMPORT_USE,
                            chain=[c.ref, f"{qual} used at {r.at}"],
                            detail=f"uses {qual}, whose {member} changed",
                            # calls of the class are calls of its __init__: each place is
                            # judged on its own calls; other members, one place per file
                            per_file=member != "__init__",
                            extra=member_facts(
                                c, member, lambda: inputs.names_in(r.path), constructs
                            ),
                        )
                    )

    def others_only(self, receivers: frozenset[str], amod: str, aqual: str) -> bool:
        """Whether every ``X.member`` of a place names, as ``X``, an upstream class of the
        changed member's module that does not inherit it: ``ir.Pointwise.create`` in a def
        naming ``ir.Reduction`` only in ``isinstance`` does not call ``Reduction.create``
        (a ``self.``/local receiver, a call's result, a string, or a class the module
        does not define could be anything: they count)."""
        resolver = self.inputs.resolver
        for recv in receivers:
            name = recv.rsplit(".", 1)[-1]
            if not name[:1].isupper():
                return False
            found = resolver.class_of(f"{amod}.{name}")
            if found is None or (amod, aqual) in resolver.ancestors(*found):
                return False
        return bool(receivers)

    def touched(self, r: Reference) -> Container[str]:
        """The member names a place names (``.name``, ``"name"``) and, for each, the dotted
        names written before its dot: its def's or class's lines, or the file's (names
        only) for a module-level place and an import line. A class's lines hold its
        methods: a field annotated ``x: C`` is used as ``self.x.member`` there, and a name
        elsewhere in the file is not this place's (a dataclass field's annotation with
        ``x.member`` only in a module-level def reaches no member)."""
        spans = self.spans
        if spans is None:
            spans = self.spans = {
                (f.path, d.qualname): (d.line, d.end_line)
                for f in self.inputs.down.files.values()
                for d in (*f.functions, *(c for c in f.classes if c.end_line))
            }
        span = spans.get((r.path, r.owner or ""))
        if span is None:
            return self.inputs.names_in(r.path)
        try:
            text = self.inputs.read_down(r.path).decode("utf-8", "replace")
        except (OSError, KeyError):
            return self.inputs.names_in(r.path)
        lines = text.splitlines()[span[0] - 1 : span[1]]
        return code_member_receivers("\n".join(lines) + "\n")

    def _inherited(
        self, i: int, c: SymbolChange, r: Reference, member: str, aqual: str, owner_cls
    ) -> Found:
        """A downstream subclass inheriting the changed ``member`` without overriding it."""
        overridden = self.inputs.overrides.overridden
        return Found(
            i,
            c,
            r,
            CouplingKind.INHERITED_PATH,
            chain=[c.ref, f"inherited by {owner_cls or r.owner} at {r.at}"],
            detail=f"{owner_cls or 'subclass'} inherits {aqual}.{member}",
            extra=inherited_facts(
                c,
                member,
                lambda: frozenset(m for k, m in overridden if k == owner_cls),
                lambda: self.inputs.names_in(r.path),
            ),
        )

    def call_paths(self, target: str, r: Reference) -> None:
        """An upstream function the downstream uses reaches a changed one in its module."""
        resolver, memo = self.inputs.resolver, self.reach_memo
        changed = self.inputs.changes.changed_in_module
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
                self.found.append(
                    Found(
                        i,
                        c,
                        r,
                        CouplingKind.INHERITED_PATH,
                        chain=[f"{r.at} uses {rest}", *chain[1:]],
                        detail=f"via {' -> '.join(chain)}",
                    )
                )
