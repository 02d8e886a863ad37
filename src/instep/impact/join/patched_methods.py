"""Downstream defs installed as methods of an upstream class, for the dropped-attribute
pass: ``FSDPParamGroup.post_backward = post_backward_non_overlap`` runs the downstream
def on the upstream class's instances, so its ``self.<attr>`` reads need what that class's
``__init__`` sets, as a subclass's methods do.

The shape (torch 2.7.1 -> 2.8.0, torch_musa at ``8b583b3``): torch_musa's
``fsdp/patch.py`` installs ``post_backward_non_overlap`` as
``FSDPParamGroup.post_backward``; it passes ``self.reduce_scatter_reduce_op`` to
``foreach_reduce``, and torch 2.8.0's ``FSDPParamGroup.__init__`` no longer sets that
attribute (``gradient_divide_factor`` and ``force_sum_reduction_for_comms`` replace it):
AttributeError on every non-overlapped backward.

A patch counts when the index resolved its value to a downstream def
(:attr:`Reference.replacement`) whose first parameter is ``self``, and its target is a
member of an upstream class. Patches that assign a def to ``__init__``/``__post_init__``
of the class are its setters: when one of them sets the attribute, no read is claimed.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from instep.impact.join.skipped_init import find_def
from instep.impact.model import CouplingKind, Reference

UpClass = tuple[str, str]


@dataclass(frozen=True)
class PatchedMethod:
    """A downstream def installed as ``member`` of an upstream class."""

    ref: Reference  # the monkey-patch
    path: str  # the def's file
    qualname: str  # the def's qualname in it
    member: str  # the name it is installed under
    node: ast.FunctionDef | ast.AsyncFunctionDef


def _takes_self(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    args = [*fn.args.posonlyargs, *fn.args.args]
    return bool(args) and args[0].arg == "self"


def patched_methods(
    references: Sequence[Reference],
    class_of: Callable[[str], UpClass | None],
    tree_of: Callable[[str], ast.Module | None],
) -> dict[UpClass, list[PatchedMethod]]:
    """Upstream class -> the downstream defs installed as its members (``class_of``: the
    upstream class a dotted name denotes; ``tree_of``: a downstream file's tree)."""
    out: dict[UpClass, list[PatchedMethod]] = {}
    for r in references:
        if r.kind is not CouplingKind.MONKEYPATCH or not r.replacement:
            continue
        owner, _, member = r.target.rpartition(".")
        cls = class_of(owner) if owner else None
        if cls is None:
            continue
        path, _, qual = r.replacement.partition("::")
        fn = find_def(tree_of(path), qual)
        if fn is None or not _takes_self(fn):
            continue
        out.setdefault(cls, []).append(PatchedMethod(r, path, qual, member, fn))
    return out
