"""Which tests ``instep run --impact REPORT`` runs: the tests an impact report suggests for
its most urgent units, narrowed to the test functions that name a changed symbol.

For each selected unit (by action, then risk, then number of couplings; ``--top N``),
the tests the report suggests (``suggested_tests``, docs/impact.md "Suggested tests"):
- ``opinfo:NAME`` (``opinfo:NAME:grad``): the OpInfo cases of an operator. They run in
  instep's L5 suite, narrowed to those operators (``--instep-opinfo-ops``); with
  ``--upstream-tests DIR`` holding upstream's ``test/inductor/test_torchinductor_opinfo.py``,
  its ``test_comprehensive_NAME_*`` cases instead;
- ``instep:...``: a case of instep's own suites, run as that node id;
- upstream test files or functions (``path::Class::test_x``: the file, narrowed to the
  function) and downstream test files, found under the working directory, the report's
  downstream source, or ``--upstream-tests DIR``;
- with ``--upstream-tests DIR`` (a PyTorch checkout), also the upstream test modules
  under it that import a changed module (read statically, as the report reads
  downstream tests).
A test file whose test functions name a changed symbol is narrowed to those functions;
the others run whole. The narrowing is one ``-k`` expression (pytest matches it against
test names and their module names), so it can select a few more cases than asked, never
fewer. Nothing here runs anything: the runner gets paths, a ``-k``, the suites' options
and, per file, the units that chose it (stored with the run). The report comes as the
impact contract's typed records (``instep.impact_contract``), never from the impact engine.
"""

from __future__ import annotations

import ast
import os
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from instep.impact_contract import Action, ImpactDocument, Unit, unit_priority
from instep.pyindex.model import module_of
from instep.pyindex.test_imports import imported_names
from instep.suites.opinfo.harness import GRAD_SUFFIX
from instep.suites.tiers import BUILTIN_PREFIX, builtin_path

OPINFO_PREFIX = "opinfo:"  # what the impact report's OpInfo suggestions start with
L5_SUITE = "instep:opinfo/test_l5_opinfo.py"
UPSTREAM_OPINFO = "test/inductor/test_torchinductor_opinfo.py"

#: changed names too common to narrow a test file by (they name nothing in particular)
_GENERIC = frozenset({"__init__", "__call__", "forward", "run", "call", "main", "setup"})
_MIN_NAME = 4


@dataclass
class ImpactSelection:
    paths: list[str] = field(default_factory=list)  # test files, as the runner takes them
    keyword: str | None = None  # a -k expression narrowing them, None: whole files
    units_of: dict[str, list[str]] = field(default_factory=dict)  # test file -> unit ids
    notes: list[str] = field(default_factory=list)  # units without a runnable test, and why
    pytest_args: list[str] = field(default_factory=list)  # the suites' options (L5 ops)
    opinfo_ops: list[str] = field(default_factory=list)  # OpInfo names (``name:grad``)

    def as_setting(self, report: str) -> dict[str, Any]:
        """What the run stores about its selection (``settings.impact``)."""
        return {
            "report": report,
            "units_of": self.units_of,
            "keyword": self.keyword,
            "opinfo_ops": self.opinfo_ops,
        }


def select_tests(
    doc: ImpactDocument,
    actions: tuple[Action, ...] = (Action.SHIM, Action.TEST),
    top: int | None = None,
    upstream_tests: Path | None = None,
    cwd: Path | None = None,
) -> ImpactSelection:
    """The tests for the units of ``doc`` (an impact report) with one of ``actions``."""
    cwd = Path(cwd or os.getcwd())
    units = sorted((u for u in doc.units if u.action in actions), key=unit_priority)
    if top is not None:
        units = units[:top]
    roots = [cwd]
    source = doc.downstream.source
    if source and Path(source).is_dir():
        roots.append(Path(source))
    if upstream_tests is not None:
        roots.append(upstream_tests)
    importing = _TestImports(upstream_tests) if upstream_tests is not None else None
    upstream_opinfo = (
        upstream_tests / UPSTREAM_OPINFO
        if upstream_tests is not None and (upstream_tests / UPSTREAM_OPINFO).is_file()
        else None
    )
    chosen: dict[str, list[str]] = defaultdict(list)
    names: dict[str, set[str]] = defaultdict(set)
    exact: dict[str, set[str]] = defaultdict(set)  # file -> the test names it runs
    whole: set[str] = set()  # files that run whole whatever -k narrows (instep's suites)
    ops: dict[str, None] = {}
    out = ImpactSelection()
    for unit in units:
        uid = unit.id
        files: list[str | None] = []
        functions: dict[str, set[str]] = defaultdict(set)
        for test in unit.suggested_tests:
            if test.startswith(OPINFO_PREFIX):
                op = test[len(OPINFO_PREFIX) :]
                if upstream_opinfo is not None:
                    path = _shown(upstream_opinfo, cwd)
                    files.append(path)
                    functions[path].add(_comprehensive(op))
                else:
                    ops[op] = None
                    files.append(builtin_path(L5_SUITE))
                    whole.add(builtin_path(L5_SUITE))
            elif test.startswith(BUILTIN_PREFIX):
                files.append(builtin_path(test))
                whole.add(builtin_path(test))
            else:
                path, _, node = test.partition("::")
                found = _find(path, roots, cwd)
                files.append(found)
                if found is not None and node:
                    functions[found].add(node.rsplit("::", 1)[-1])
        if importing is not None:
            files += importing.of_modules(_changed_modules(unit), cwd)
        kept = [f for f in dict.fromkeys(files) if f is not None]
        if not kept:
            why = "the report suggests none" if not unit.suggested_tests else "not found"
            out.notes.append(f"{uid} [{unit.action}]: no test to run ({why})")
            continue
        for f in kept:
            chosen[f].append(uid)
            if f in functions:
                exact[f] |= functions[f]
            else:
                names[f] |= _changed_names(unit)
    out.units_of = {f: list(dict.fromkeys(u)) for f, u in chosen.items()}
    out.paths = list(out.units_of)
    out.keyword = _keyword(out.paths, names, cwd, whole, exact)
    out.opinfo_ops = _merged_ops(list(ops))
    if out.opinfo_ops:
        out.pytest_args = [f"--instep-opinfo-ops={','.join(out.opinfo_ops)}"]
    return out


