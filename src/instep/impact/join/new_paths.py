"""A breaking call on a path the new upstream adds whole: no proven break (#31 Shim
pattern 1).

torch 2.15.0 passes ``required_post_reduction_index`` to ``generate_node_schedule`` only
from ``_codegen_reduction_with_sub_parent_epilogue``, called only from
``codegen_staged_reduction``, both new; its scheduler calls that hook only under ``elif
isinstance(node, FusedStagedReduction):``, a class it adds too. Whether a backend ever
builds such a node is a question about the new feature (on CUDA it does by default; on
torch-npu 2.14.0 its plan is never made), which no static reading decides: the
breaking-path search (:mod:`~instep.impact.join.breaking_path`) then says
``breaking_call_new_path`` (Test) instead of claiming a TypeError. :func:`new_path`
follows the def holding the call up through the calls of each def's name to where the
path is entered; it reads the new upstream's call sites and the diff's added names, and
decides nothing.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable

from instep.impact.join.change_index import ChangeIndex
from instep.impact.join.upstream_calls import CallSite, UpstreamCalls
from instep.impact.model import ChangeKind

NEW_PATH_DEPTH = 4  # how many new defs up a new path is followed to where it is entered
NEW_PATH_ENTRIES = 8  # calls of one def on a new path beyond which it is not followed
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
# the dotted upstream name an expression written at a call site denotes, or None
Resolve = Callable[[CallSite, str], "str | None"]


def new_path(site: CallSite, calls: UpstreamCalls, changes: ChangeIndex, resolve: Resolve) -> str:
    """Why the call at ``site`` runs only on a path the new upstream adds whole, or ''.

    From the def holding the call, each def up is followed through every call of its name
    in the new upstream: a call in a def of the same name delegates (a composite
    scheduling passing the hook on) and adds nothing; a call through ``self``/``cls`` in
    a def the diff added as well goes one def up; a call under ``isinstance(x, C)`` (or
    ``type(x) is C``) for a class ``C`` the diff added is where the path is entered. Any
    other call (an old def, another receiver, a call in a nested def) means the path
    joins code that ran before: no claim. The claim needs at least one entry; the diff
    must have added every def on the way."""
    if site.caller is None or site.nested:
        return ""
    frontier = [(site.module, site.caller)]
    seen: set[tuple[str, str]] = set()
    defs: list[str] = []
    entries: list[str] = []
    for _ in range(NEW_PATH_DEPTH):
        up: list[tuple[str, str]] = []
        for module, caller in frontier:
            if (module, caller) in seen:
                continue
            seen.add((module, caller))
            if not _added(f"{module}.{caller}", changes):
                return ""
            defs.append(caller)
            member = caller.rsplit(".", 1)[-1]
            callers = [
                s
                for s in calls.sites(member)
                if s.caller is None or s.caller.rsplit(".", 1)[-1] != member
            ]
            if not callers or len(callers) > NEW_PATH_ENTRIES:
                return ""
            for s in callers:
                entered = _entered_for_new_class(s, calls, changes, resolve)
                if entered:
                    entries.append(f"{s.at} runs it only {entered}")
                elif s.caller and not s.nested and s.receiver in ("self", "cls"):
                    up.append((s.module, s.caller))
                else:
                    return ""
        if not up:
            break
        frontier = up
    else:
        return ""  # deeper than NEW_PATH_DEPTH: not followed to where it is entered
    if not entries:
        return ""
    chain = " ← ".join(f"`{d}`" for d in dict.fromkeys(defs))
    return (
        f"that path is new in the new upstream ({chain}) and "
        f"{'; '.join(dict.fromkeys(entries))}: it breaks only where that new feature "
        "takes effect on the backend's device"
    )


def _added(dotted: str, changes: ChangeIndex) -> bool:
    """Did the diff add ``dotted`` (a def), or the class that holds it?"""
    for name in (dotted, dotted.rpartition(".")[0]):
        if any(c.kind is ChangeKind.ADDED for _, c in changes.by_dotted.get(name, ())):
            return True
    return False


def _entered_for_new_class(
    site: CallSite, calls: UpstreamCalls, changes: ChangeIndex, resolve: Resolve
) -> str:
    """'for a `C` (new)' when ``site`` sits in the body of an ``if``/``elif`` that tests
    ``isinstance(x, C)`` or ``type(x) is C`` for classes ``C`` the diff added, else ''."""
    tree = calls.tree(site.path)
    if tree is None:
        return ""
    for node in ast.walk(tree):
        if not isinstance(node, ast.If) or not node.body:
            continue
        if not node.body[0].lineno <= site.line <= (node.body[-1].end_lineno or 0):
            continue
        classes = _tested_classes(node.test)
        if not classes:
            continue
        dotted = [resolve(site, c) for c in classes]
        if all(d is not None and _added(d, changes) for d in dotted):
            named = ", ".join(f"`{c}`" for c in classes)
            return f"for a {named}, a class the new upstream adds (`{ast.unparse(node.test)}`)"
    return ""


def _tested_classes(test: ast.expr) -> list[str]:
    """The class names ``isinstance(x, C)`` / ``isinstance(x, (C, D))`` / ``type(x) is C``
    tests for (dotted names only), else []."""
    if (
        isinstance(test, ast.Call)
        and isinstance(test.func, ast.Name)
        and test.func.id == "isinstance"
        and len(test.args) == 2
    ):
        arg = test.args[1]
        names = list(arg.elts) if isinstance(arg, ast.Tuple) else [arg]
    elif (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.ops[0], ast.Is)
        and isinstance(test.left, ast.Call)
        and isinstance(test.left.func, ast.Name)
        and test.left.func.id == "type"
    ):
        names = [test.comparators[0]]
    else:
        return []
    out = [ast.unparse(n) for n in names]
    return out if all(_IDENT.match(n) for n in out) else []
