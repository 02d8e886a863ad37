"""Does a downstream place run only when someone turns on a switch that is off by default?

Two ways, each read statically (``join/patch_installs.py`` decides what "off by default"
means and holds the trees):

* the statement sits, in its module-level function, under an ``if`` on such a switch, or
  every call of that function does (:meth:`PatchInstalls.off_by_default`, the test made
  for patch installations, here asked of any statement);
* its whole module is loaded only under such a switch: every import of the module in the
  downstream tree (``from .lowering_fx import f``, ``from . import lowering_fx``,
  ``import pkg.lowering_fx``) sits under an ``if`` on a switch off by default, or in a
  module-level function every call of which does, or in a module loaded only that way
  itself (up to :data:`DEPTH` modules up). torch-npu's ``_inductor/__init__.py`` imports
  ``lowering_fx`` and ``codegen/ir_fx`` only ``if npu_config.dump_fx_graph:`` (the
  ``INDUCTOR_ASCEND_DUMP_FX_GRAPH`` debug switch, default off), and the same name from
  ``lowering`` otherwise.

A module nobody imports by name (an entry point, a plugin loaded by a string), a package's
``__init__`` (loaded with any of its submodules) and a module imported in a method or a
class body are not decided. The coupling book asks this of a would-be Shim only: the break
is real when the switch is on, so the place is Test (``switch.off_by_default``).
"""

from __future__ import annotations

import ast
import re

from instep.impact.downstream.ast_children import statements
from instep.impact.join.patch_installs import PatchInstalls, _absolute, _enclosing_function
from instep.pyindex.model import module_of

DEPTH = 3  # how many importing modules up a module loaded only under a switch is followed


class SwitchedPlaces:
    """Answers, memoised, over one :class:`PatchInstalls`."""

    def __init__(self, installs: PatchInstalls) -> None:
        self.installs = installs
        self._modules: dict[str, str] = {}
        self._lines: dict[str, dict[str, set[int]]] | None = None

    def off_by_default(self, path: str, line: int, owner: str | None) -> str:
        """Why the statement at ``path:line`` (in the def ``owner``) runs only under a
        switch off by default, or ''."""
        why = self.installs.off_by_default(path, line, owner) if owner else ""
        return why or self.module_off(path)

    def module_off(self, path: str, depth: int = 0) -> str:
        """Why the module ``path`` is loaded only under a switch off by default, or ''."""
        if path in self._modules:
            return self._modules[path]
        self._modules[path] = ""  # a cycle decides nothing
        if depth >= DEPTH or path.endswith("__init__.py"):
            return ""
        module = module_of(path)
        whys = []
        for p, node in self._imports_of(module):
            why = self._import_off(p, node, depth)
            if not why:
                return ""
            whys.append(why)
        self._modules[path] = f"`{module}` is imported only {whys[0]}" if whys else ""
        return self._modules[path]

    def _import_off(self, path: str, node: ast.stmt, depth: int) -> str:
        installs = self.installs
        tree = installs.tree(path)
        if tree is None:
            return ""
        why = installs._guard(node, path, tree)
        if why:
            return why
        fn = _enclosing_function(node, installs.parents(path))
        if fn is not None:
            if installs.parents(path).get(fn) is not tree:
                return ""  # a method or a nested def: who runs it is not followed
            why = installs._guard(node, path, fn) or installs._calls_off(path, fn.name, 0)
            return f"in `{fn.name}`, {why}" if why else ""
        up = self.module_off(path, depth + 1)  # at module level: loaded with its module
        return f"from {path}, whose {up}" if up else ""

    def _imports_of(self, module: str) -> list[tuple[str, ast.stmt]]:
        """The import statements of the downstream tree that load ``module``: the lines
        the text index names (:func:`import_lines`), each confirmed in its file's tree."""
        if self._lines is None:
            self._lines = import_lines(self.installs.texts())
        parent, _, last = module.rpartition(".")
        out: list[tuple[str, ast.stmt]] = []
        for p, lines in self._lines.get(last, {}).items():
            tree = self.installs.tree(p)
            if tree is None:
                continue
            here = module_of(p)
            package = here if p.endswith("__init__.py") else here.rpartition(".")[0]
            for node in statements(tree):
                if node.lineno not in lines:
                    continue
                if isinstance(node, ast.Import) and any(
                    a.name == module or a.name.startswith(module + ".") for a in node.names
                ):
                    out.append((p, node))
                elif isinstance(node, ast.ImportFrom):
                    base = _absolute(node, package)
                    if base == module or (
                        base == parent and any(a.name == last for a in node.names)
                    ):
                        out.append((p, node))
        return out


_FROM = re.compile(rb"(?m)^[ \t]*from[ \t]+([.\w]+)[ \t]+import[ \t]*(\([^)]*\)|[^\n]*)")
_IMPORT = re.compile(rb"(?m)^[ \t]*import[ \t]+([^\n]+)")
_WORD = re.compile(rb"[A-Za-z_]\w*")


def import_lines(texts: dict[str, bytes]) -> dict[str, dict[str, set[int]]]:
    """Name -> file -> the lines of import statements that name it, as a module's last
    part or an imported name, read from the text (comments and strings may give a line
    no tree confirms; a statement split with backslashes is missed). One regex pass over
    the texts: parsing every file to find a few imports costs seconds and memory."""
    out: dict[str, dict[str, set[int]]] = {}
    for path, text in texts.items():
        if b"import" not in text:
            continue
        for m in (*_FROM.finditer(text), *_IMPORT.finditer(text)):
            line = text.count(b"\n", 0, m.start()) + 1
            for word in _WORD.findall(m.group(0)):
                name = word.decode()
                if name not in ("from", "import", "as"):
                    out.setdefault(name, {}).setdefault(path, set()).add(line)
    return out
