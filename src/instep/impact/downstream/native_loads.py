"""Where the downstream's Python loads its shared objects: the places that make a
missing linked symbol fail, and when.

Python loads an extension module when a statement imports it (``import pkg._C``,
``from pkg import _C``, ``from . import _C``, ``from pkg._C import x``), and any library
when code calls ``torch.ops.load_library(...)``, ``ctypes.CDLL(...)`` (or ``PyDLL``,
``cdll.LoadLibrary``) with a path whose text names it (a string constant ending in its
file name, as ``os.path.join(here, "lib", "libfoo.so")`` does). Each such place is a
:class:`LoadSite`; it runs at import when it sits at module level or in a class body
(also under a module-level ``if``/``try``/``with``), and only when called inside a
function; inside a ``try`` whose handler catches ``OSError``, ``ImportError`` or
broader, the failure is caught there (the module imports, what the library provides
fails later). Both dlopen paths bind every symbol at once (CPython's default dlopen flags and
ctypes both use ``RTLD_NOW``): a missing one fails the load there.

A cheap text pass finds the files whose import lines or calls name one of the
downstream's extension modules or library files; only those are parsed. Nothing is
imported or executed; libraries loaded through a path built at run time from no
constant are not found (the report says the library has no load site).
"""

from __future__ import annotations

import ast
import re
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from instep.pyindex.model import module_of

_IMPORT_LINE = re.compile(
    r"^[ \t]*(?:from[ \t]+(\.*[\w.]*)[ \t]+import[ \t]+(\([^)]*\)|[^\n]*)|import[ \t]+([^\n]*))",
    re.M,
)
_LOAD_CALL = re.compile(r"\b(?:load_library|CDLL|PyDLL|LoadLibrary)\s*\(")
_LOADERS = frozenset({"load_library", "CDLL", "PyDLL", "LoadLibrary"})


@dataclass(frozen=True)
class LoadSite:
    """One Python place that loads a downstream shared object."""

    path: str
    line: int
    snippet: str
    library: str  # the shared object's path in the downstream
    how: str  # 'import' | 'load_library' | 'ctypes'
    at_import: bool  # runs when its module is imported (else when its function runs)
    guarded: bool = False  # inside a try whose handler catches the failed load

    @property
    def at(self) -> str:
        return f"{self.path}:{self.line}"


def extension_module(path: str) -> str | None:
    """The dotted module an extension file is imported as: ``pkg/_C.cpython-311-x86_64-
    linux-gnu.so`` -> ``pkg._C``; ``pkg/_x.so`` -> ``pkg._x``; None for ``libfoo.so.1``."""
    directory, _, name = path.rpartition("/")
    stem, _, suffix = name.partition(".")
    if not stem.isidentifier() or not (suffix == "so" or suffix.endswith(".so")):
        return None
    if suffix != "so" and not suffix.startswith(("cpython-", "abi3", "pypy")):
        return None
    return f"{module_of(directory + '/x.py').rpartition('.')[0]}.{stem}".lstrip(".")


def find_load_sites(
    py_paths: Iterable[str],
    read: Callable[[str], bytes],
    objects: Iterable[str],
) -> list[LoadSite]:
    """The load sites of the downstream shared objects ``objects`` (paths) in the
    Python files ``py_paths``, sorted by path and line."""
    modules: dict[str, str] = {}
    by_file_name: dict[str, str] = {}
    for obj in objects:
        module = extension_module(obj)
        if module:
            modules[module] = obj
        by_file_name.setdefault(obj.rsplit("/", 1)[-1], obj)
    leaves = {m.rsplit(".", 1)[-1] for m in modules}
    tops = {m.split(".", 1)[0] for m in modules}
    sites: list[LoadSite] = []
    for path in py_paths:
        try:
            text = read(path).decode("utf-8", "replace")
        except (OSError, KeyError):
            continue
        lines: set[int] = set()
        if leaves:
            for m in _IMPORT_LINE.finditer(text):
                if _imports_one_of(m, leaves, tops):
                    lines.add(text.count("\n", 0, m.start()) + 1)
        loads = bool(by_file_name) and _LOAD_CALL.search(text) is not None
        if lines or loads:
            sites += _sites_in(path, text, modules, by_file_name)
    return sorted(sites, key=lambda s: (s.path, s.line, s.library))


def _imports_one_of(m: re.Match, leaves: set[str], tops: set[str]) -> bool:
    """The import line names an extension module's last part, and its package (or is a
    relative import): ``from torch._C import x`` does not load ``torch_npu._C``."""
    words = set(re.findall(r"\w+", " ".join(g for g in m.groups() if g)))
    return bool(words & leaves) and (bool(words & tops) or (m.group(1) or "").startswith("."))


