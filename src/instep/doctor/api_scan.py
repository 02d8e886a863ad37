"""Static scan of test sources for torch internals the *installed* torch lacks (seed 000 6.1).

:func:`scan_test_sources` parses test files (never imports them) and collects every
reference into torch's private modules: ``from torch._x.y import name``,
``import torch._x.y as z``, attribute chains such as
``torch._inductor.codecache.cpp_prefix_path`` or ``config.some_key`` (where ``config`` is
bound to ``torch._inductor.config``), ``patch("torch._x.y.name")`` targets and the keys of
``config.patch(key=...)`` on Inductor/Dynamo config modules. Each one is checked against
the installed torch *without importing it*: :class:`InstalledTorch` finds the package with
``importlib.util.find_spec("torch")`` (top level only, which does not run
``torch/__init__``) and reads module sources through the upstream symbol index
(:func:`instep.pyindex.symbols.index_tree`), following re-exports through its imports.

A name is ``missing`` only when the module that should hold it is fully known; a module
with a star import of a compiled extension, a module-level ``__getattr__`` or writes to
``globals()`` makes it ``unverifiable``. Attributes of values (not modules or classes) are
not followed. This module does not execute any code it reads and does not render output.
"""

from __future__ import annotations

import ast
import importlib.util
import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from instep.errors import MissingDependency, MissingInput
from instep.pyindex.model import SymbolKind
from instep.pyindex.symbols import decode_source, index_tree

log = logging.getLogger(__name__)

_PYTHON_SUFFIXES = (".py",)
_EXTENSION_SUFFIXES = (".so", ".pyd")
_CONFIG_MODULE = "torch.utils._config_module"


class Verdict(str, Enum):
    FOUND = "found"
    MISSING = "missing"
    UNVERIFIABLE = "unverifiable"


class RefKind(str, Enum):
    IMPORT = "import"  # from torch._x import name / import torch._x.y
    ATTRIBUTE = "attribute"  # torch._x.y.name or alias.name in code
    PATCH_TARGET = "patch_target"  # mock.patch("torch._x.y.name") / patch.object(mod, "name")
    CONFIG_KEY = "config_key"  # config.patch(key=...) on a torch config module


@dataclass(frozen=True)
class ApiReference:
    """One use of a torch internal in a test file."""

    path: str
    line: int
    target: str  # absolute dotted name: 'torch._inductor.codecache.cpp_prefix_path'
    kind: RefKind

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"


@dataclass(frozen=True)
class Resolution:
    verdict: Verdict
    reason: str = ""


@dataclass(frozen=True)
class ApiFinding:
    ref: ApiReference
    verdict: Verdict
    reason: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "path": self.ref.path,
            "line": self.ref.line,
            "target": self.ref.target,
            "kind": self.ref.kind.value,
            "verdict": self.verdict.value,
            "reason": self.reason,
        }


@dataclass
class ApiScanReport:
    torch_root: str
    torch_version: str | None
    files: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # path -> why
    findings: list[ApiFinding] = field(default_factory=list)

    def by_verdict(self, verdict: Verdict) -> list[ApiFinding]:
        return [f for f in self.findings if f.verdict is verdict]

    @property
    def missing(self) -> list[ApiFinding]:
        return self.by_verdict(Verdict.MISSING)

    @property
    def ok(self) -> bool:
        return not self.missing

    def as_dict(self) -> dict[str, Any]:
        return {
            "torch_root": self.torch_root,
            "torch_version": self.torch_version,
            "files": self.files,
            "skipped": self.skipped,
            "counts": {v.value: len(self.by_verdict(v)) for v in Verdict},
            "missing": [f.as_dict() for f in self.missing],
            "unverifiable": [f.as_dict() for f in self.by_verdict(Verdict.UNVERIFIABLE)],
        }


# ------------------------------------------------------------------ the installed torch


