"""Constructor facts: downstream constructions of an upstream class whose ``__init__``
changed (written or synthesised by ``@dataclass``: ``pyindex.dataclass_init``).

A construction breaks in three ways that :func:`constructor_facts` tells from the call
shapes the downstream index recorded (``signatures.call_shape``), never from a guess:

* it no longer binds: a required parameter or field added, a keyword renamed
  (``facts.py`` already finds it for ``Cls(...)`` as ``call_breaks``; here for a
  downstream subclass's ``super().__init__(...)``: ``super_call_breaks``);
* it binds, but to other parameters: a parameter inserted before others shifts the
  positional arguments (``Cls("a", 4)`` gave ``size=4`` and now gives ``dtype=4``):
  ``call_breaks`` (``super_call_breaks`` through ``super()``) with the shift as problem;
* the fact ``constructor`` marks the change as a constructor's, so that the rules quote
  the new signature.

A field appended with a default, or a new keyword-only parameter with a default, leaves
every construction bound as before: no fact. Nothing here matches references or picks
a rule (``facts.py`` calls it).
"""

from __future__ import annotations

from instep.impact.join.fact_names import Fact
from instep.impact.model import ChangeKind, CouplingKind, Reference, SymbolChange
from instep.pyindex.model import SymbolKind
from instep.pyindex.signatures import call_problems, parse_params


def is_constructor(change: SymbolChange) -> bool:
    return change.symbol_kind is SymbolKind.METHOD and change.qualname.endswith(".__init__")


def shifted(shape: str, old: str, new: str) -> list[str]:
    """How the positional arguments of a call of ``shape`` (without ``self``) bind to
    other parameters under ``new`` than under ``old``; empty when none moved."""
    po, pn = parse_params(old), parse_params(new)
    if po is None or pn is None:
        return []
    count = int(shape.split(";", 1)[0])
    old_pos, new_pos = _without_self(po.positional), _without_self(pn.positional)
    out = []
    for i in range(min(count, len(old_pos), len(new_pos))):
        if old_pos[i] != new_pos[i]:
            out.append(
                f"passes argument {i + 1} positionally, which bound '{old_pos[i]}' and now "
                f"binds '{new_pos[i]}'"
            )
    return out


def _without_self(names: tuple[str, ...]) -> tuple[str, ...]:
    return names[1:] if names and names[0] in ("self", "cls") else names


def _breaks(shapes: tuple[str, ...], old: str, new: str) -> list[str]:
    """Why calls of ``shapes`` that bound to ``old`` do not bind, or bind elsewhere, under
    ``new``; a call that did not bind before (or cannot be told) proves nothing."""
    problems: list[str] = []
    for shape in shapes:
        before = call_problems(shape, old, method=True)
        if before != []:
            continue
        after = call_problems(shape, new, method=True)
        if after is None:
            continue
        found = after or shifted(shape, old, new)
        problems.extend(p for p in found if p not in problems)
    return problems


def constructor_facts(
    change: SymbolChange, ref: Reference, kind: CouplingKind, facts: frozenset[str]
) -> tuple[frozenset[str], list[str]]:
    """The constructor facts of one coupling (see the module docstring), and the problems
    that prove them (``a call there ...``)."""
    if not is_constructor(change) or ChangeKind.SIGNATURE not in change.aspects:
        return frozenset(), []
    old = change.old.signature if change.old is not None else None
    new = change.new.signature if change.new is not None else None
    if old is None or new is None:
        return frozenset(), []
    out = {Fact.CONSTRUCTOR}
    problems: list[str] = []
    if kind is CouplingKind.IMPORT_USE and Fact.CALLED_DIRECTLY in facts and ref.call_shapes:
        moved = [p for s in ref.call_shapes for p in _shift_only(s, old, new)]
        if moved and Fact.CALL_BREAKS not in facts:
            out.add(Fact.CALL_BREAKS)
            problems = [f"a call there {p}" for p in dict.fromkeys(moved)]
    elif (
        kind is CouplingKind.SUBCLASS_OVERRIDE
        and ref.detail == "overrides method"
        and ref.call_shapes
    ):
        found = _breaks(ref.call_shapes, old, new)
        if found:
            out.add(Fact.SUPER_CALL_BREAKS)
            problems = [f"its super().__init__(...) {p}" for p in found]
    return frozenset(out), problems


def _shift_only(shape: str, old: str, new: str) -> list[str]:
    """A shift of a call that binds under both signatures (the rest is ``call_breaks``)."""
    if call_problems(shape, old, method=True) != [] or call_problems(shape, new, method=True):
        return []
    return shifted(shape, old, new)
