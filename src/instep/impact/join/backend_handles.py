"""The handles of ``data/backend_hooks.toml``: receivers in the new upstream that hand out
the backend's objects (``V.graph.device_ops``, ``get_interface_for_device(…)``), the
upstream class each hands out, and for some the downstream call that says which classes
(``register_backend_for_device``: :class:`Registrar`, :func:`registered_names`).

Read by the hook-name pass (whose object a read reaches) and by the device classes (which
classes the backend registers for a role). Data and its reading only: nothing here
follows a call or decides a coupling.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from importlib import resources

from instep.tomlfile import parse_toml


def load_handles() -> dict[str, str]:
    """Receiver text (arguments as ``(*)``) -> the upstream class it hands out."""
    text = (resources.files("instep.impact") / "data" / "backend_hooks.toml").read_text("utf-8")
    out: dict[str, str] = {}
    for h in parse_toml(text, "backend_hooks.toml").get("handle", []):
        for r in h["receivers"]:
            out[r] = h["class"]
    return out


@dataclass(frozen=True)
class Registrar:
    """A downstream call that says which classes a handle hands out: the classes passed at
    ``positions`` / ``keywords`` of ``function(...)`` (``register_backend_for_device``)."""

    function: str
    positions: tuple[int, ...]
    keywords: tuple[str, ...]


def load_registrars() -> dict[str, Registrar]:
    """Upstream class (dotted) -> the registrar of the classes its handles hand out."""
    text = (resources.files("instep.impact") / "data" / "backend_hooks.toml").read_text("utf-8")
    out: dict[str, Registrar] = {}
    for h in parse_toml(text, "backend_hooks.toml").get("handle", []):
        if "registered_by" in h:
            out[h["class"]] = Registrar(
                h["registered_by"], tuple(h.get("positions", ())), tuple(h.get("keywords", ()))
            )
    return out


def registered_names(tree: ast.Module, reg: Registrar) -> set[str]:
    """Last names of what a downstream module passes to ``reg.function`` as classes."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
        if name != reg.function:
            continue
        args = [node.args[i] for i in reg.positions if i < len(node.args)]
        args += [k.value for k in node.keywords if k.arg in reg.keywords]
        out.update(
            ast.unparse(a).rsplit(".", 1)[-1] for a in args if not isinstance(a, ast.Constant)
        )
    return out