def find_torch_root() -> Path:
    """The installed ``torch`` package directory, found without importing torch."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        raise MissingDependency("torch", "the API scan", "install the torch the tests target")
    return Path(next(iter(spec.submodule_search_locations)))


@dataclass
class ModuleFacts:
    """What the scan needs to know about one module of the installed torch."""

    name: str
    symbols: dict[str, Any]  # qualname -> Symbol (from the upstream index)
    imports: dict[str, str]  # local name -> absolute dotted target
    extra_names: set[str]  # bound inside if/try/with/for blocks at module level
    star_imports: list[str]  # absolute module names
    dynamic: str | None  # why names cannot be listed statically ('__getattr__', ...)
    is_config: bool  # installs a torch config module (install_config_module)
    note: str = ""  # a caveat added to 'missing' (globals() written inside functions)


class InstalledTorch:
    """Resolves dotted names against the sources of an installed torch (never imported)."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = Path(root) if root is not None else find_torch_root()
        self._facts: dict[str, ModuleFacts | None] = {}
        self._resolved: dict[str, Resolution] = {}

    @property
    def version(self) -> str | None:
        try:
            text = (self.root / "version.py").read_text(encoding="utf-8")
        except OSError:
            return None
        match = re.search(r"^__version__\s*=\s*['\"]([^'\"]+)['\"]", text, re.M)
        return match.group(1) if match else None

    # -- module files

    def module_kind(self, module: str) -> str | None:
        """'source', 'package', 'extension' or None (no such module in this torch)."""
        parts = module.split(".")
        if parts[0] != "torch":
            return None
        base = self.root.joinpath(*parts[1:])
        if len(parts) == 1 or base.is_dir():
            if (base / "__init__.py").is_file():
                return "package"
            if len(parts) > 1 and base.is_dir() and any(base.glob("*.py")):
                return "package"  # namespace package
        if base.with_suffix(".py").is_file():
            return "source"
        parent = base.parent
        if parent.is_dir():
            for entry in parent.glob(parts[-1] + ".*"):
                if entry.suffix in _EXTENSION_SUFFIXES:
                    return "extension"
        return None

    def _module_file(self, module: str) -> Path | None:
        kind = self.module_kind(module)
        base = self.root.joinpath(*module.split(".")[1:])
        if kind == "package":
            init = base / "__init__.py"
            return init if init.is_file() else None
        if kind == "source":
            return base.with_suffix(".py")
        return None

    def facts(self, module: str) -> ModuleFacts | None:
        if module not in self._facts:
            self._facts[module] = self._read_facts(module)
        return self._facts[module]

    def _read_facts(self, module: str) -> ModuleFacts | None:
        path = self._module_file(module)
        if path is None:
            return None
        rel = "torch/" + path.relative_to(self.root).as_posix()
        data = path.read_bytes()
        try:
            text = decode_source(data)
            tree = ast.parse(text, filename=str(path))
        except (SyntaxError, UnicodeDecodeError, LookupError, ValueError, RecursionError) as exc:
            why = f"unreadable: {' '.join(str(exc).split())}"
            return ModuleFacts(module, {}, {}, set(), [], why, False)
        index = index_tree(rel, tree)
        is_pkg = path.name == "__init__.py"
        extra, stars, dynamic = _module_level_facts(tree, module, is_pkg)
        if "__getattr__" in index.symbols:
            dynamic = dynamic or "defines a module-level __getattr__"
        return ModuleFacts(
            name=module,
            symbols=index.symbols,
            imports=index.imports,
            extra_names=extra,
            star_imports=stars,
            dynamic=dynamic,
            is_config="install_config_module(" in text,
            note=(
                f" ({module} also sets names through globals() in functions)"
                if not dynamic and "globals()[" in text
                else ""
            ),
        )

    def is_config_module(self, module: str) -> bool:
        facts = self.facts(module)
        return bool(facts and facts.is_config)

    # -- resolution

    def resolve(self, dotted: str) -> Resolution:
        """Whether ``dotted`` (``torch.a.b.name``) exists in the installed torch."""
        if dotted not in self._resolved:
            parts = dotted.split(".")
            if parts[0] != "torch":
                self._resolved[dotted] = Resolution(Verdict.UNVERIFIABLE, "not under torch")
            else:
                self._resolved[dotted] = self._resolve("torch", parts[1:], set())
        return self._resolved[dotted]

    def _resolve(self, module: str, rest: list[str], seen: set[str]) -> Resolution:
        if not rest:
            return Resolution(Verdict.FOUND)
        key = f"{module}:{'.'.join(rest)}"
        if key in seen:  # an import cycle between re-exports
            return Resolution(Verdict.UNVERIFIABLE, f"re-export cycle at {module}.{rest[0]}")
        seen = seen | {key}
        name, more = rest[0], rest[1:]
        sub = f"{module}.{name}"
        sub_kind = self.module_kind(sub)
        if sub_kind in ("source", "package"):
            return self._resolve(sub, more, seen)
        if sub_kind == "extension":
            return Resolution(Verdict.UNVERIFIABLE, f"{sub} is a compiled extension")
        facts = self.facts(module)
        if facts is None:
            kind = self.module_kind(module)
            if kind == "extension":
                return Resolution(Verdict.UNVERIFIABLE, f"{module} is a compiled extension")
            return Resolution(Verdict.MISSING, f"no module {module} in the installed torch")
        symbol = facts.symbols.get(name)
        if symbol is not None and symbol.kind is not SymbolKind.BLOCK:
            return self._resolve_member(facts, name, more)
        if name in facts.imports:
            target = facts.imports[name].split(".")
            if target[0] != "torch":
                return Resolution(Verdict.FOUND, f"re-exported from {facts.imports[name]}")
            return self._resolve_dotted(target + more, seen)
        if name in facts.extra_names:
            return Resolution(Verdict.FOUND, "bound in a conditional block")
        if facts.is_config and module != _CONFIG_MODULE:
            # install_config_module() turns the module into a ConfigModule: its methods
            # (patch, save_config, ...) are attributes of every config module
            owner = self.facts(_CONFIG_MODULE)
            if owner is not None and f"ConfigModule.{name}" in owner.symbols:
                return Resolution(Verdict.FOUND, "a ConfigModule method")
        unverifiable: list[str] = []
        for star in facts.star_imports:
            if star.split(".")[0] != "torch" or self.module_kind(star) == "extension":
                unverifiable.append(star)
                continue
            if self.module_kind(star) is None:
                continue
            got = self._resolve(star, rest, seen)
            if got.verdict is Verdict.FOUND:
                return got
            if got.verdict is Verdict.UNVERIFIABLE:
                unverifiable.append(star)
        if facts.dynamic:
            return Resolution(Verdict.UNVERIFIABLE, f"{module} {facts.dynamic}")
        if unverifiable:
            return Resolution(
                Verdict.UNVERIFIABLE,
                f"{module} has no '{name}' but star-imports {', '.join(unverifiable)}",
            )
        return Resolution(Verdict.MISSING, f"{module} has no '{name}'{facts.note}")

    def _resolve_dotted(self, parts: list[str], seen: set[str]) -> Resolution:
        # the longest prefix that is a module, then names inside it
        for cut in range(len(parts), 0, -1):
            mod = ".".join(parts[:cut])
            if self.module_kind(mod) in ("source", "package"):
                return self._resolve(mod, parts[cut:], seen)
            if self.module_kind(mod) == "extension":
                return Resolution(Verdict.UNVERIFIABLE, f"{mod} is a compiled extension")
        return Resolution(Verdict.MISSING, f"no module {'.'.join(parts[:1])}")

    @staticmethod
    def _resolve_member(facts: ModuleFacts, name: str, more: list[str]) -> Resolution:
        qual = name
        for attr in more:
            symbol = facts.symbols.get(qual)
            if symbol is None or symbol.kind is not SymbolKind.CLASS:
                return Resolution(Verdict.FOUND)  # an attribute of a value: not followed
            nxt = f"{qual}.{attr}"
            if nxt not in facts.symbols:
                if symbol.bases and symbol.bases != ("object",):
                    return Resolution(
                        Verdict.UNVERIFIABLE, f"{facts.name}.{qual} may inherit '{attr}'"
                    )
                return Resolution(Verdict.MISSING, f"class {facts.name}.{qual} has no '{attr}'")
            qual = nxt
        return Resolution(Verdict.FOUND)


