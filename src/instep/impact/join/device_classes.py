"""Does a method of an upstream device class ever run for the out-of-tree backend?

Upstream picks some of its codegen objects per device from a registry:
``register_backend_for_device(device, scheduling, wrapper, cpp_wrapper, fx_wrapper)``
(the ``registered_by`` handles of ``backend_hooks.toml``: one *role* per handle class,
``BaseScheduling`` or ``PythonWrapperCodegen``). A class upstream registers for its own
devices (``CppWrapperGpu`` for ``cuda``) runs for the backend only when the backend
registers, for that role, a class with it in its upstream MRO. A call that sits in a
method of such a class ``K`` therefore reaches the backend's override only when some
class the downstream registers for the role has ``K`` in its upstream MRO and does not
override (itself or through a downstream base) the calling method.

:meth:`DeviceClasses.never_runs` says why a call site cannot run for the backend, or ''
(it may, or it cannot be told): ``K`` is no class upstream registers for a role, the
downstream registers nothing for that role, or one of the names it passes is no
downstream class read statically (a variable, an upstream class): then nothing changes.
Static and by last name only; nothing is imported or run.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable

from instep.impact.downstream.subclasses import members_defined
from instep.impact.join.backend_handles import load_registrars, registered_names
from instep.impact.join.skipped_init import downstream_mros
from instep.pyindex.parsed_files import ParsedFiles

UpClass = tuple[str, str]


class DeviceClasses:
    """The classes upstream and the downstream register per role, read on first use."""

    def __init__(
        self,
        down,
        resolver,
        down_paths: Iterable[str],
        read_down: Callable[[str], bytes | None],
        up_texts: Callable[[], dict[str, bytes]],
        down_trees: ParsedFiles | None = None,
    ) -> None:
        self.down_trees = down_trees  # the downstream's trees over ``read_down``, shared
        self.down = down  # the downstream index: classes() and _class_map()
        self.resolver = resolver
        self.down_paths = [p for p in down_paths if p.endswith(".py")]
        self.read_down = read_down
        self.up_texts = up_texts
        self._roles: list[tuple[UpClass, frozenset[str], frozenset[str]]] | None = None
        self._classes: dict[str, list[tuple[list[UpClass], frozenset[str]]]] = {}
        self._memo: dict[tuple[UpClass, str], str] = {}

    def _load(self) -> list[tuple[UpClass, frozenset[str], frozenset[str]]]:
        """(role class, last names upstream registers, last names the downstream does)."""
        if self._roles is not None:
            return self._roles
        regs = load_registrars()
        functions = {r.function for r in regs.values()}
        up_trees = _trees(self.up_texts().items(), functions)
        shared = self.down_trees.tree_of_bytes if self.down_trees is not None else None
        down_trees = _trees(((p, self.read_down(p)) for p in self.down_paths), functions, shared)
        self._roles = []
        for dotted, reg in regs.items():
            role = tuple(dotted.rsplit(".", 1))
            up = {n for t in up_trees for n in registered_names(t, reg)}
            down = {n for t in down_trees for n in registered_names(t, reg)}
            self._roles.append((role, frozenset(up), frozenset(down)))  # type: ignore[arg-type]
        if any(down for _, _, down in self._roles):
            cmap = self.down._class_map()
            for name, _info, mro in downstream_mros(self.down, self.resolver, cmap):
                last = name.rsplit(".", 1)[-1]
                self._classes.setdefault(last, []).append((mro, members_defined(name, cmap)))
        return self._roles

    def never_runs(self, site_cls: UpClass, caller: str) -> str:
        """Why the method ``caller`` (a qualname in ``site_cls``'s module) of the upstream
        class ``site_cls`` never runs for the backend, or ''."""
        key = (site_cls, caller)
        if key not in self._memo:
            self._memo[key] = self._never_runs(site_cls, caller)
        return self._memo[key]

    def _never_runs(self, site_cls: UpClass, caller: str) -> str:
        ancestors = self.resolver.ancestors(*site_cls)
        member = caller.rsplit(".", 1)[-1]
        last = site_cls[1].rsplit(".", 1)[-1]
        for role, up, down in self._load():
            if role not in ancestors or last not in up:
                continue  # no class upstream registers for this role
            if not down or any(n not in self._classes for n in down):
                return ""  # registers nothing for it, or a name not read statically
            for name in down:
                for mro, defined in self._classes[name]:
                    if site_cls in mro and member not in defined:
                        return ""
            names = ", ".join(f"`{n}`" for n in sorted(down))
            return (
                f"`{caller}` runs only for a device that registers `{site_cls[1]}` for "
                f"`{role[1]}`: the downstream registers {names} (`register_backend_for_device`), "
                f"none of which inherits `{member}` from `{site_cls[1]}`"
            )
        return ""


def _trees(
    items: Iterable[tuple[str, bytes | None]],
    functions: set[str],
    shared: Callable[[str], ast.Module | None] | None = None,
) -> list[ast.Module]:
    """The parsed modules among ``items`` whose text names one of ``functions``
    (``shared``: path -> the tree of those bytes, parsed once for every pass)."""
    needles = [f.encode() for f in functions]
    out = []
    for path, data in items:
        if not data or not any(n in data for n in needles):
            continue
        if shared is not None:
            if (tree := shared(path)) is not None:
                out.append(tree)
            continue
        try:
            out.append(ast.parse(data))
        except (SyntaxError, ValueError):
            continue
    return out
