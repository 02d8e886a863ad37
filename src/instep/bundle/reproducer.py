"""The minimal reproducer of a case: its pytest command line, and for cases instep
generates (the L1 smoke triad, the L5 OpInfo harness) a standalone script.

The pytest command is what the run executed for that one node id: the run's working
directory, the case file resolved to a path that exists on this host, ``-p
no:cacheprovider`` and the run's extra pytest arguments (``--instep-device=...``). The
standalone script needs torch (and the backend package) but neither instep nor pytest:
it is written from the suite's own source, read with ``ast`` (the suite module without
its test functions and instep imports, plus the triad and, for OpInfo, the harness), so
it checks exactly what the suite checks: eager CPU, eager device, compiled device. A
script prints each leg's state and exits non-zero when the case fails.
Nothing here runs the reproducer (``debug_rerun.py`` does).
"""

from __future__ import annotations

import ast
import json
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from instep.suites.opinfo.harness import harness_data
from instep.suites.tiers import SUITES_DIR

OPINFO_SUFFIX = "suites/opinfo/test_l5_opinfo.py"
SMOKE_SUFFIX = "suites/smoke/test_l1_smoke.py"
_TRIAD = SUITES_DIR / "triad.py"
_HARNESS = SUITES_DIR / "opinfo" / "harness.py"
#: Functions of harness.py a script does not need (enumeration reads the whole op_db).
_HARNESS_DROP = {"enumerate_cases", "_enumerate_here", "_ENUMERATE_CHILD", "DATA", "harness_data"}


@dataclass(frozen=True)
class SuiteArgs:
    """The built-in suites' options a run passed (``--instep-device=npu`` ...)."""

    device: str
    backend: str
    backend_package: str = ""
    all_samples: bool = False
    grad: bool = False


@dataclass(frozen=True)
class Script:
    name: str  # file name in the bundle
    source: str
    kind: str  # "opinfo" or "smoke"


def case_file(nodeid: str, settings: dict[str, Any]) -> Path | None:
    """The case's file on this host: relative to the run's cwd or one of its paths' roots."""
    rel = nodeid.split("::", 1)[0]
    path = Path(rel)
    if path.is_absolute():
        return path if path.is_file() else None
    cwd = Path(settings.get("cwd") or ".")
    candidates = [cwd / path]
    for entry in settings.get("paths") or []:
        base = Path(str(entry).split("::", 1)[0])
        base = base if base.is_absolute() else cwd / base
        candidates += [parent / path for parent in base.parents]
    for suffix in (OPINFO_SUFFIX, SMOKE_SUFFIX):
        if rel.replace("\\", "/").endswith(suffix):
            candidates.append(SUITES_DIR.parent / suffix.removeprefix("suites/"))
            candidates.append(SUITES_DIR / suffix.removeprefix("suites/"))
    for candidate in candidates:
        if candidate.is_file():
            return candidate.resolve()
    return None


def runnable_nodeid(nodeid: str, settings: dict[str, Any]) -> str:
    """``nodeid`` with its file part made absolute when the file exists on this host."""
    found = case_file(nodeid, settings)
    if found is None:
        return nodeid
    _, sep, rest = nodeid.partition("::")
    return f"{found}{sep}{rest}"


def pytest_argv(nodeid: str, settings: dict[str, Any], python: str = "python") -> list[str]:
    """The command that runs this one case as the run did (without instep's isolation)."""
    return [
        python,
        "-m",
        "pytest",
        runnable_nodeid(nodeid, settings),
        "-p",
        "no:cacheprovider",
        *[str(a) for a in settings.get("pytest_args") or []],
    ]


def shell_line(argv: list[str], cwd: str | None = None, env: dict[str, str] | None = None) -> str:
    """A copy-pastable shell line: ``cd DIR && NAME=value ... argv``."""
    parts = []
    if cwd:
        parts.append(f"cd {shlex.quote(cwd)} &&")
    parts += [f"{k}={shlex.quote(v)}" for k, v in sorted((env or {}).items())]
    parts += [shlex.quote(a) for a in argv]
    return " ".join(parts)


def suite_args(settings: dict[str, Any], device: str, backend: str) -> SuiteArgs:
    """The ``--instep-*`` options of the run's pytest arguments, else the profile's values."""
    found: dict[str, str] = {}
    args = [str(a) for a in settings.get("pytest_args") or []]
    for i, arg in enumerate(args):
        if not arg.startswith("--instep-"):
            continue
        name, eq, value = arg.partition("=")
        if not eq:
            value = args[i + 1] if i + 1 < len(args) and not args[i + 1].startswith("-") else "1"
        found[name] = value
    flag = lambda v: str(v).strip().lower() in ("1", "true", "yes", "on")  # noqa: E731
    return SuiteArgs(
        device=found.get("--instep-device", device),
        backend=found.get("--instep-backend", backend),
        backend_package=found.get("--instep-backend-package", ""),
        all_samples=flag(found.get("--instep-all-samples", "0")),
        grad=flag(found.get("--instep-grad", "0")),
    )


def standalone_script(nodeid: str, args: SuiteArgs) -> Script | None:
    """A script that reproduces a generated case without instep; None for other cases."""
    file, _, test = nodeid.partition("::")
    file = file.replace("\\", "/")
    name, _, param = test.partition("[")
    param = param[:-1] if param.endswith("]") else param
    if file.endswith(OPINFO_SUFFIX) and name == "test_opinfo" and param:
        return _opinfo_script(nodeid, param, args)
    if file.endswith(SMOKE_SUFFIX):
        return _smoke_script(nodeid, name, param, args)
    return None