def _module_level_facts(
    tree: ast.Module, module: str, is_package: bool
) -> tuple[set[str], list[str], str | None]:
    """Names bound inside module-level compound statements, star imports, dynamic markers."""
    names: set[str] = set()
    stars: list[str] = []
    dynamic: str | None = None
    package = module if is_package else module.rpartition(".")[0]

    def absolute(node: ast.ImportFrom) -> str:
        if not node.level:
            return node.module or ""
        base = package.split(".")
        if node.level > 1:
            base = base[: len(base) - (node.level - 1)]
        return ".".join([*base, node.module] if node.module else base)

    def visit(body: list[ast.stmt], nested: bool) -> None:
        nonlocal dynamic
        for stmt in body:
            if isinstance(stmt, ast.ImportFrom) and any(a.name == "*" for a in stmt.names):
                stars.append(absolute(stmt))
                continue
            if nested:
                for node in ast.walk(stmt):
                    if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                        names.add(node.id)
                    elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                        names.add(node.name)
                    elif isinstance(node, (ast.Import, ast.ImportFrom)):
                        for alias in node.names:
                            names.add(alias.asname or alias.name.split(".")[0])
            for child in ("body", "orelse", "finalbody", "handlers"):
                inner = getattr(stmt, child, None)
                if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    break
                if inner:
                    blocks = [h.body for h in inner] if child == "handlers" else [inner]
                    for block in blocks:
                        visit(block, True)
            if isinstance(stmt, ast.Match):
                for case in stmt.cases:
                    visit(case.body, True)

    visit(tree.body, False)
    stack: list[ast.AST] = list(tree.body)
    while stack:  # module-level code only: function and class bodies run later, if ever
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        call = isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
        if call and node.func.id == "globals":
            dynamic = "writes module names through globals()"
        stack.extend(ast.iter_child_nodes(node))
    for node in ast.walk(tree):  # `global x` in a function binds a module name
        if isinstance(node, ast.Global):
            names.update(node.names)
    return names, stars, dynamic