def _sites_in(
    path: str, text: str, modules: dict[str, str], by_file_name: dict[str, str]
) -> list[LoadSite]:
    try:
        with warnings.catch_warnings():  # the file's invalid escapes are its own business
            warnings.simplefilter("ignore")
            tree = ast.parse(text, filename=path)
    except (SyntaxError, ValueError):
        return []
    module = module_of(path)
    package = module if path.endswith("__init__.py") else module.rpartition(".")[0]
    lines = text.splitlines()
    assigned = _assigned_libraries(tree, by_file_name)
    out: list[LoadSite] = []

    def site(node: ast.AST, library: str, how: str, at_import: bool, guarded: bool) -> None:
        line = node.lineno  # type: ignore[attr-defined]
        snippet = lines[line - 1].strip() if 0 < line <= len(lines) else ""
        out.append(LoadSite(path, line, snippet, library, how, at_import, guarded))

    def visit(node: ast.AST, at_import: bool, guarded: bool) -> None:
        if isinstance(node, ast.Try):
            catches = any(_catches_load_errors(h) for h in node.handlers)
            for child in node.body:
                visit_one(child, at_import, guarded or catches)
            for part in (node.handlers, node.orelse, node.finalbody):
                for child in part:
                    visit_one(child, at_import, guarded)
            return
        for child in ast.iter_child_nodes(node):
            visit_one(child, at_import, guarded)

    def visit_one(child: ast.AST, at_import: bool, guarded: bool) -> None:
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            visit(child, False, False)
            return
        if isinstance(child, ast.Import):
            for alias in child.names:
                for name in _prefixes(alias.name):
                    if name in modules:
                        site(child, modules[name], "import", at_import, guarded)
        elif isinstance(child, ast.ImportFrom):
            base = _absolute(child, package)
            if base is not None:
                names = [base] + [f"{base}.{a.name}" if base else a.name for a in child.names]
                for name in sorted({n for b in names for n in _prefixes(b)}):
                    if name in modules:
                        site(child, modules[name], "import", at_import, guarded)
        elif isinstance(child, ast.Call) and _callee(child.func) in _LOADERS:
            how = "load_library" if _callee(child.func) == "load_library" else "ctypes"
            for library in sorted(_named_libraries(child, by_file_name, assigned)):
                site(child, library, how, at_import, guarded)
        visit(child, at_import, guarded)

    visit(tree, True, False)
    return out


def _assigned_libraries(tree: ast.AST, by_file_name: dict[str, str]) -> dict[str, set[str]]:
    """Names bound to a path that names a library file: ``so = os.path.join(d, "libx.so")``."""
    assigned: dict[str, set[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
            libs = _named_libraries(node.value, by_file_name, {})
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if libs and isinstance(target, ast.Name):
                    assigned.setdefault(target.id, set()).update(libs)
    return assigned


def _named_libraries(
    node: ast.AST, by_file_name: dict[str, str], assigned: dict[str, set[str]]
) -> set[str]:
    """The downstream libraries whose file name a string constant under ``node`` ends
    with, or that a name under it was assigned."""
    found: set[str] = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            file_name = sub.value.replace("\\", "/").rsplit("/", 1)[-1]
            if file_name in by_file_name:
                found.add(by_file_name[file_name])
        elif isinstance(sub, ast.Name) and sub.id in assigned:
            found |= assigned[sub.id]
    return found


_LOAD_ERRORS = frozenset(
    {"OSError", "ImportError", "Exception", "BaseException", "EnvironmentError"}
)


def _catches_load_errors(handler: ast.ExceptHandler) -> bool:
    """A handler that catches a failed load (``OSError`` from ``ctypes``/``load_library``,
    ``ImportError`` from an import, or anything broader)."""
    if handler.type is None:
        return True
    kinds = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(_callee(k) in _LOAD_ERRORS for k in kinds)


def _prefixes(dotted: str) -> list[str]:
    """``a.b.c`` -> ``a``, ``a.b``, ``a.b.c`` (importing ``a.b.c`` imports each)."""
    parts = dotted.split(".")
    return [".".join(parts[: i + 1]) for i in range(len(parts))]


def _absolute(node: ast.ImportFrom, package: str) -> str | None:
    if not node.level:
        return node.module or ""
    parts = package.split(".") if package else []
    if node.level - 1 > len(parts):
        return None
    base = parts[: len(parts) - (node.level - 1)]
    if node.module:
        base.append(node.module)
    return ".".join(base)


def _callee(func: ast.AST) -> str:
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return ""