def _merged_ops(ops: list[str]) -> list[str]:
    """One entry per OpInfo name: ``name:grad`` when any suggestion wants gradients."""
    grad = {o.removesuffix(GRAD_SUFFIX) for o in ops if o.endswith(GRAD_SUFFIX)}
    names = dict.fromkeys(o.removesuffix(GRAD_SUFFIX) for o in ops)
    return [f"{n}{GRAD_SUFFIX}" if n in grad else n for n in names]


def _comprehensive(op: str) -> str:
    """Upstream's Inductor OpInfo test of an OpInfo name: ``test_comprehensive_NAME_``
    (then the device and dtype), the variant joined by ``_``, dots made ``_``."""
    name = op.removesuffix(GRAD_SUFFIX)
    return f"test_comprehensive_{name.replace('.', '_')}_"


def _find(test: str, roots: list[Path], cwd: Path) -> str | None:
    for root in roots:
        path = root / test
        if path.is_file():
            return _shown(path, cwd)
    return None


def _shown(path: Path, cwd: Path) -> str:
    try:
        return path.resolve().relative_to(cwd.resolve()).as_posix()
    except ValueError:
        return str(path.resolve())


def _changed_modules(unit: Unit) -> set[str]:
    out = set()
    for change in unit.changes:
        path = change.symbol.partition("::")[0]
        if path.endswith(".py"):
            out.add(module_of(path))
    return out


def _changed_names(unit: Unit) -> set[str]:
    out = set()
    for change in unit.changes:
        qualname = change.symbol.partition("::")[2]
        for part in qualname.split("."):
            if len(part) >= _MIN_NAME and part not in _GENERIC:
                out.add(part)
    return out


def _keyword(
    paths: list[str],
    names: dict[str, set[str]],
    cwd: Path,
    whole: set[str] | None = None,
    exact: dict[str, set[str]] | None = None,
) -> str | None:
    """One -k: the narrowed files' test functions (those ``exact`` names, else those naming
    a changed symbol), instep's suites and the other files by module name."""
    terms: list[str] = []
    narrowed = False
    whole, exact = whole or set(), exact or {}
    for path in paths:
        file = path.partition("::")[0]
        if exact.get(path):
            functions = sorted(exact[path])
        elif path in whole:
            functions = []
        else:
            functions = _functions_naming(cwd / file, names[path])
        if functions:
            narrowed = True
            terms += functions
        else:
            terms.append(Path(file).stem)
    if not narrowed:
        return None
    return " or ".join(dict.fromkeys(terms))


def _functions_naming(path: Path, wanted: set[str]) -> list[str]:
    """Test functions (and methods) of ``path`` whose code names one of ``wanted``."""
    if not wanted:
        return []
    try:
        tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, SyntaxError, ValueError):
        return []
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith(
            "test"
        ):
            used = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
            used |= {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)}
            if used & wanted:
                found.append(node.name)
    return sorted(set(found))


class _TestImports:
    """The test modules under a directory, by the dotted names they import (read once)."""

    def __init__(self, root: Path) -> None:
        self.by_name: dict[str, set[Path]] = defaultdict(set)
        for path in sorted(root.rglob("test_*.py")):
            try:
                text = path.read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            for name in imported_names(text):
                self.by_name[name].add(path)

    def of_modules(self, modules: set[str], cwd: Path) -> list[str]:
        hits: set[Path] = set()
        for module in modules:  # `from m import x` and `import m` both give m
            hits |= self.by_name.get(module, set())
        return [_shown(p, cwd) for p in sorted(hits)]