# ------------------------------------------------------------------ the test sources


def _is_private_torch(dotted: str) -> bool:
    parts = dotted.split(".")
    return parts[0] == "torch" and any(
        p.startswith("_") and not (p.startswith("__") and p.endswith("__")) for p in parts[1:]
    )


def _chain(node: ast.expr) -> list[str] | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return parts[::-1]


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def _scope_bindings(scope: ast.AST) -> dict[str, str | None]:
    """Names a scope binds: torch imports -> dotted target, anything else -> None."""
    out: dict[str, str | None] = {}
    imports: dict[str, str] = {}
    if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        args = scope.args
        for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
            if arg is not None:
                out[arg.arg] = None
    body = scope.body if isinstance(scope.body, list) else [scope.body]
    stack: list[ast.AST] = list(body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "torch":
                    if alias.asname:
                        imports[alias.asname] = alias.name
                    else:
                        imports["torch"] = "torch"
                else:
                    out[alias.asname or alias.name.split(".")[0]] = None
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if alias.name == "*":
                    continue
                name = alias.asname or alias.name
                if not node.level and (node.module or "").split(".")[0] == "torch":
                    imports[name] = f"{node.module}.{alias.name}"
                else:
                    out[name] = None
        elif isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            out[node.id] = None
        elif isinstance(node, _SCOPES):
            out[node.name if not isinstance(node, ast.Lambda) else "<lambda>"] = None
            for deco in getattr(node, "decorator_list", []):
                stack.append(deco)
            continue  # its body is its own scope
        stack.extend(ast.iter_child_nodes(node))
    for name, target in imports.items():
        if out.get(name, "absent") is None and name in out:
            continue  # also assigned something else in this scope: not followed
        out[name] = target
    return out


class _ReferenceCollector(ast.NodeVisitor):
    """Collects references to torch internals from one test file, scope by scope.

    A name bound to a torch module or object by an import is followed in the scope of
    the import and the scopes nested in it, unless an inner scope binds it otherwise
    (a parameter, an assignment); a name a scope both imports and assigns is not followed.
    """

    def __init__(self, path: str, torch: InstalledTorch) -> None:
        self.path = path
        self.torch = torch
        self.scopes: list[dict[str, str | None]] = []
        self.refs: list[ApiReference] = []

    def collect(self, tree: ast.Module) -> list[ApiReference]:
        self.scopes.append(_scope_bindings(tree))
        self.visit(tree)
        return self.refs

    def _lookup(self, name: str) -> str | None:
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        return None

    def _visit_scope(self, node: ast.AST) -> None:
        # decorators, defaults and bases are evaluated in the enclosing scope
        outer: list[ast.AST] = list(getattr(node, "decorator_list", []))
        if isinstance(node, ast.ClassDef):
            outer += [*node.bases, *node.keywords]
        else:
            outer += [d for d in (*node.args.defaults, *node.args.kw_defaults) if d is not None]
        for expr in outer:
            self.visit(expr)
        self.scopes.append(_scope_bindings(node))
        for stmt in node.body if isinstance(node.body, list) else [node.body]:
            self.visit(stmt)
        self.scopes.pop()

    visit_FunctionDef = _visit_scope
    visit_AsyncFunctionDef = _visit_scope
    visit_Lambda = _visit_scope
    visit_ClassDef = _visit_scope

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if _is_private_torch(alias.name):
                self._add(node, alias.name, RefKind.IMPORT)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level or not node.module or node.module.split(".")[0] != "torch":
            return
        for alias in node.names:
            target = node.module if alias.name == "*" else f"{node.module}.{alias.name}"
            if _is_private_torch(target):
                self._add(node, target, RefKind.IMPORT)

    def _add(self, node: ast.AST, target: str, kind: RefKind) -> None:
        self.refs.append(ApiReference(self.path, getattr(node, "lineno", 0), target, kind))

    def _dotted(self, node: ast.expr) -> str | None:
        parts = _chain(node)
        if not parts:
            return None
        base = self._lookup(parts[0])
        return ".".join([base, *parts[1:]]) if base else None

    def visit_Attribute(self, node: ast.Attribute) -> None:
        # visited top-down: the outermost attribute of a chain speaks for the whole chain
        dotted = self._dotted(node) if isinstance(node.ctx, ast.Load) else None
        if dotted is None:
            self.generic_visit(node)
        elif _is_private_torch(dotted):
            self._add(node, dotted, RefKind.ATTRIBUTE)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        fname = _chain(func)
        last = fname[-1] if fname else None
        if last == "patch" and node.args and _str(node.args[0]):
            target = _str(node.args[0]) or ""
            if _is_private_torch(target):
                self._add(node, target, RefKind.PATCH_TARGET)
        is_patch_object = last == "object" and fname and len(fname) >= 2 and fname[-2] == "patch"
        if is_patch_object and len(node.args) >= 2 and _str(node.args[1]):
            owner = self._dotted(node.args[0])
            target = f"{owner}.{_str(node.args[1])}"
            if owner and _is_private_torch(target):
                self._add(node, target, RefKind.PATCH_TARGET)
        if last == "patch" and isinstance(func, ast.Attribute):
            owner = self._dotted(func.value)
            if owner and self.torch.is_config_module(owner):
                for key in _config_patch_keys(node):
                    self._add(node, f"{owner}.{key}", RefKind.CONFIG_KEY)
        self.generic_visit(node)


def _str(node: ast.expr) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _config_patch_keys(call: ast.Call) -> list[str]:
    keys = [kw.arg for kw in call.keywords if kw.arg]
    if call.args:
        first = call.args[0]
        if _str(first):
            keys.append(_str(first) or "")
        elif isinstance(first, ast.Dict):
            keys.extend(k for k in (_str(k) for k in first.keys if k is not None) if k)
    return keys


def _python_files(paths: Iterable[Path]) -> tuple[list[Path], list[Path]]:
    files: list[Path] = []
    absent: list[Path] = []
    for path in paths:
        if path.is_dir():
            files.extend(sorted(p for p in path.rglob("*.py") if p.is_file()))
        elif path.is_file():
            files.append(path)
        else:
            absent.append(path)
    return files, absent


def scan_test_sources(
    paths: Iterable[Path | str], torch: InstalledTorch | None = None
) -> ApiScanReport:
    """Check every torch-internal reference in ``paths`` (files or directories)."""
    files, absent = _python_files(Path(p) for p in paths)
    if absent:
        raise MissingInput(f"test path {absent[0]} does not exist")
    torch = torch or InstalledTorch()
    report = ApiScanReport(str(torch.root), torch.version)
    for file in files:
        shown = str(file)
        try:
            tree = ast.parse(decode_source(file.read_bytes()), filename=shown)
        except (SyntaxError, UnicodeDecodeError, LookupError, ValueError, OSError) as exc:
            log.warning("skipping %s: %s", shown, " ".join(str(exc).split()))
            report.skipped[shown] = str(exc)
            continue
        report.files.append(shown)
        for ref in _ReferenceCollector(shown, torch).collect(tree):
            got = torch.resolve(ref.target)
            report.findings.append(ApiFinding(ref, got.verdict, got.reason))
    report.findings.sort(key=lambda f: (f.ref.path, f.ref.line, f.ref.target))
    return report
