"""Does the downstream run Inductor at all? A package-level reading of its sources.

A dynamo backend whose compiler is its own pass over AOTAutograd's graph (torch-ttnn)
names ops in its own tables; Inductor's lowerings, fallbacks and decomposition table meet
those ops only inside Inductor, which such a backend never runs. The downstream runs
Inductor when one of its Python files (tests included, when the tree has them):

- imports a module of ``torch._inductor`` or a name from one, or writes an attribute
  chain ``torch._inductor.<m>``, where ``<m>`` is not one of :data:`HELPER_MODULES`
  (``torch._inductor.decomposition``: its ``select_decomp_table`` / ``decompositions`` are
  used by backends that hand them to AOTAutograd without running Inductor). That covers
  ``compile_fx``, ``compile_fx_inner``, ``register_lowering``, ``make_fallback``,
  ``register_backend_for_device`` and Inductor's config;
- calls ``torch.compile`` without ``backend=`` (Inductor is the default) or any callable
  with ``backend="inductor"``, or ``….optimize("inductor")``.

:func:`find_inductor_use` reports the first such place (its evidence), or that there is
none, with the helper modules the downstream does use and how many files it read.
Static only: nothing is imported. This module decides no verdict (``join/facts.py``).
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from instep.pyindex.parsed_files import ParsedFiles
from instep.pyindex.registrations import dotted_name

INDUCTOR = "torch._inductor"
# modules of torch._inductor a backend may use without running Inductor
HELPER_MODULES = frozenset({"torch._inductor.decomposition"})
_HINTS = ("_inductor", "inductor", "compile(")


@dataclass(frozen=True)
class InductorUse:
    """Whether the downstream runs Inductor, and what says so."""

    runs: bool
    evidence: str  # runs: the first place (path:line: what); else what was checked
    helpers: frozenset[str] = frozenset()  # HELPER_MODULES the downstream imports
    files: int = 0  # Python files read

    def only_inductor(self, upstream_path: str) -> bool:
        """Is an upstream file (``torch/_inductor/lowering.py``) consulted only by Inductor
        for this downstream: under ``torch/_inductor/``, not a helper module it uses?"""
        if self.runs or not upstream_path.startswith("torch/_inductor/"):
            return False
        module = upstream_path.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
        return module not in self.helpers


def _inductor_module(dotted: str) -> str | None:
    """``torch._inductor.lowering.x`` -> ``torch._inductor.lowering``; None outside."""
    if dotted != INDUCTOR and not dotted.startswith(INDUCTOR + "."):
        return None
    parts = dotted.split(".")
    return ".".join(parts[:3])


def _is_inductor_str(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and node.value == "inductor"


def _use_in(tree: ast.Module) -> tuple[int, str] | tuple[None, set[str]]:
    """(line, what) of the first place that runs Inductor, or (None, helper modules used)."""
    helpers: set[str] = set()

    def module_use(dotted: str) -> str | None:
        m = _inductor_module(dotted)
        if m is None:
            return None
        if m in HELPER_MODULES:
            helpers.add(m)
            return None
        return m if m != INDUCTOR else dotted

    for node in ast.walk(tree):
        what = None
        if isinstance(node, ast.Import):
            for a in node.names:
                if module_use(a.name) is not None:
                    what = f"import {a.name}"
                    break
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            for a in node.names:
                if module_use(f"{node.module}.{a.name}") is not None:
                    what = f"from {node.module} import {a.name}"
                    break
        elif isinstance(node, ast.Attribute):
            chain = dotted_name(node)
            if chain is not None and chain.count(".") == 2 and module_use(chain) is not None:
                what = chain
        elif isinstance(node, ast.Call):
            func = dotted_name(node.func) or ""
            kws = {k.arg: k.value for k in node.keywords if k.arg}
            if func == "torch.compile" and "backend" not in kws:
                what = "torch.compile without backend= (Inductor is the default)"
            elif _is_inductor_str(kws.get("backend")):
                what = f'{func or "a call"}(backend="inductor")'
            elif func.endswith("optimize") and node.args and _is_inductor_str(node.args[0]):
                what = f'{func}("inductor")'
        if what is not None:
            return node.lineno, what  # type: ignore[attr-defined]
    return None, helpers


def find_inductor_use(
    paths: Iterable[str], read: Callable[[str], bytes], trees: ParsedFiles | None = None
) -> InductorUse:
    """Read the downstream's Python files; the first that runs Inductor says so.
    ``trees``: the downstream's shared trees over ``read`` (else each file is parsed here)."""
    helpers: set[str] = set()
    files = 0
    for path in sorted(p for p in paths if p.endswith(".py")):
        files += 1
        data = read(path)
        text = data.decode("utf-8", "replace")
        if not any(h in text for h in _HINTS):
            continue
        if trees is not None:
            tree = trees.tree_of_bytes(path)
            if tree is None:
                continue
        else:
            try:
                tree = ast.parse(data)
            except (SyntaxError, ValueError, RecursionError):
                continue
        line, got = _use_in(tree)
        if line is not None:
            return InductorUse(True, f"{path}:{line}: {got}", files=files)
        helpers |= got  # type: ignore[operator]
    used = f"; it uses only {', '.join(sorted(helpers))}" if helpers else ""
    return InductorUse(
        False,
        f"none of its {files} Python files imports from torch._inductor (beyond "
        f"{', '.join(sorted(HELPER_MODULES))}), calls torch.compile without a backend or "
        f'passes backend="inductor"{used}',
        frozenset(helpers),
        files,
    )