# -- script assembly -------------------------------------------------------------------------


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in text)[:80]


def _header(nodeid: str, args: SuiteArgs, what: str) -> str:
    backend_import = (
        f"import {args.backend_package}  # noqa: F401  (registers the device)\n"
        if args.backend_package
        else ""
    )
    doc = (
        f'"""Standalone reproducer of {nodeid}\n\n{what}\n'
        "Needs torch (and the backend package), not instep or pytest. Prints the state of\n"
        "each leg (eager_cpu, eager_device, compiled_device: ok / fail / mismatch) and\n"
        'exits 1 when the case fails. Written by `instep bundle`.\n"""\n'
    )
    return (
        doc
        + "\nfrom __future__ import annotations\n\n"
        + "import torch\n"
        + backend_import
        + f"\nDEVICE = {args.device!r}\nBACKEND = {args.backend!r}\n"
    )


def _module_code(path: Path, drop: set[str] = frozenset(), keep_test: str | None = None) -> str:  # type: ignore[assignment]
    """``path``'s top-level code without instep/pytest/__future__ imports, the names in
    ``drop`` and test functions (except ``keep_test``, whose decorators are left out)."""
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
    tree = ast.parse(source)
    out: list[str] = []
    for index, node in enumerate(tree.body):
        if index == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # the module docstring
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            modules = (
                [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module]
            )
            if any(
                m and (m == "__future__" or m == "pytest" or m.split(".")[0] == "instep")
                for m in modules
            ):
                continue
        names = _defined_names(node)
        if names & drop:
            continue
        start = node.lineno
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith(
            "test_"
        ):
            if node.name != keep_test:
                continue
        elif (
            isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            and node.decorator_list
        ):
            start = min(d.lineno for d in node.decorator_list)  # the "@" lines
        out.append("\n".join(lines[start - 1 : node.end_lineno]))
    return "\n\n\n".join(out) + "\n"


def _defined_names(node: ast.stmt) -> set[str]:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    if isinstance(node, ast.Assign):
        return {t.id for t in node.targets if isinstance(t, ast.Name)}
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return {node.target.id}
    return set()


_LEG_RECORDER = '''
LEG_STATES: dict[str, str] = {}


def record_leg(leg: str, state: str) -> None:
    """Print each leg's state as it is known (instep stores it with the outcome)."""
    LEG_STATES[leg] = state
    print(f"{leg}: {state}", flush=True)
'''

_MAIN = """

def main() -> int:
    try:
        {call}
    except Exception:
        import traceback

        traceback.print_exc()
        print("FAILED:", {nodeid!r})
        return 1
    print("PASSED:", {nodeid!r})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
"""


def _opinfo_script(nodeid: str, case_id: str, args: SuiteArgs) -> Script:
    op_name, _, dtype = case_id.rpartition("-")
    data = json.dumps(harness_data(), indent=4, sort_keys=True)
    what = (
        f"OpInfo case: op {op_name!r}, dtype {dtype}, "
        f"{'every sample' if args.all_samples else 'the first sample'}"
        f"{', with backward' if args.grad else ''}; the sample is built on the CPU with\n"
        "torch.manual_seed(0) from the installed torch's op_db, as instep's L5 harness does.\n"
    )
    call = (
        f"checked = run_case(OpCase({op_name!r}, {dtype!r}), DEVICE, BACKEND, "
        f"all_samples={args.all_samples}, grad={args.grad})\n"
        '        print(f"{checked} sample(s) checked")'
    )
    source = (
        _header(nodeid, args, what)
        + _LEG_RECORDER
        + "\n\n# -- the triad (instep.suites.triad) --\n\n"
        + _module_code(_TRIAD)
        + "\n\n# -- the L5 harness (instep.suites.opinfo.harness) --\n\n"
        + f"_HARNESS_DATA = {data}\n\n\n"
        + "def harness_data():\n    return _HARNESS_DATA\n\n\n"
        + _module_code(_HARNESS, drop=_HARNESS_DROP)
        + _MAIN.format(call=call, nodeid=nodeid)
    )
    return Script(f"repro_opinfo_{_slug(case_id)}.py", source, "opinfo")


def _smoke_script(nodeid: str, test: str, param: str, args: SuiteArgs) -> Script | None:
    path = SUITES_DIR / "smoke" / "test_l1_smoke.py"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    func = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == test), None)
    if func is None:
        return None
    values = {"device": "DEVICE", "backend": "BACKEND"}
    call_args = []
    for arg in func.args.args:
        if arg.arg in values:
            call_args.append(f"{arg.arg}={values[arg.arg]}")
        elif param and arg.arg == "name":
            call_args.append(f"name={param!r}")
        else:
            return None  # a fixture the script cannot provide
    what = f"L1 smoke case {test}{f'[{param}]' if param else ''}: the suite's triad.\n"
    call = f"{test}({', '.join(call_args)})"
    source = (
        _header(nodeid, args, what)
        + _LEG_RECORDER
        + "\n\n# -- the triad (instep.suites.triad) --\n\n"
        + _module_code(_TRIAD)
        + "\n\n# -- the L1 smoke suite (instep.suites.smoke.test_l1_smoke) --\n\n"
        + _module_code(path, keep_test=test)
        + _MAIN.format(call=call, nodeid=nodeid)
    )
    return Script(f"repro_smoke_{_slug(test + ('_' + param if param else ''))}.py", source, "smoke")
