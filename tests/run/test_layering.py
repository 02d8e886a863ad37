"""The layers that meet through data, checked on every import at module level or inside a
function: the runner does not know triage (``instep.run`` imports nothing from
``instep.triage``; the classifier is injected), and the engines meet only through the impact
contract (``instep.impact_contract`` imports no engine; ``triage`` and ``suites`` read the
impact report through it, never through ``instep.impact``)."""

from __future__ import annotations

import ast
from pathlib import Path

import instep

PACKAGE = Path(instep.__file__).parent
RUN_DIR = PACKAGE / "run"
ENGINES = ("instep.impact", "instep.triage", "instep.suites", "instep.run", "instep.report")
ENGINES += ("instep.bundle", "instep.doctor", "instep.cli")


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


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_the_impact_contract_imports_no_engine() -> None:
    imported = _imported_modules(PACKAGE / "impact_contract.py")
    assert imported, "the check reads the module"
    offenders = sorted(m for m in imported for engine in ENGINES if _within(m, engine))
    assert not offenders, offenders


def test_triage_and_suites_read_the_impact_report_only_through_the_contract() -> None:
    offenders = {
        f"{path.relative_to(PACKAGE)}: {module}"
        for package in ("triage", "suites")
        for path in (PACKAGE / package).rglob("*.py")
        for module in _imported_modules(path)
        if _within(module, "instep.impact")
    }
    assert not offenders, sorted(offenders)
