"""The scope statement every impact report opens with, as sentences: what was read (the
downstream's Python files, its shared objects and the linked upstream symbols checked,
the registered kernels counted) and what was not (shared objects that could not be
read first, then the parts not checked and why).

Renders a :class:`~instep.impact_contract.Scope`; decides nothing. English here, zh in
the glossary (``[texts.impact_scope]``). Markdown, HTML, CSV and the CLI's summary use
the same sentences; JSON carries the record itself.
"""

from __future__ import annotations

from instep.glossary import glossary
from instep.impact.model import NativeCheck, Scope

SCOPE = {
    "en": {
        "read": "Read: {python} Python files; {native}; {kernels}.",
        "native_checked": "{objects} shared objects, {symbols} linked upstream symbols checked"
        " ({missing} missing, {moved} moved to another library they still load)",
        "kernels": "{n} registered kernels",
        "kernels_not_read": "registered kernels not read",
        "no_shared_objects": "no shared objects (a source tree? give a wheel or an installed"
        " tree to check the linked symbols)",
        "needs_releases": "linked symbols not checked: a git range or patches have no built"
        " libraries, the check needs releases (wheels or installed trees)",
        "upstream_not_built": "linked symbols not checked: an upstream side holds no shared"
        " library (a source tree?), the check needs releases (wheels or installed trees)",
        "unreadable": "Not read: {n} shared object(s) of the downstream, so their linked"
        " symbols were not checked: {items}.",
        "no_shim_scoped": "No Shim in what was read; not checked: {parts}.",
        "part_unreadable": "{n} unreadable shared object(s)",
        "part_native": "the linked symbols",
        "part_kernels": "the registered kernels",
    },
    "zh": dict(glossary()["texts"]["impact_scope"]),
}


def _t(lang: str) -> dict[str, str]:
    return SCOPE["zh" if lang == "zh" else "en"]


def scope_lines(scope: Scope | None, lang: str) -> list[str]:
    """The scope statement: unreadable shared objects first (when there are), then what
    was read. Empty for a report without a scope (written before scopes existed)."""
    if scope is None:
        return []
    t = _t(lang)
    lines = []
    if scope.unreadable:
        items = "; ".join(f"{u.path} ({u.reason})" for u in scope.unreadable)
        lines.append(t["unreadable"].format(n=len(scope.unreadable), items=items))
    if scope.native is NativeCheck.CHECKED:
        native = t["native_checked"].format(
            objects=scope.shared_objects,
            symbols=scope.linked_symbols,
            missing=scope.missing_symbols,
            moved=scope.moved_symbols,
        )
    else:
        native = t[str(scope.native)]
    kernels = (
        t["kernels"].format(n=scope.registered_kernels)
        if scope.registered_kernels is not None
        else t["kernels_not_read"]
    )
    lines.append(t["read"].format(python=scope.python_files, native=native, kernels=kernels))
    return lines


def not_checked(scope: Scope | None, lang: str) -> list[str]:
    """The parts the report did not check (empty: it checked all it knows of)."""
    if scope is None:
        return []
    t = _t(lang)
    parts = []
    if scope.unreadable:
        parts.append(t["part_unreadable"].format(n=len(scope.unreadable)))
    if scope.native in (NativeCheck.NEEDS_RELEASES, NativeCheck.UPSTREAM_NOT_BUILT):
        parts.append(t["part_native"])
    if scope.registered_kernels is None:
        parts.append(t["part_kernels"])
    return parts


def no_shim_text(scope: Scope | None, lang: str, plain: str) -> str:
    """What "Act now" says when it lists no Shim: ``plain`` when everything was read,
    else "no Shim in what was read" with the parts that were not."""
    parts = not_checked(scope, lang)
    if not parts:
        return plain
    sep = "、" if lang == "zh" else ", "
    return _t(lang)["no_shim_scoped"].format(parts=sep.join(parts))
