"""Match the downstream's ATen-overload and higher-order-op places
(:mod:`instep.impact.downstream.op_refs`) to upstream changes of the operator schema
(:mod:`instep.impact.upstream.op_schemas`) and of higher-order-op implementations.

- OP_SCHEMA: a place naming ``aten.x.y`` couples to a change of the overload ``x.y`` in
  ``native_functions.yaml``; a place naming the packet ``aten.x`` to a change of any of
  its overloads when it registers the packet (a registration claims every overload), and
  to a removal when the whole packet went away (no ``x`` or ``x.*`` left in the new file).
  Other overloads of the same op do not couple.
- HIGHER_ORDER_OP: a place naming ``torch.ops.higher_order.x`` couples to behaviour
  changes of the upstream file under ``torch/_higher_order_ops/`` that declares the HOP
  named ``x`` (``super().__init__("x")`` or ``HigherOrderOperator("x")``, read from the
  old and new text): its autograd, functionalization and proxy-mode rules.

Two passes, :class:`OpSchemaPass` and :class:`HigherOrderOpPass`. The facts the rules
read (``verdict_rules.toml``, ``op_schema.*`` and ``hop.*``) are computed here, from the
reference and the parsed schemas, and passed to the join as extra facts:
``overload_named``, ``packet``, ``packet_gone``, ``registered``, ``at_import``,
``guarded`` (a ``try/except AttributeError`` too), ``schema_breaks`` (an argument
removed, renamed or added without a default) and ``binds_by_name`` (the downstream
function registered for the overload takes the old keyword-only arguments by name, or
lacks a new one, with no ``**kwargs``: the graph node's keyword arguments reach it).
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from collections.abc import Mapping

from instep.impact.downstream.op_refs import HOP_PREFIX, SCHEMA_PREFIX
from instep.impact.join.change_index import BEHAVIOUR
from instep.impact.join.fact_names import Fact
from instep.impact.join.pass_api import Findings, Found, JoinInputs, JoinPass
from instep.impact.model import ChangeKind, CouplingKind, Reference, SymbolChange
from instep.impact.upstream.op_schemas import (
    NAMESPACE,
    Schema,
    breaking_changes,
    is_schema_file,
    schema_of,
)

HOP_DIR = "torch/_higher_order_ops/"
_HOP_NAME = re.compile(r"""(?:super\(\)\.__init__|HigherOrderOperator)\(\s*["'](\w+)["']""")
_FUNC_OP = re.compile(r"^- func:[ \t]*['\"]?(\w+)[.(]", re.M)


def _schema_name(qualname: str) -> tuple[str, str]:
    """``aten::add.Tensor`` -> ('add', 'Tensor'); ``aten::add`` -> ('add', '')."""
    op, _, overload = qualname.split("::", 1)[1].partition(".")
    return op, overload


def _parameters(signature: str) -> tuple[set[str], bool] | None:
    """(parameter names, takes **kwargs) of a downstream function's signature text."""
    try:
        args = ast.parse(f"def f({signature}): pass").body[0].args  # type: ignore[attr-defined]
    except SyntaxError:
        return None
    names = {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)}
    return names, args.kwarg is not None


def binding_problems(old: Schema, new: Schema, signature: str | None) -> list[str]:
    """Why a downstream function registered for the overload stops binding the keyword
    arguments a graph node of the new schema passes (its keyword-only ones): a keyword
    renamed, or added without a default, that the function does not take. Empty when it
    still binds, when its signature is unknown, or when it takes ``**kwargs``. A keyword
    added with a default is passed only when a caller sets it: not counted."""
    parsed = _parameters(signature) if signature else None
    if parsed is None or parsed[1]:
        return []
    names, _ = parsed
    renamed = {
        b.name: a.name
        for a in old.arguments
        if a.kwarg_only and new.argument(a.name) is None
        for b in new.arguments
        if b.kwarg_only and old.argument(b.name) is None and b.type == a.type
    }
    out = []
    for b in new.arguments:
        if not b.kwarg_only or old.argument(b.name) is not None or b.name in names:
            continue
        if b.name in renamed:
            out.append(
                f"keyword '{renamed[b.name]}' is now '{b.name}', which the registered "
                "function does not take"
            )
        elif b.default is None:
            out.append(
                f"new required keyword '{b.name}', which the registered function does not take"
            )
    return out


class OpSchemaPass(JoinPass):
    """op_schema couplings: the downstream's ATen overloads x schema changes."""

    name = "op schemas"
    kinds = frozenset({CouplingKind.OP_SCHEMA})

    def run(self, inputs: JoinInputs, earlier: Mapping[str, Findings]) -> Findings:
        self.found: list[Found] = []
        self.by_overload: dict[tuple[str, str], list[tuple[int, SymbolChange]]] = defaultdict(list)
        self.by_op: dict[str, list[tuple[int, SymbolChange]]] = defaultdict(list)
        self.new_ops: dict[int, set[str]] = {}  # unit -> ops the new schema file still has
        for i, u in enumerate(inputs.units):
            for c in u.changes:
                if is_schema_file(c.path) and c.qualname.startswith(f"{NAMESPACE}::"):
                    op, overload = _schema_name(c.qualname)
                    self.by_overload[(op, overload)].append((i, c))
                    self.by_op[op].append((i, c))
                    if i not in self.new_ops:
                        new = inputs.lines_of(u, c)[1]
                        self.new_ops[i] = set(_FUNC_OP.findall("\n".join(new or ())))
        if not self.by_op:
            return Findings()
        refs = inputs.references
        registered: dict[tuple[str, int, str], str | None] = {}
        for r in refs:
            if r.kind is CouplingKind.REGISTRATION and r.target.startswith("op:aten."):
                key = (r.path, r.line, r.target[len("op:aten.") :])
                registered[key] = registered.get(key) or r.signature
        for r in refs:
            if r.kind is CouplingKind.OP_SCHEMA:
                self.schema(r, registered)
        return Findings(self.found)

    def schema(self, r: Reference, registered: dict[tuple[str, int, str], str | None]) -> None:
        name = r.target[len(SCHEMA_PREFIX) :].split(".")  # ['aten', op] or ['aten', op, ovl]
        op = name[1]
        reg_key = (r.path, r.line, op)
        is_reg = reg_key in registered
        base = {Fact.AT_IMPORT} if r.at_import else set()
        if r.gate is not None and r.gate.kind == "try_except":
            base.add(Fact.GUARDED)
        if is_reg:
            base.add(Fact.REGISTERED)
        if len(name) == 3:
            overload = "" if name[2] == "default" else name[2]
            hits = [
                (i, c, {Fact.OVERLOAD_NAMED}) for i, c in self.by_overload.get((op, overload), ())
            ]
        else:
            hits = []
            for i, c in self.by_op.get(op, ()):
                gone = op not in self.new_ops.get(i, ())
                if c.kind is ChangeKind.REMOVED and gone:
                    hits.append((i, c, {Fact.PACKET, Fact.PACKET_GONE}))
                elif is_reg:
                    hits.append((i, c, {Fact.PACKET}))
        for i, c, facts in hits:
            self.found.append(self._coupling(i, c, r, facts | base, registered.get(reg_key)))

    def _coupling(
        self, i: int, c: SymbolChange, r: Reference, facts: set[Fact], signature: str | None
    ) -> Found:
        """The op_schema coupling of the place ``r`` (with the registered function's
        ``signature``, if any) to the overload change ``c``."""
        old = schema_of(c.old) if c.old is not None else None
        new = schema_of(c.new) if c.new is not None else None
        why: list[str] = []
        if old is not None and new is not None:
            why = breaking_changes(old, new)
            if why:
                facts.add(Fact.SCHEMA_BREAKS)
                bind = binding_problems(old, new, signature)
                if bind:
                    facts.add(Fact.BINDS_BY_NAME)
                    why = [*why, *bind]
        where = f"native_functions.yaml:{(c.old or c.new).line}"  # type: ignore[union-attr]
        side = "old" if c.old is not None else "new"
        detail = f"{r.detail} ({'at import' if r.at_import else 'when its function runs'}); "
        detail += f"{c.qualname} at {where} ({side})"
        if why:
            detail += ": " + "; ".join(why)
        return Found(
            i,
            c,
            r,
            CouplingKind.OP_SCHEMA,
            chain=[c.ref, f"{r.detail} at {r.at}"],
            detail=detail,
            extra=frozenset(facts),
        )


class HigherOrderOpPass(JoinPass):
    """higher_order_op couplings: the downstream's HOP names x their implementations."""

    name = "higher-order ops"
    kinds = frozenset({CouplingKind.HIGHER_ORDER_OP})

    def run(self, inputs: JoinInputs, earlier: Mapping[str, Findings]) -> Findings:
        by_hop: dict[str, list[tuple[int, SymbolChange]]] = defaultdict(list)
        hop_names: dict[tuple[str, str], set[str]] = {}
        for i, u in enumerate(inputs.units):
            for c in u.changes:
                if c.path.startswith(HOP_DIR) and c.aspects & BEHAVIOUR:
                    key = (u.id, c.path)
                    if key not in hop_names:
                        old, new = inputs.lines_of(u, c)
                        text = "\n".join((*(old or ()), *(new or ())))
                        hop_names[key] = set(_HOP_NAME.findall(text))
                    for name in hop_names[key]:
                        by_hop[name].append((i, c))
        if not by_hop:
            return Findings()
        found = []
        for r in inputs.references:
            if r.kind is not CouplingKind.HIGHER_ORDER_OP:
                continue
            name = r.target[len(HOP_PREFIX) :]
            for i, c in by_hop.get(name, ()):
                found.append(
                    Found(
                        i,
                        c,
                        r,
                        CouplingKind.HIGHER_ORDER_OP,
                        chain=[c.ref, f"{r.detail} at {r.at}"],
                        detail=f"{r.detail}: the HOP '{name}' is implemented in {c.path}",
                        per_file=True,
                    )
                )
        return Findings(found)
