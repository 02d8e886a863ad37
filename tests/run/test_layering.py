"""The runner does not know triage: ``instep.run`` imports nothing from ``instep.triage``
(the classifier is injected), at module level or inside a function."""

from __future__ import annotations

import ast
from pathlib import Path

import instep

RUN_DIR = Path(instep.__file__).parent / "run"


def _imported_modules(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def test_run_imports_nothing_from_triage() -> None:
    offenders = {
        f"{path.name}: {module}"
        for path in RUN_DIR.rglob("*.py")
        for module in _imported_modules(path)
        if module == "instep.triage" or module.startswith("instep.triage.")
    }
    assert not offenders, sorted(offenders)
