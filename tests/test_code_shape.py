"""The shape of the source, read statically (nothing of it is imported for these checks):

* no import cycle anywhere in ``src/instep`` (so none inside any package): the import graph
  is grimp's (it parses the files; function-local and ``TYPE_CHECKING`` imports count);
* every function-local import carries a one-line reason comment naming one of the reasons
  docs/architecture.md allows;
* ``impact/``: no module over 600 lines, no function over 60 (issue #32).
"""

from __future__ import annotations

import ast
from pathlib import Path

import grimp

import instep

PACKAGE = Path(instep.__file__).parent
IMPACT = PACKAGE / "impact"
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 60

# The reasons docs/architecture.md ("Function-local imports") allows, by the words a reason
# comment must use: torch stays out of instep's process; optional dependencies (Ray, ctypes)
# and alembic load only where needed; SQLAlchemy stays off the paths without a store; the
# CLI starts fast. A cycle is no reason: it is fixed.
REASON_WORDS = ("torch", "optional dependency", "alembic", "SQLAlchemy", "CLI start")


def _sources() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def import_cycles(package: str) -> set[str]:
    """Every cycle of imports among the modules of ``package``, one chain per direct import
    that starts one (``a -> b -> a``)."""
    graph = grimp.build_graph(
        package,
        include_external_packages=False,
        exclude_type_checking_imports=False,
        cache_dir=None,
    )
    cycles = set()
    for importer in sorted(graph.modules):
        for imported in graph.find_modules_directly_imported_by(importer):
            back = graph.find_shortest_chain(importer=imported, imported=importer)
            if back is not None:
                cycles.add(" -> ".join((importer, *back)))
    return cycles


def test_no_import_cycle() -> None:
    assert not import_cycles("instep"), sorted(import_cycles("instep"))


def test_a_cycle_through_a_type_checking_import_is_found(tmp_path: Path, monkeypatch) -> None:
    pkg = tmp_path / "cyclic_pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "records.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from cyclic_pkg.sub.scope import S\n"
    )
    (pkg / "sub" / "scope.py").write_text("def f():\n    from cyclic_pkg.sub.records import R\n")
    (pkg / "flat.py").write_text("import cyclic_pkg.sub.scope\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert import_cycles("cyclic_pkg") == {
        "cyclic_pkg.sub.records -> cyclic_pkg.sub.scope -> cyclic_pkg.sub.records",
        "cyclic_pkg.sub.scope -> cyclic_pkg.sub.records -> cyclic_pkg.sub.scope",
    }


def _local_imports(tree: ast.Module):
    """(import statement, the statements of its block) for every import inside a def."""
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(fn):
            for field in ("body", "orelse", "finalbody", "handlers"):
                block = getattr(node, field, None)
                if not isinstance(block, list):
                    continue
                for stmt in block:
                    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                        yield stmt, block


def _has_reason(stmt: ast.stmt, block: list[ast.stmt], lines: list[str]) -> str | None:
    """The reason comment of a local import: trailing on its line, or on the line above the
    first of the imports it stands with (consecutive imports of one block, blank lines
    between them allowed); None when there is none."""
    line = lines[stmt.lineno - 1]
    if "#" in line:
        return line.split("#", 1)[1].strip()
    first = stmt
    k = block.index(stmt)
    while k > 0 and isinstance(block[k - 1], (ast.Import, ast.ImportFrom)):
        k -= 1
        first = block[k]
    above = lines[first.lineno - 2].strip() if first.lineno > 1 else ""
    return above.lstrip("#").strip() if above.startswith("#") else None


def test_every_function_local_import_names_its_reason() -> None:
    missing, unknown = [], []
    seen: set[tuple[Path, int]] = set()
    for path in _sources():
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()
        for stmt, block in _local_imports(ast.parse(text)):
            if (path, stmt.lineno) in seen:
                continue  # a def inside a def: walked twice
            seen.add((path, stmt.lineno))
            where = f"{path.relative_to(PACKAGE)}:{stmt.lineno}"
            reason = _has_reason(stmt, block, lines)
            if reason is None:
                missing.append(where)
            elif not any(word in reason for word in REASON_WORDS):
                unknown.append(f"{where}: {reason}")
    assert not missing, f"function-local imports without a reason comment: {missing}"
    assert not unknown, f"reasons docs/architecture.md does not allow: {unknown}"


def test_impact_modules_stay_under_600_lines() -> None:
    long = {
        str(p.relative_to(PACKAGE)): n
        for p in sorted(IMPACT.rglob("*.py"))
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert not long, long


def test_impact_functions_stay_under_60_lines() -> None:
    long = {}
    for path in sorted(IMPACT.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                length = (node.end_lineno or node.lineno) - start + 1
                if length > MAX_FUNCTION_LINES:
                    long[f"{path.relative_to(PACKAGE)}:{node.lineno} {node.name}"] = length
    assert not long, long


def test_the_checks_see_what_they_check(tmp_path: Path) -> None:
    """The local-import check finds an import without a reason and accepts one with."""
    text = (
        "def f():\n"
        "    import json\n"
        "\n"
        "def g():\n"
        "    # CLI start: loads on use\n"
        "    import json\n"
        "\n"
        "    import csv\n"
        "    x = 1\n"
        "    import re  # optional dependency: pretend\n"
    )
    lines = text.splitlines()
    found = {s.lineno: _has_reason(s, b, lines) for s, b in _local_imports(ast.parse(text))}
    assert found == {
        2: None,
        6: "CLI start: loads on use",
        8: "CLI start: loads on use",
        10: "optional dependency: pretend",
    }
