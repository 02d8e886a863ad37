"""The upstream changes of a run, indexed for the join: by dotted name, by class, by
registration key, and by module for call paths.

:class:`ChangeIndex` is built once from the diff units (``JoinInputs.changes``) and read
by every pass that looks a change up from a downstream place. The sets of change kinds
here (:data:`BEHAVIOUR`, :data:`FOLLOWED`) say which changes the passes follow. Nothing
here reads a source, a downstream place, or decides anything.
"""

from __future__ import annotations

from collections import defaultdict

from instep.impact.model import ChangeKind, SymbolChange, UpstreamChange
from instep.pyindex.model import SymbolKind

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


class ChangeIndex:
    """The changes of ``units``: ``by_dotted`` (a rename's old name too), ``by_class``
    (members and class attributes under their class), ``by_key`` (registration keys,
    ``op:`` for a bare op), ``changed_in_module`` (module -> qualname -> changes followed
    through call paths)."""

    def __init__(self, units: list[UpstreamChange]) -> None:
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
