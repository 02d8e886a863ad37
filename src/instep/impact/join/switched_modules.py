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

A module nobody imports by name (an entry point), a package's ``__init__`` (loaded with
any of its submodules), a module imported in a method or a class body, and one named on a
line beside the word ``import`` outside any import statement (``importlib.import_module``,
``__import__``, a comment: another way of loading it may hide there) are not decided.
The coupling book asks this of a would-be Shim only: the break is real when the switch is
on, so the place is Test (``switch.off_by_default``).
"""

from __future__ import annotations

import ast
import re

from instep.impact.downstream.ast_children import statements
from instep.impact.join.patch_installs import (
    PatchInstalls,
    absolute_module,
    enclosing_function,
)
from instep.pyindex.model import module_of

DEPTH = 3  # how many importing modules up a module loaded only under a switch is followed


class SwitchedPlaces:
    """Answers, memoised, over one :class:`PatchInstalls`."""

    def __init__(self, installs: PatchInstalls) -> None:
        self.installs = installs
        # (module path, depth) -> why: an answer cut short at DEPTH is kept apart from the
        # full one, so the order of the questions never changes an answer
        self._modules: dict[tuple[str, int], str] = {}
        self._visiting: set[str] = set()  # the modules being answered (an import cycle)
        self._lines: dict[str, dict[str, set[int]]] | None = None

    def off_by_default(self, path: str, line: int, owner: str | None) -> str:
        """Why the statement at ``path:line`` (in the def ``owner``) runs only under a
        switch off by default, or ''."""
        return self.installs.off_by_default(path, line, owner) or self.module_off(path)

    def module_off(self, path: str, depth: int = 0) -> str:
        """Why the module ``path`` is loaded only under a switch off by default, or ''."""
        key = (path, depth)
        if key not in self._modules:
            if depth >= DEPTH or path in self._visiting or path.endswith("__init__.py"):
                return ""  # too far up, a cycle, or loaded with any submodule
            self._visiting.add(path)
            try:
                self._modules[key] = self._module_off(path, depth)
            finally:
                self._visiting.discard(path)
        return self._modules[key]

    def _module_off(self, path: str, depth: int) -> str:
        module = module_of(path)
        imports = self._imports_of(module)
        whys = []
        for p, node in imports or ():
            why = self._import_off(p, node, depth)
            if not why:
                return ""
            whys.append(why)
        return f"`{module}` is imported only {whys[0]}" if whys else ""

    def _import_off(self, path: str, node: ast.stmt, depth: int) -> str:
        installs = self.installs
        tree = installs.tree(path)
        if tree is None:
            return ""
        why = installs.guard(node, path, tree)
        if why:
            return why
        fn = enclosing_function(node, installs.parents(path))
        if fn is not None:
            if installs.parents(path).get(fn) is not tree:
                return ""  # a method or a nested def: who runs it is not followed
            why = installs.guard(node, path, fn) or installs.calls_off(path, fn.name, 0)
            return f"in `{fn.name}`, {why}" if why else ""
        up = self.module_off(path, depth + 1)  # at module level: loaded with its module
        return f"from {path}, whose {up}" if up else ""

    def _imports_of(self, module: str) -> list[tuple[str, ast.stmt]] | None:
        """The import statements of the downstream tree that load ``module``, or None when
        a line naming it beside the word ``import`` lies in no import statement (a
        ``importlib.import_module("…")``, ``__import__``, a comment): another way of
        loading it may hide there, so nothing is decided."""
        if self._lines is None:
            self._lines = import_lines(self.installs.texts())
        parent, _, last = module.rpartition(".")
        out: list[tuple[str, ast.stmt]] = []
        for p, lines in self._lines.get(last, {}).items():
            tree = self.installs.tree(p)
            if tree is None:
                return None
            here = module_of(p)
            package = here if p.endswith("__init__.py") else here.rpartition(".")[0]
            covered: set[int] = set()
            for node in statements(tree):
                if not isinstance(node, (ast.Import, ast.ImportFrom)):
                    continue
                covered.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
                if isinstance(node, ast.Import) and any(
                    a.name == module or a.name.startswith(module + ".") for a in node.names
                ):
                    out.append((p, node))
                elif isinstance(node, ast.ImportFrom):
                    base = absolute_module(node, package)
                    if base == module or (
                        base == parent and any(a.name == last for a in node.names)
                    ):
                        out.append((p, node))
            if not lines <= covered:
                return None
        return out


_FROM = re.compile(rb"(?m)^[ \t]*from[ \t]+[.\w]+[ \t]+import[ \t]*\([^)]*\)")
_IMPORTISH = re.compile(rb"(?m)^[^\n]*import[^\n]*")
_WORD = re.compile(rb"[A-Za-z_]\w*")


def import_lines(texts: dict[str, bytes]) -> dict[str, dict[str, set[int]]]:
    """Name -> file -> the lines that hold the word ``import`` (``importlib``,
    ``__import__`` included) and name it, a parenthesised ``from … import (…)`` counted at
    its first line. One regex pass over the texts: parsing every file to find a few
    imports costs seconds and memory. A name split from ``import`` by a line break
    outside parentheses (``importlib.import_module(\\n "x.y")``) is missed."""
    out: dict[str, dict[str, set[int]]] = {}
    for path, text in texts.items():
        if b"import" not in text:
            continue
        found = (*_FROM.finditer(text), *_IMPORTISH.finditer(text))
        matches = sorted(found, key=lambda m: m.start())
        line, at = 1, 0
        for m in matches:
            line += text.count(b"\n", at, m.start())
            at = m.start()
            for word in _WORD.findall(m.group(0)):
                if word not in (b"from", b"import", b"as"):
                    out.setdefault(word.decode(), {}).setdefault(path, set()).add(line)
    return out
