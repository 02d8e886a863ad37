"""Can a graph node pass a parameter that an upstream lowering gained? Only when the
parameter is an argument of the op's ATen schema.

A same-op registration (a downstream lowering, decomposition or fallback function of
``aten.x``) is called by the graph with the node's args and kwargs, and those follow the
op's schema in the new upstream's ``native_functions.yaml``
(:mod:`instep.impact.upstream.op_schemas`). A parameter the upstream lowering gained that
is no argument of any overload's schema (by name, or by position among the schema's
positional arguments) cannot come from a graph node: only upstream Python code calling
the upstream function by name passes it, and that code does not call the downstream
registration. :class:`OpArguments` says so, as a fact (``not_op_argument``) and a quoted
reason, for the rule ``signature.registration_not_op_argument``.

When the new upstream carries no schema file (a source tree without ``aten/``, a small
test repository) or the op is not an ``aten`` op, nothing is said and the same-op rule
stays as it was. Nothing here matches references or picks a rule.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Iterable

from instep.impact.join.fact_names import Fact
from instep.impact.model import Reference, SymbolChange
from instep.impact.upstream.op_schemas import NAMESPACE, Schema, is_schema_file
from instep.impact.upstream.op_schemas import schema_of as _schema_of
from instep.pyindex.signatures import parse_params
from instep.pyindex.symbols import FileIndex

log = logging.getLogger(__name__)


def op_of_key(key: str) -> tuple[str, str | None] | None:
    """(op, overload or None) of a registration key: ``op:aten.expand``,
    ``aten.expand.default``, ``torch.ops.aten.expand``; None for another namespace."""
    key = key.removeprefix("op:").removeprefix("torch.ops.")
    if key.startswith(f"{NAMESPACE}::"):
        key = f"{NAMESPACE}.{key[len(NAMESPACE) + 2 :]}"
    parts = key.split(".")
    if len(parts) < 2 or parts[0] != NAMESPACE or not parts[1]:
        return None
    return parts[1], (parts[2] if len(parts) > 2 and parts[2] else None)


def unbindable_new_parameters(change: SymbolChange, signature: str) -> list[tuple[str, int | None]]:
    """The parameters the new upstream signature gained that ``signature`` cannot bind, each
    with its position (None: keyword-only)."""
    new = parse_params(change.new.signature or "") if change.new else None
    old = parse_params(change.old.signature or "") if change.old else None
    rep = parse_params(signature)
    if new is None or rep is None:
        return []
    before = old.names if old is not None else frozenset()
    out: list[tuple[str, int | None]] = []
    for i, name in enumerate(new.positional):
        if name not in before and not rep.varargs and i >= len(rep.positional):
            out.append((name, i))
    for name in new.keyword_only:
        if name not in before and name not in rep.names and not rep.varkw:
            out.append((name, None))
    return out


class OpArguments:
    """The op schemas of the new upstream, from the index of its schema file (the symbol
    diff's when the file changed: the YAML is read once)."""

    def __init__(self, paths: Iterable[str], index_of: Callable[[str], FileIndex]) -> None:
        self.path = next((p for p in paths if is_schema_file(p)), None)
        self.index_of = index_of
        self._ops: dict[str, list[tuple[Schema, int]]] | None = None

    def _schemas(self) -> dict[str, list[tuple[Schema, int]]]:
        if self._ops is None:
            ops: dict[str, list[tuple[Schema, int]]] = defaultdict(list)
            try:
                idx = self.index_of(self.path) if self.path else None
            except (OSError, KeyError) as exc:
                log.warning("%s: op schemas not read (%s)", self.path, exc)
                idx = None
            if idx is not None and idx.error:
                log.warning("%s: op schemas not read (%s)", self.path, idx.error)
            for sym in idx.symbols.values() if idx is not None else ():
                schema = _schema_of(sym)
                if schema is not None:
                    ops[schema.op].append((schema, sym.line))
            self._ops = dict(ops)
        return self._ops

    def judge(self, change: SymbolChange, ref: Reference) -> tuple[frozenset[str], str]:
        """(``{not_op_argument}``, why) when no parameter the upstream registration gained
        and ``ref`` cannot bind is an argument of the op's schema; else (empty, '')."""
        if ref.signature is None or self.path is None:
            return frozenset(), ""
        op = op_of_key(ref.target)
        gained = unbindable_new_parameters(change, ref.signature)
        if op is None or not gained:
            return frozenset(), ""
        name, overload = op
        schemas = [
            (s, line)
            for s, line in self._schemas().get(name, ())
            if overload is None or s.overload == ("" if overload == "default" else overload)
        ]
        if not schemas:
            return frozenset(), ""
        for param, pos in gained:
            for s, _ in schemas:
                positional = [a for a in s.arguments if not a.kwarg_only]
                if s.argument(param) is not None or (pos is not None and pos < len(positional)):
                    return frozenset(), ""
        schema, line = schemas[0]
        params = ", ".join(f"`{p}`" for p, _ in gained)
        return frozenset({Fact.NOT_OP_ARGUMENT}), (
            f"{params} is no argument of the schema of `{NAMESPACE}::{name}` "
            f"({len(schemas)} overload(s); {self.path}:{line} `{schema.qualname}"
            f"({', '.join(str(a) for a in schema.arguments)})`): no graph node passes it, "
            "only upstream code that calls the upstream function by name"
        )
