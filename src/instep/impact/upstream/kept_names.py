"""Renames that keep the old name, named as such: the symbol diff's last step
(``symbol_diff.join``) over one batch of changes.

Two forms (docs/impact.md, "Renames that keep the old name"):

- a def that, in this change, starts announcing its deprecation (``warnings.warn(...,
  FutureWarning)``, a logger's "X is deprecated, use Y", ``@deprecated``) and hands its
  call to another def of its file (``return y(...)``): the old name is kept with a warning;
  when that def is new here, it is the old one renamed (``RENAMED``, ``renamed_from`` the
  old def);
- a module-level alias ``Old = New`` added where ``New`` is a def or class of the same file
  and ``Old`` was a def or class of the batch's old side (this file, or another one that
  lost it): ``New`` is ``Old`` renamed, the old name kept as an alias.

A def that warns but does its own work, a wrapper that was already deprecated, and an
alias of a name that never existed before are none of these. What the symbol index records
for it (a def's deprecation message, the name it hands the call to) comes from
``pyindex/symbols.py``; this module only reads the changes and writes their
``deprecation`` note. It decides no verdict.
"""

from __future__ import annotations

import re
from dataclasses import replace

from instep.impact.model import ChangeKind, SymbolChange
from instep.pyindex.model import SymbolKind

_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
# "will be removed in 2.16", "removed after version 2.9", "until torch 2.12"
_UNTIL = re.compile(
    r"(?:remov\w*|delet\w*|drop\w*|until)\s+(?:in|after|by|from|with|at)?\s*"
    r"(?:version\s+|v|pytorch\s+|torch\s+)?(\d+\.\d+(?:\.\d+)?)",
    re.IGNORECASE,
)
_DEFS = (SymbolKind.FUNCTION, SymbolKind.METHOD, SymbolKind.CLASS)


def kept_old_names(changes: list[SymbolChange]) -> list[SymbolChange]:
    """``changes`` with the renames that keep the old name noted (``deprecation``), and the
    new name of such a rename made ``RENAMED`` from the old one (the module docstring)."""
    by_key = {(c.path, c.qualname): i for i, c in enumerate(changes)}
    removed = {
        c.qualname: i
        for i, c in enumerate(changes)
        if c.kind is ChangeKind.REMOVED and c.old is not None and c.old.kind in _DEFS
    }
    out = list(changes)
    for i, c in enumerate(changes):
        new = c.new
        if new is None or c.kind is ChangeKind.REMOVED:
            continue
        if new.deprecated and new.delegates and not (c.old is not None and c.old.deprecated):
            _warning_wrapper(out, changes, i, by_key)
        elif (
            c.kind is ChangeKind.ADDED
            and new.kind is SymbolKind.ASSIGNMENT
            and "." not in c.qualname
            and new.value is not None
            and _IDENTIFIER.fullmatch(new.value)
        ):
            _alias(out, changes, i, by_key, removed)
    return out


def _warning_wrapper(
    out: list[SymbolChange],
    changes: list[SymbolChange],
    i: int,
    by_key: dict[tuple[str, str], int],
) -> None:
    """Change ``i`` now warns and hands its call to ``new.delegates``: the old name kept
    with a warning (and the def it calls, when added here, that name renamed)."""
    c = changes[i]
    new = c.new
    assert new is not None and new.deprecated and new.delegates
    scope = c.qualname.rsplit(".", 1)[0] + "." if "." in c.qualname else ""
    name = scope + new.delegates.rsplit(".", 1)[-1]
    target = by_key.get((c.path, name))
    until = _until(new.deprecated)
    warned = f"with a warning{f' (until {until})' if until else ''}"
    renamed = target is not None and changes[target].kind is ChangeKind.ADDED
    verb = "renamed to" if renamed else "deprecated: use"
    out[i] = replace(out[i], deprecation=f"{verb} `{name}`, old name kept {warned}")
    if renamed:
        assert target is not None
        out[target] = _renamed_from(out[target], c.ref, f"old name kept {warned}")


def _alias(
    out: list[SymbolChange],
    changes: list[SymbolChange],
    i: int,
    by_key: dict[tuple[str, str], int],
    removed: dict[str, int],
) -> None:
    """Change ``i`` adds ``Old = New`` at module level: when ``New`` is a def or class of
    the file and ``Old`` was one before, ``New`` is ``Old`` renamed, the old name kept."""
    c = changes[i]
    assert c.new is not None and c.new.value is not None
    value = c.new.value
    target = by_key.get((c.path, value))
    aliased = changes[target].new if target is not None else None
    if target is None or aliased is None or aliased.kind not in _DEFS:
        return
    kept = f"old name kept as an alias (`{c.qualname} = {value}`)"
    alias_note = f"the old name of `{value}`, kept as an alias"
    old = removed.get(c.qualname)
    moved_from = changes[target].renamed_from or ""
    if old is None and moved_from.rpartition("::")[2] == c.qualname:
        # moved with its body (a rename join found) and the old name aliased
        out[i] = replace(out[i], deprecation=alias_note)
        out[target] = replace(out[target], deprecation=f"renamed, {kept}")
        return
    if old is None:
        return  # an alias of a name that was no def before: a new name
    out[i] = replace(out[i], deprecation=alias_note)
    out[old] = replace(out[old], deprecation=f"renamed to `{changes[target].ref}`, {kept}")
    if changes[target].kind is ChangeKind.ADDED:
        out[target] = _renamed_from(out[target], changes[old].ref, kept)
    else:
        out[target] = replace(out[target], deprecation=f"renamed, {kept}")


def _renamed_from(change: SymbolChange, old_ref: str, kept: str) -> SymbolChange:
    """``change`` (the new name, ADDED) as the rename of ``old_ref`` that keeps it."""
    return replace(
        change,
        kind=ChangeKind.RENAMED,
        renamed_from=old_ref,
        deprecation=f"renamed from `{old_ref}`, {kept}",
        detail=f"renamed from {old_ref}; {kept}",
    )


def _until(message: str) -> str | None:
    """The version a deprecation message says the old name goes away in."""
    found = _UNTIL.search(message)
    return found.group(1) if found else None
