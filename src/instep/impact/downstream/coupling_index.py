"""Static coupling index of a downstream tree: where it depends on upstream, and how.

One file at a time (:func:`index_downstream_file`, cacheable by content), a visitor
resolves names through import aliases, local aliases (``GraphLowering =
inductor_graph.GraphLowering``, saved originals ``orig = X.f``) and well-known handles
(``V.graph.sizevars`` -> ``SizeVarAllocator``, data in ``data/handles.toml``) and
records :class:`~instep.impact.model.Reference` s: imports and attribute uses
(IMPORT_USE), subclasses of upstream classes and the methods they override
(SUBCLASS_OVERRIDE), assignments and ``setattr`` onto upstream modules and classes
(MONKEYPATCH), same-op / same-key registrations (REGISTRATION, via
:mod:`instep.pyindex.registrations`), upstream config keys (CONFIG) and AOTI C shim names
(C_SHIM, best effort). Every def, nested ones included, becomes a
:class:`DownstreamFunction` with its signature, body hash and fork fingerprint; version
gates (:mod:`instep.impact.downstream.version_gates`) are attached to the references they guard.

The whole tree (:func:`index_downstream`, a process pool plus the content cache) then
resolves what one file cannot: names re-exported by another downstream module,
replacements installed from another file than the one defining them, patch helpers
(a downstream function that does ``setattr`` on its parameters) called with upstream
targets, and subclass chains through downstream classes.

Targets are absolute dotted names *as the downstream writes them*; re-exports are resolved
against upstream later (``upstream.resolver``). Nothing is imported or executed; fork
detection against upstream is :mod:`instep.impact.downstream.forks`.
"""

from __future__ import annotations

import ast
import bisect
import builtins
import logging
import os
import re
import warnings
from collections import defaultdict
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from enum import Enum
from functools import lru_cache
from importlib import resources
from typing import NamedTuple

from instep.impact.downstream import forks
from instep.impact.downstream.version_gates import (
    GateLookup,
    GateSpan,
    catches_import_error,
    gate_spans,
)
from instep.impact.model import CouplingKind, Reference, VersionGate
from instep.impact.no_gc import no_cyclic_gc
from instep.impact.upstream.c_shims import shim_name_pattern
from instep.pyindex.cache import ContentCache, content_hash
from instep.pyindex.model import Registration, module_of
from instep.pyindex.registrations import (
    FALLBACK_CALLS,
    OVERRIDE_DECOMP,
    dotted_name,
    item_assignment,
    item_assignment_tables,
    overrides_decomposition,
    registrars,
    registrations_of_call,
    registrations_of_decorators,
    registry_entries,
)
from instep.pyindex.signatures import call_shape
from instep.pyindex.unparse import unparse
from instep.tomlfile import parse_toml

log = logging.getLogger(__name__)

FORMAT = "coupling-index-v7"  # bump when any cached class changes shape
MAX_FILE_BYTES = 8 * 1024 * 1024
MAX_CALL_SHAPES = 16  # distinct ways of calling one upstream callable judged per place
SNIPPET_CHARS = 160

_BUILTINS = frozenset(dir(builtins))
# Words that make a statement worth visiting besides imported names.
_ALWAYS = frozenset({"setattr", "super", "torch", "aten", "prims", "aoti_torch_"})
_SIMPLE_STMTS = frozenset(
    {
        ast.Expr,
        ast.Assign,
        ast.AugAssign,
        ast.AnnAssign,
        ast.Return,
        ast.Delete,
        ast.Raise,
        ast.Assert,
        ast.Pass,
        ast.Break,
        ast.Continue,
        ast.Global,
        ast.Nonlocal,
    }
)


def _trie_pattern(words: Iterable[str]) -> str:
    """A regex matching exactly ``words``, factored by common prefix.

    ``re`` tries the branches of ``a|b|c`` one after another at every position; a
    prefix-factored pattern rejects a position on its first character, which makes the
    scan for a file's few hundred imported names several times faster.
    """
    trie: dict = {}
    for word in words:
        node = trie
        for ch in word:
            node = node.setdefault(ch, {})
        node[""] = {}

    def build(node: dict) -> str:
        branches = [re.escape(ch) + build(child) for ch, child in sorted(node.items()) if ch]
        if not branches:
            return ""
        body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
        if "" in node:
            return f"(?:{body})?"
        return body

    return "(?:" + build(trie) + ")"


@lru_cache(maxsize=8192)
def _word(name: str) -> re.Pattern:
    if name == "aoti_torch_":  # a prefix, not a word
        return re.compile(re.escape(name))
    return re.compile(r"\b" + re.escape(name) + r"\b")


_TRY_STMTS = frozenset({ast.Try, getattr(ast, "TryStar", ast.Try)})


_BLOCK_STMTS = frozenset(
    {
        ast.If,
        ast.For,
        ast.AsyncFor,
        ast.While,
        ast.With,
        ast.AsyncWith,
        ast.Try,
        ast.Match,
        getattr(ast, "TryStar", ast.Try),
    }
)


def _statements(tree: ast.AST):
    """Every statement of a module, nested bodies included (no expressions)."""
    stack = list(getattr(tree, "body", []))
    while stack:
        node = stack.pop()
        yield node
        for f in ("body", "orelse", "finalbody"):
            b = getattr(node, f, None)
            if b and isinstance(b, list) and isinstance(b[0], ast.stmt):
                stack.extend(b)
        for h in getattr(node, "handlers", ()) or ():
            stack.extend(h.body)
        for c in getattr(node, "cases", ()) or ():
            stack.extend(c.body)


# ----------------------------------------------------------------------------- data


@lru_cache(maxsize=1)
def _data() -> tuple[tuple[tuple[str, str], ...], tuple[str, ...], frozenset[str], re.Pattern]:
    text = (resources.files("instep.impact") / "data" / "handles.toml").read_text("utf-8")
    raw = parse_toml(text, "instep/impact/data/handles.toml")
    handles = tuple(sorted(raw.get("handles", {}).items(), key=lambda kv: -len(kv[0])))
    cfg = raw.get("config", {})
    shim = shim_name_pattern()
    return handles, tuple(cfg.get("modules", ())), frozenset(cfg.get("api", ())), shim


def handles() -> dict[str, str]:
    return dict(_data()[0])


@lru_cache(maxsize=1)
def _handle_map() -> dict[str, str]:
    return dict(_data()[0])


def apply_handles(dotted: str) -> tuple[str, bool]:
    """Rewrite well-known handle prefixes; returns (name, whether a handle applied)."""
    table = _handle_map()
    used = False
    for _ in range(8):
        parts = dotted.split(".")
        for i in range(len(parts), 1, -1):  # longest prefix first
            key = ".".join(parts[:i])
            value = table.get(key)
            if value is not None:
                dotted = value + dotted[len(key) :]
                used = True
                break
        else:
            break
    return dotted, used


def config_key(dotted: str) -> tuple[str, str] | None:
    """'torch._inductor.config.triton.x' -> ('torch._inductor.config', 'triton.x')."""
    _, modules, api, _ = _data()
    for mod in modules:
        if dotted.startswith(mod + "."):
            key = dotted[len(mod) + 1 :]
            if key.split(".", 1)[0] in api:
                return None
            return mod, key
    return None


# ----------------------------------------------------------------------------- nouns


class LocalKind(Enum):
    DEF = "def"
    CLASS = "class"


class Local(NamedTuple):
    """A name bound to a def or class of the file being indexed (``qualname`` may go on
    into its attributes: ``C.m``), as opposed to an absolute dotted name (a ``str``)."""

    kind: LocalKind
    qualname: str


#: What a name is bound to: an absolute dotted name, a local def/class, or unknown.
Binding = str | Local | None


class ArgKind(Enum):
    UPSTREAM = "up"  # an upstream object (absolute dotted name)
    DOWNSTREAM = "dn"  # a downstream object of another module (absolute dotted name)
    LOCAL = "fn"  # a def or class of this file (a Local)
    STRING = "str"  # a string constant


class Arg(NamedTuple):
    """What a call passes at one position or keyword, when it is statically known."""

    kind: ArgKind
    value: str | Local


@dataclass
class DownstreamFunction:
    """One def of a downstream file (nested defs included: lowerings inside functions)."""

    path: str
    qualname: str
    line: int
    end_line: int
    signature: str
    body_hash: str
    fingerprint: forks.Fingerprint
    registrations: tuple[Registration, ...] = ()
    snippet: str = ""
    upstream_calls: frozenset[str] = frozenset()  # upstream dotted names it calls
    super_calls: frozenset[str] = frozenset()  # method names called as super().name


@dataclass
class DownstreamClass:
    """A downstream class and its bases (absolute dotted names, upstream or downstream)."""

    path: str
    qualname: str
    line: int
    snippet: str
    bases: tuple[str, ...]
    methods: tuple[str, ...]  # qualnames of the defs directly in its body
    upstream_direct: bool = False  # some base is upstream (references already emitted)


@dataclass(frozen=True)
class HelperSpec:
    """A downstream patch helper: ``setattr(<obj param>, <name param>, value)``."""

    params: tuple[str, ...]
    obj: str
    name: str
    value: str | None  # parameter holding the replacement; None: decorator factory
    dotted_name: bool  # the name parameter is a dotted path below obj


@dataclass(frozen=True)
class CallSite:
    """A call to a downstream function with upstream objects and strings as arguments."""

    callee: str | Local  # absolute dotted (downstream), or a def of this file
    args: tuple[Arg | None, ...]  # per position
    keywords: tuple[tuple[str, Arg | None], ...]
    line: int
    snippet: str
    owner: str | None
    decorated: str | None = None  # qualname of the def it decorates


@dataclass
class DownstreamFileIndex:
    path: str
    references: list[Reference] = field(default_factory=list)
    functions: list[DownstreamFunction] = field(default_factory=list)
    gates: list[VersionGate] = field(default_factory=list)
    lines_fingerprint: forks.LinesFingerprint | None = None
    error: str | None = None
    # for cross-file resolution (DownstreamIndex)
    module: str = ""
    exports: dict[str, str | Local] = field(default_factory=dict)  # module-level bindings
    classes: list[DownstreamClass] = field(default_factory=list)
    helpers: dict[str, HelperSpec] = field(default_factory=dict)
    calls: list[CallSite] = field(default_factory=list)
    pending: list[Reference] = field(default_factory=list)  # targets in downstream names
    patch_values: list[tuple[int, str]] = field(default_factory=list)  # ref idx -> dn dotted
    dn_imports: list[tuple[str, int, str | None]] = field(default_factory=list)
    gate_spans: list[GateSpan] = field(default_factory=list)  # gates with the lines they guard


# ----------------------------------------------------------------------------- visitor


def _snippet(lines: list[str], line: int) -> str:
    if 0 < line <= len(lines):
        s = lines[line - 1].strip()
        return s if len(s) <= SNIPPET_CHARS else s[: SNIPPET_CHARS - 3] + "..."
    return ""


@dataclass
class _Frame:
    """A function being visited: its bindings and what it does."""

    qualname: str
    params: tuple[str, ...]
    derived: dict[str, set[str]] = field(default_factory=dict)  # local -> params it uses
    upstream_calls: set[str] = field(default_factory=set)
    super_calls: set[str] = field(default_factory=set)
    helper: HelperSpec | None = None
    returns: str | None = None  # upstream dotted it returns (`return inductor_lowering`)


class _Visitor:
    def __init__(self, path: str, source: str, roots: tuple[str, ...]) -> None:
        self.path = path
        self.module = module_of(path)
        self.package = self.module.split(".", 1)[0]
        self.dn_imports: list[tuple[str, int, str | None]] = []  # downstream names imported
        self.is_package = path.endswith("__init__.py")
        self.lines = source.splitlines()
        self.roots = frozenset(roots)
        self.scopes: list[tuple[dict[str, Binding], bool]] = [({}, False)]
        self.frames: list[_Frame] = []
        self.owner_stack: list[str] = []
        self.refs: list[Reference] = []
        self.pending: list[Reference] = []
        self.seen_uses: set[tuple[str, str | None, CouplingKind]] = set()
        self.seen_pending: set[tuple[str, str | None]] = set()
        self.functions: list[DownstreamFunction] = []
        self.classes: list[DownstreamClass] = []
        self.helpers: dict[str, HelperSpec] = {}
        self.returns: dict[str, str] = {}  # local def -> upstream module/object it returns
        self.calls: list[CallSite] = []
        self.local_patches: list[tuple[int, Local]] = []  # ref idx -> its local replacement
        self.patch_values: list[tuple[int, str]] = []
        self.skip_calls: set[int] = set()
        self.decorator_calls: set[int] = set()
        self.shim = _data()[3]
        self.spans: list[tuple[int, int]] = []  # line spans of the enclosing defs
        self.full = 0  # > 0 inside a function that may be a patch helper: visit everything
        self.names: set[str] = set()
        self.hot: list[int] = []
        self._offsets: list[int] | None = None
        self.setattr_lines: list[int] = []
        # how upstream callables are called: (target, owner) and (target, None) for the
        # whole file -> distinct call shapes, or None once a non-call use was seen
        self.call_uses: dict[tuple[str, str | None, bool], set[str] | None] = {}
        self.called: set[int] = set()  # ids of the func nodes of calls
        # type positions (annotations, except clauses, isinstance's class argument) name a
        # class without calling or passing it on: not a use for the call check
        self.in_type = 0
        self.type_nodes: set[int] = set()

    # -- names ---------------------------------------------------------------------
    def is_up(self, dotted: str | Local | None) -> bool:
        return type(dotted) is str and dotted.split(".", 1)[0] in self.roots

    def is_own(self, dotted: str) -> bool:
        return dotted.split(".", 1)[0] == self.package

    def bind(self, name: str, value: Binding) -> None:
        self.scopes[-1][0][name] = value

    def lookup(self, name: str) -> Binding:
        top = len(self.scopes) - 1
        for i in range(top, -1, -1):
            scope, is_class = self.scopes[i]
            if is_class and i != top:
                continue
            if name in scope:
                return scope[name]
        return None

    def resolve(self, node: ast.AST) -> tuple[str | Local | None, bool]:
        """Absolute dotted name of a Name/Attribute chain, or the local def/class it goes
        through (None: unknown); and whether a handle was applied."""
        chain = dotted_name(node)
        if chain is None:
            return None, False
        head, _, rest = chain.partition(".")
        b = self.lookup(head)
        if b is None:
            return None, False
        if type(b) is Local:
            return (Local(b.kind, f"{b.qualname}.{rest}") if rest else b), False
        full = b + "." + rest if rest else b
        if self.is_up(full):
            return apply_handles(full)
        return full, False

    def owner(self) -> str | None:
        return ".".join(self.owner_stack) if self.owner_stack else None

    def abs_module(self, node: ast.ImportFrom) -> str:
        if not node.level:
            return node.module or ""
        base = self.module.split(".")
        if not self.is_package:
            base = base[:-1]
        if node.level > 1:
            base = base[: len(base) - (node.level - 1)]
        return ".".join([*base, node.module] if node.module else base)

    # -- emitting ------------------------------------------------------------------
    def ref(self, kind: CouplingKind, target: str, line: int, **kw) -> int:
        self.refs.append(
            Reference(
                kind, target, self.path, line, _snippet(self.lines, line), owner=self.owner(), **kw
            )
        )
        return len(self.refs) - 1

    def use(self, target: str, line: int, *, write: bool = False) -> None:
        if target.startswith("torch.ops."):
            return
        ck = config_key(target)
        if ck is not None:
            kind, tgt = CouplingKind.CONFIG, target
            detail = "write" if write else "read"
        else:
            kind, tgt, detail = CouplingKind.IMPORT_USE, target, "use"
        key = (tgt, self.owner(), kind)
        if key in self.seen_uses and not write:
            return
        self.seen_uses.add(key)
        self.ref(kind, tgt, line, detail=detail)

    def pending_use(self, target: str, line: int) -> None:
        key = (target, self.owner())
        if key in self.seen_pending:
            return
        self.seen_pending.add(key)
        self.pending.append(
            Reference(
                CouplingKind.IMPORT_USE,
                target,
                self.path,
                line,
                _snippet(self.lines, line),
                detail="use",
                owner=self.owner(),
            )
        )

    def note_use(self, target: str, node: ast.AST, call: ast.Call | None = None) -> None:
        """Record how ``node`` uses ``target``: called (with ``call``'s shape), named in a
        type position (no effect on calls), or otherwise (passed on: callers unknown)."""
        if call is None and id(node) in self.called:
            return  # its call recorded the shape
        typed = call is None and (self.in_type > 0 or id(node) in self.type_nodes)
        for key in ((target, self.owner(), False), (target, None, True)):
            shapes = self.call_uses.setdefault(key, set())
            if shapes is None or typed:
                continue
            if call is not None:
                shapes.add(call_shape(call))
            if call is None or len(shapes) > MAX_CALL_SHAPES:
                self.call_uses[key] = None  # passed on, or too many ways to judge

    def call_shapes_of(self, ref: Reference) -> tuple[str, ...] | None:
        """The calls a use (its def) or an import line (the file) makes of its target."""
        if ref.detail == "use":
            shapes = self.call_uses.get((ref.target, ref.owner, False))
            return None if shapes is None else tuple(sorted(shapes))
        shapes = self.call_uses.get((ref.target, None, True), set())
        return None if shapes is None else tuple(sorted(shapes))

    def note_call(self, dotted: str) -> None:
        if self.frames and self.is_up(dotted):
            self.frames[-1].upstream_calls.add(dotted)

    # -- pruning -------------------------------------------------------------------
    def prepare(self, tree: ast.Module, source: str) -> None:
        """Find the lines worth visiting: those naming an imported name or a keyword."""
        self.source = source
        names = set(_ALWAYS)
        names.update(registrars())
        names.update(item_assignment_tables())
        for node in _statements(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if self.is_up(a.name):
                        names.add(a.asname or a.name.split(".", 1)[0])
            elif isinstance(node, ast.ImportFrom) and self.is_up(self.abs_module(node)):
                names.update(a.asname or a.name for a in node.names)
        self.names = names
        self.norm = forks.normalised_lines(source)
        self.grams = forks.line_grams(self.norm)
        self.hot = self._lines_of(names)
        self.setattr_lines = self._lines_of({"setattr"}) if "setattr" in source else []

    def _lines_of(self, names: Iterable[str], start: int = 1, end: int = 0) -> list[int]:
        """Sorted numbers of the lines in [start, end] naming one of ``names`` (a word)."""
        src = self.source
        lo = self.offset(start)
        hi = self.offset(end + 1) if end > 0 else len(src)
        offs = self._offsets
        assert offs is not None
        present = sorted(n for n in names if n in src)
        if not present:
            return []
        if len(present) == 1:
            pat = _word(present[0])
        else:  # one scan for all names (a scan per name costs names x size)
            words = _trie_pattern([n for n in present if n != "aoti_torch_"])
            pat = re.compile(
                r"\b" + words + r"\b" + ("|aoti_torch_" if "aoti_torch_" in present else "")
            )
        return sorted({bisect.bisect_right(offs, m.start()) for m in pat.finditer(src, lo, hi)})

    def offset(self, line: int) -> int:
        """Character offset of the start of a 1-based line."""
        if self._offsets is None:
            offs = [0]
            for text in self.source.split("\n"):
                offs.append(offs[-1] + len(text) + 1)
            self._offsets = offs
        if line <= 1:
            return 0
        return self._offsets[min(line - 1, len(self._offsets) - 1)]

    def add_name(self, name: str) -> None:
        """A name newly bound to an upstream chain: its lines in the scope become hot."""
        scope = self.scopes[-1][0]
        if name in self.names or scope.get(f"<hot>{name}", "") is None:
            return
        if self.spans:
            start, end = self.spans[-1]
            scope[f"<hot>{name}"] = None
        else:
            self.names.add(name)
            start, end = 1, 0
        extra = self._lines_of([name], start, end)
        if extra:
            self.hot = sorted(set(self.hot).union(extra))

    @staticmethod
    def _touches(lines: list[int], start: int, end: int) -> bool:
        i = bisect.bisect_left(lines, start)
        return i < len(lines) and lines[i] <= end

    # -- visiting ------------------------------------------------------------------
    def visit(self, node: ast.AST) -> None:
        if type(node) in _TRY_STMTS:
            self.v_Try(node)  # type: ignore[arg-type]
            return
        if (
            type(node) in _SIMPLE_STMTS
            and not self.full
            and not self._touches(self.hot, node.lineno, node.end_lineno or node.lineno)
        ):
            return
        if (
            type(node) in _BLOCK_STMTS
            and not self.full
            and not self._touches(self.hot, node.lineno, node.end_lineno or node.lineno)
        ):
            # nothing upstream is named in it: only its defs and classes matter
            for field in ("body", "orelse", "finalbody"):
                for child in getattr(node, field, ()) or ():
                    self.visit(child)
            for h in getattr(node, "handlers", ()) or ():
                self.visit_list(h.body)
            for c in getattr(node, "cases", ()) or ():
                self.visit_list(c.body)
            return
        meth = _DISPATCH.get(type(node))
        if meth is not None:
            meth(self, node)
        else:
            for child in _children(node):
                self.visit(child)

    def v_Try(self, node: ast.Try) -> None:
        """``try: from new import x`` / ``except ImportError: from old import x``: after the
        statement ``x`` is the try body's name (what the torch that has it runs); the
        fallback import is still visited, inside its gate, as a reference of its own."""
        hot = self.full or self._touches(self.hot, node.lineno, node.end_lineno or node.lineno)
        scope = self.scopes[-1][0]
        # only an import fallback keeps the try body's names: copy the scope only then
        before = dict(scope) if any(catches_import_error(h) for h in node.handlers) else None
        self.visit_list(node.body)
        primary = (
            {k: v for k, v in scope.items() if k not in before or before[k] != v}
            if before is not None
            else {}
        )
        for h in node.handlers:
            if hot and h.type is not None:
                self.type_position(h.type)
            self.visit_list(h.body)
        scope.update(primary)
        self.visit_list(node.orelse)
        self.visit_list(node.finalbody)

    def generic(self, node: ast.AST) -> None:
        for child in _children(node):
            self.visit(child)

    def type_position(self, node: ast.AST) -> None:
        self.in_type += 1
        try:
            self.visit(node)
        finally:
            self.in_type -= 1

    def visit_list(self, nodes: Iterable[ast.AST]) -> None:
        for n in nodes:
            self.visit(n)

    def v_Import(self, node: ast.Import) -> None:
        for a in node.names:
            if a.asname:
                self.bind(a.asname, a.name)
            else:
                head = a.name.split(".", 1)[0]
                self.bind(head, head)
            if self.is_up(a.name):
                alias = f" as {a.asname}" if a.asname else ""
                self.import_ref(a.name, node.lineno, f"import {a.name}{alias}")

    def v_ImportFrom(self, node: ast.ImportFrom) -> None:
        mod = self.abs_module(node)
        for a in node.names:
            if a.name == "*":
                continue
            target = f"{mod}.{a.name}" if mod else a.name
            self.bind(a.asname or a.name, target)
            if self.is_own(target):
                self.dn_imports.append((target, node.lineno, self.owner()))
            if self.is_up(mod):
                alias = f" as {a.asname}" if a.asname else ""
                self.import_ref(target, node.lineno, f"from {mod} import {a.name}{alias}")

    def import_ref(self, target: str, line: int, text: str) -> None:
        """Every import line of an upstream name is kept as a reference."""
        self.refs.append(
            Reference(
                CouplingKind.IMPORT_USE,
                target,
                self.path,
                line,
                _snippet(self.lines, line),
                detail=text,
                owner=self.owner(),
            )
        )

    def v_Name(self, node: ast.Name) -> None:
        if not isinstance(node.ctx, ast.Load):
            return
        b = self.lookup(node.id)
        if b is None or type(b) is Local:
            return
        if self.is_up(b):
            b, _ = apply_handles(b)
            self.use(b, node.lineno)
            self.note_use(b, node)
        elif self.is_own(b):
            self.pending_use(b, node.lineno)

    def v_Attribute(self, node: ast.Attribute) -> None:
        dotted, _ = self.resolve(node)
        if dotted is None:
            if dotted_name(node) is None:
                self.generic(node)
            return
        if type(dotted) is Local:
            return
        if self.is_up(dotted):
            self.use(dotted, node.lineno)
            self.note_use(dotted, node)
        elif self.is_own(dotted):
            self.pending_use(dotted, node.lineno)

    def v_Constant(self, node: ast.Constant) -> None:
        v = node.value
        if isinstance(v, str) and "aoti_torch_" in v:
            for op in dict.fromkeys(self.shim.findall(v)):
                if op.endswith("_") and v.endswith(op):  # f"aoti_torch_item_{dtype}"
                    op += "*"
                self.ref(
                    CouplingKind.C_SHIM,
                    f"c_shim:{op}",
                    node.lineno,
                    detail="C shim name in a string",
                    best_effort=True,
                )

    # defs and classes
    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        for dec in node.decorator_list:
            if isinstance(dec, ast.Call):
                self.decorator_calls.add(id(dec))
        self.visit_list(node.decorator_list)
        self.visit_list(node.args.defaults)
        self.visit_list(d for d in node.args.kw_defaults if d is not None)
        for a in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs):
            if a.annotation is not None:
                self.type_position(a.annotation)
        if node.returns is not None:
            self.type_position(node.returns)
        outer_q = ".".join(self.owner_stack)
        qual = f"{outer_q}.{node.name}" if outer_q else node.name
        local = Local(LocalKind.DEF, qual)
        self.bind(node.name, local)
        decs = [self.unaliased(d) if isinstance(d, ast.Call) else d for d in node.decorator_list]
        regs = tuple(registrations_of_decorators(decs, self.path, qual))
        for r in regs:
            self.local_patches.append((self.registration(r), local))
        args = node.args
        params = tuple(
            a.arg
            for a in (*args.posonlyargs, *args.args, args.vararg, *args.kwonlyargs, args.kwarg)
            if a is not None
        )
        frame = _Frame(qual, params)
        full = self._touches(self.setattr_lines, node.lineno, node.end_lineno or node.lineno)
        self.full += full
        self.frames.append(frame)
        self.spans.append((node.lineno, node.end_lineno or node.lineno))
        self.owner_stack.append(node.name)
        # a parameter named like an upstream root (`def f(torch, torch_npu)`) is that module
        self.scopes.append(({p: (p if p in self.roots else None) for p in params}, False))
        self.visit_list(node.body)
        self.scopes.pop()
        self.owner_stack.pop()
        self.frames.pop()
        self.spans.pop()
        self.full -= full
        if frame.helper is not None:
            self.helpers[qual] = frame.helper
        if frame.returns is not None:
            self.returns[qual] = frame.returns
            self.add_name(node.name)
        self.functions.append(self._function_record(node, qual, regs, frame))
        for dec in node.decorator_list:  # @patch_helper(upstream.X, "name") def f(...)
            if isinstance(dec, ast.Call):
                site = self.call_site(dec, decorated=qual)
                if site is not None:
                    self.calls.append(site)

    v_FunctionDef = _function
    v_AsyncFunctionDef = _function

    def _function_record(
        self, node: ast.AST, qual: str, regs: tuple[Registration, ...], frame: _Frame
    ) -> DownstreamFunction:
        start = node.lineno
        end = node.end_lineno or start
        body = node.body  # type: ignore[attr-defined]
        body_start = body[0].lineno
        if (
            isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            body_start = (body[0].end_lineno or body_start) + 1
        return DownstreamFunction(
            self.path,
            qual,
            start,
            end,
            unparse(node.args),  # type: ignore[attr-defined]
            forks.body_hash_of_lines(self.norm[body_start - 1 : end]),
            forks.fingerprint_of_lines(self.grams[start - 1 : end]),
            regs,
            _snippet(self.lines, start),
            frozenset(frame.upstream_calls),
            frozenset(frame.super_calls),
        )

    def v_ClassDef(self, node: ast.ClassDef) -> None:
        self.visit_list(node.decorator_list)
        bases: list[str] = []
        outer_q = ".".join(self.owner_stack)
        qual = f"{outer_q}.{node.name}" if outer_q else node.name
        for b in node.bases:
            dotted, _ = self.resolve(b)
            if dotted is None:
                self.visit(b)
                continue
            if type(dotted) is Local:
                if dotted.kind is not LocalKind.CLASS:
                    continue
                dotted = f"{self.module}.{dotted.qualname}"
            bases.append(dotted)
        for kw in node.keywords:
            self.visit(kw.value)
        self.bind(node.name, Local(LocalKind.CLASS, qual))
        self.owner_stack.append(node.name)
        self.scopes.append(({}, True))
        n_before = len(self.functions)
        self.visit_list(node.body)
        self.scopes.pop()
        self.owner_stack.pop()
        methods = tuple(
            f.qualname for f in self.functions[n_before:] if f.qualname.rsplit(".", 1)[0] == qual
        )
        self.classes.append(
            DownstreamClass(
                self.path,
                qual,
                node.lineno,
                _snippet(self.lines, node.lineno),
                tuple(bases),
                methods,
            )
        )

    # assignments
    def v_Assign(self, node: ast.Assign) -> None:
        self.visit(node.value)
        for t in node.targets:
            self.assign_target(t, node.value, node)

    def v_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self.visit(node.value)
        self.type_position(node.annotation)
        if node.value is not None:
            self.assign_target(node.target, node.value, node)
        elif isinstance(node.target, ast.Name):
            self.bind(node.target.id, None)

    def v_AugAssign(self, node: ast.AugAssign) -> None:
        self.visit(node.value)
        t = node.target
        if isinstance(t, ast.Attribute):
            dotted, via_handle = self.resolve(t)
            if dotted and self.is_up(dotted) and not via_handle:
                if config_key(dotted):
                    self.use(dotted, node.lineno, write=True)
                else:
                    self.ref(
                        CouplingKind.MONKEYPATCH,
                        dotted,
                        node.lineno,
                        detail="augmented assignment: value",
                    )
                return
        if isinstance(t, ast.Name):
            return
        self.visit(t)

    def v_Return(self, node: ast.Return) -> None:
        if node.value is None:
            return
        if self.frames and isinstance(node.value, (ast.Name, ast.Attribute)):
            dotted, via = self.resolve(node.value)
            if dotted and self.is_up(dotted) and not via:
                self.frames[-1].returns = dotted
        self.visit(node.value)

    def v_NamedExpr(self, node: ast.NamedExpr) -> None:
        self.visit(node.value)
        self.bind(node.target.id, None)

    def assign_target(self, t: ast.AST, value: ast.AST, stmt: ast.stmt) -> None:
        if isinstance(t, ast.Name):
            dotted: str | Local | None = None
            if isinstance(value, (ast.Name, ast.Attribute)):
                dotted, via_handle = self.resolve(value)
                if via_handle:
                    dotted = None
            elif isinstance(value, ast.Call) and not value.args and not value.keywords:
                fn, _ = self.resolve(value.func)  # lowering = _get_inductor_lowering()
                if type(fn) is Local and fn.kind is LocalKind.DEF:
                    dotted = self.returns.get(fn.qualname)
            self.bind(t.id, dotted)
            if self.is_up(dotted):
                self.add_name(t.id)
            if self.frames and dotted is None:
                frame = self.frames[-1]
                deps = self.deps(value)
                if deps:
                    frame.derived[t.id] = deps
            for r in registry_entries(t.id, value, self.path):
                self.registration(r)
            return
        if isinstance(t, (ast.Tuple, ast.List)):
            for e in t.elts:
                if isinstance(e, ast.Name):
                    self.bind(e.id, None)
                elif isinstance(e, ast.Starred) and isinstance(e.value, ast.Name):
                    self.bind(e.value.id, None)
                else:
                    self.assign_target(e, value, stmt)
            return
        if isinstance(t, ast.Attribute):
            dotted, via_handle = self.resolve(t)
            if dotted and self.is_up(dotted) and via_handle:  # V.graph.x = ...: object state
                self.ref(
                    CouplingKind.MONKEYPATCH,
                    dotted,
                    stmt.lineno,
                    detail="instance attribute write via a handle: value",
                )
                return
            if dotted and self.is_up(dotted) and not via_handle:
                if config_key(dotted):
                    self.use(dotted, stmt.lineno, write=True)
                else:
                    self.monkeypatch(dotted, value, stmt.lineno, "assign")
                return
            if dotted_name(t) is None:
                self.visit(t.value)
            return
        if isinstance(t, ast.Subscript):
            regs = item_assignment(t, self.path, self.owner())
            for r in regs:
                self.registration(r)
            self.visit(t.slice)
            if regs:
                return
            dotted, via_handle = self.resolve(t.value)
            if dotted and self.is_up(dotted) and not config_key(dotted):
                how = "of an upstream object via a handle" if via_handle else "of an upstream table"
                self.ref(
                    CouplingKind.MONKEYPATCH,
                    dotted,
                    stmt.lineno,
                    detail=f"item assignment: entry {how}",
                )
            else:
                self.visit(t.value)
            return
        self.visit(t)

    def value_info(self, value: ast.AST, target: str) -> tuple[str, str | Local | None, bool]:
        """(description, binding of the replacement if a def/class, calls the original)."""
        if isinstance(value, (ast.Name, ast.Attribute)):
            dotted, _ = self.resolve(value)
            if dotted is None:
                return "value", None, False
            if type(dotted) is Local:
                return "replaced by", dotted, False
            if self.is_up(dotted):
                return f"value: upstream {dotted}", None, dotted == target
            return "replaced by", dotted, False
        if isinstance(value, ast.Lambda):
            return "replaced by a lambda", None, target in self.chains_in(value)
        if isinstance(value, ast.Call):
            calls_orig = target in self.chains_in(value)
            fn, _ = self.resolve(value.func)
            if type(fn) is Local and fn.kind is LocalKind.CLASS:
                return "value: instance", None, False
            return "replaced by a wrapper", None, calls_orig
        return "value", None, False

    def chains_in(self, node: ast.AST) -> set[str]:
        out = set()
        for n in ast.walk(node):
            if isinstance(n, (ast.Name, ast.Attribute)):
                d, _ = self.resolve(n)
                if d:
                    out.add(d)
        return out

    def monkeypatch(self, target: str, value: ast.AST, line: int, how: str) -> None:
        desc, binding, calls_orig = self.value_info(value, target)
        idx = self.ref(
            CouplingKind.MONKEYPATCH,
            target,
            line,
            detail=f"{how}: {desc}",
            calls_original=calls_orig,
        )
        if binding is None:
            return
        if type(binding) is Local:
            self.local_patches.append((idx, binding))
        else:
            self.patch_values.append((idx, binding))

    def registration(self, r: Registration, note: str = "") -> int:
        """Record a registration; returns the reference's index. ``note`` ends the
        detail (``make_fallback [override_decomp]``)."""
        target = r.key if ":" in r.key else f"op:{r.key}"
        detail = r.registrar + (f" (.{r.overload})" if r.overload else "")
        detail += f" [{note}]" if note else ""
        self.refs.append(
            Reference(
                CouplingKind.REGISTRATION,
                target,
                self.path,
                r.line,
                _snippet(self.lines, r.line),
                detail=detail,
                owner=r.symbol or self.owner(),
            )
        )
        return len(self.refs) - 1

    # calls
    def v_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Name) and func.id == "setattr" and self.lookup("setattr") is None:
            self.setattr_call(node)
        elif (
            isinstance(func, ast.Name)
            and func.id in ("isinstance", "issubclass")
            and len(node.args) == 2
            and self.lookup(func.id) is None
        ):
            classes = node.args[1]
            for c in classes.elts if isinstance(classes, ast.Tuple) else (classes,):
                self.type_nodes.add(id(c))
        elif (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Call)
            and isinstance(func.value.func, ast.Name)
            and func.value.func.id == "super"
            and self.frames
        ):
            self.frames[-1].super_calls.add(func.attr)
        is_dec = id(node) in self.decorator_calls
        if id(node) not in self.skip_calls and not is_dec:
            fn_arg = None  # register_lowering(aten.x)(fn): the registered def
            if isinstance(func, ast.Call) and node.args:
                b, _ = self.resolve(node.args[0])
                fn_arg = b if type(b) is Local and b.kind is LocalKind.DEF else None
            note = OVERRIDE_DECOMP if overrides_decomposition(node) else ""
            for r in registrations_of_call(self.unaliased(node), self.path, None):
                idx = self.registration(
                    replace(r, symbol=self.owner()) if r.symbol is None and self.owner() else r,
                    note if r.registrar in FALLBACK_CALLS else "",
                )
                if fn_arg:
                    self.local_patches.append((idx, fn_arg))
        fn, _ = self.resolve(func)
        if fn is not None and not (type(fn) is Local and fn.kind is LocalKind.CLASS):
            if self.is_up(fn):
                self.note_call(fn)
                self.note_use(fn, func, node)
                self.called.add(id(func))
                ck = config_key(fn[: -len(".patch")] + ".x") if fn.endswith(".patch") else None
                if ck is not None and ck[1] == "x":
                    self.config_patch(node, fn[: -len(".patch")])
            if not self.is_up(fn) and not is_dec:
                site = self.call_site(node)
                if site is not None:
                    self.calls.append(site)
        if isinstance(func, ast.Call):  # register_lowering(aten.x)(fn): inner done above
            self.skip_calls.add(id(func))
        self.generic(node)

    def unaliased(self, call: ast.Call) -> ast.Call:
        """``rl(aten.x)`` where ``rl`` is ``register_lowering`` imported under an alias."""
        func = call.func
        if isinstance(func, ast.Name) and func.id not in registrars():
            b = self.lookup(func.id)
            if b and type(b) is str:
                last = b.rsplit(".", 1)[-1]
                if last in registrars():
                    new = ast.Call(ast.Name(last, ast.Load()), call.args, call.keywords)
                    return ast.copy_location(new, call)
        return call

    def config_patch(self, node: ast.Call, module: str) -> None:
        keys: list[str] = []
        if node.args:
            a0 = node.args[0]
            if isinstance(a0, ast.Dict):
                keys += [
                    k.value
                    for k in a0.keys
                    if isinstance(k, ast.Constant) and isinstance(k.value, str)
                ]
            elif isinstance(a0, ast.Constant) and isinstance(a0.value, str):
                keys.append(a0.value)
        keys += [kw.arg for kw in node.keywords if kw.arg]
        for k in keys:
            self.refs.append(
                Reference(
                    CouplingKind.CONFIG,
                    f"{module}.{k}",
                    self.path,
                    node.lineno,
                    _snippet(self.lines, node.lineno),
                    detail="patch",
                    owner=self.owner(),
                )
            )

    def setattr_call(self, node: ast.Call) -> None:
        if len(node.args) != 3:
            return
        obj, name, value = node.args
        dotted, via_handle = self.resolve(obj)
        if dotted and self.is_up(dotted) and not via_handle:
            if isinstance(name, ast.Constant) and isinstance(name.value, str):
                target = f"{dotted}.{name.value}"
                if config_key(target):
                    self.use(target, node.lineno, write=True)
                else:
                    self.monkeypatch(target, value, node.lineno, "setattr")
            else:
                self.ref(
                    CouplingKind.MONKEYPATCH,
                    dotted,
                    node.lineno,
                    detail="setattr (dynamic name): value",
                )
            return
        if not self.frames:
            return
        # a patch helper? setattr(<from a parameter>, <from a parameter>, value)
        obj_deps, name_deps = self.deps(obj), self.deps(name)
        for frame in self.frames:
            o = [p for p in frame.params if p in obj_deps]
            n = [p for p in frame.params if p in name_deps]
            if not n or not (o_only := [p for p in o if p not in n] or o):
                continue
            val = value.id if isinstance(value, ast.Name) and value.id in frame.params else None
            frame.helper = HelperSpec(frame.params, o_only[0], n[0], val, dotted_name=n[0] in o)
            break

    def deps(self, node: ast.AST) -> set[str]:
        """Parameters (of the enclosing functions) an expression is computed from."""
        out: set[str] = set()
        for n in ast.walk(node):
            if isinstance(n, ast.Name):
                for frame in reversed(self.frames):
                    if n.id in frame.params:
                        out.add(n.id)
                        break
                    if n.id in frame.derived:
                        out |= frame.derived[n.id]
                        break
        return out

    def arg_info(self, node: ast.AST) -> Arg | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return Arg(ArgKind.STRING, node.value)
        if isinstance(node, (ast.Name, ast.Attribute)):
            dotted, via = self.resolve(node)
            if dotted is None or via:
                return None
            if type(dotted) is Local:
                return Arg(ArgKind.LOCAL, dotted)
            return Arg(ArgKind.UPSTREAM if self.is_up(dotted) else ArgKind.DOWNSTREAM, dotted)
        return None

    def call_site(self, node: ast.Call, decorated: str | None = None) -> CallSite | None:
        fn, _ = self.resolve(node.func)
        if fn is None or self.is_up(fn) or (type(fn) is Local and fn.kind is LocalKind.CLASS):
            return None
        args = tuple(self.arg_info(a) for a in node.args)
        kws = tuple((kw.arg, self.arg_info(kw.value)) for kw in node.keywords if kw.arg)
        infos = [a for a in args if a] + [a for _, a in kws if a]
        kinds = {a.kind for a in infos}
        if ArgKind.UPSTREAM not in kinds or ArgKind.STRING not in kinds:
            return None
        return CallSite(
            fn, args, kws, node.lineno, _snippet(self.lines, node.lineno), self.owner(), decorated
        )


_DISPATCH = {
    getattr(ast, name[2:]): meth
    for name, meth in vars(_Visitor).items()
    if name.startswith("v_") and hasattr(ast, name[2:])
}


def _children(node: ast.AST):
    """ast.iter_child_nodes without the generator-per-field overhead."""
    for name in node._fields:
        value = getattr(node, name, None)
        if isinstance(value, ast.AST):
            yield value
        elif isinstance(value, list):
            for item in value:
                if isinstance(item, ast.AST):
                    yield item


# ----------------------------------------------------------------------------- resolution


def _helper_patch(
    site: CallSite, spec: HelperSpec, helper_name: str, path: str
) -> tuple[str, Arg | None] | None:
    """(upstream target, replacement arg) of a call to a patch helper, or None."""
    bound: dict[str, Arg | None] = {}
    for p, a in zip(spec.params, site.args, strict=False):
        bound[p] = a
    for k, a in site.keywords:
        bound[k] = a
    obj, name = bound.get(spec.obj), bound.get(spec.name)
    if not obj or obj.kind is not ArgKind.UPSTREAM or not name or name.kind is not ArgKind.STRING:
        return None
    target = f"{obj.value}.{name.value}"
    value = bound.get(spec.value) if spec.value else None
    if spec.value is None and site.decorated:
        value = Arg(ArgKind.LOCAL, Local(LocalKind.DEF, site.decorated))
    return target, value


def _apply_function(ref: Reference, fn: DownstreamFunction, where: str) -> Reference:
    calls_orig = (
        ref.calls_original
        or ref.target in fn.upstream_calls
        or ref.target.rsplit(".", 1)[-1] in fn.super_calls
    )
    return replace(
        ref,
        signature=fn.signature,
        body_hash=fn.body_hash,
        calls_original=calls_orig,
        detail=f"{ref.detail} {where}".strip(),
    )


def _local_function(
    binding: Local, functions: dict[str, DownstreamFunction]
) -> DownstreamFunction | None:
    """The def of this file a local binding denotes (``outer.f``, ``C.m``), if any."""
    return functions.get(binding.qualname)


def _ancestors(
    cls: str, classes: dict[str, DownstreamClass], roots: frozenset[str], depth: int = 0
) -> list[str]:
    """Upstream ancestors of a downstream class (nearest first), through downstream bases."""
    info = classes.get(cls)
    if info is None or depth > 20:
        return []
    out: list[str] = []
    for b in info.bases:
        if b.split(".", 1)[0] in roots:
            out.append(b)
        else:
            out.extend(a for a in _ancestors(b, classes, roots, depth + 1) if a not in out)
    return out


def _subclass_refs(
    info: DownstreamClass,
    ancestors: list[str],
    functions: dict[str, DownstreamFunction],
    lines_snippet: str,
    gate_of,
    via: str,
) -> list[Reference]:
    base = ancestors[0]
    detail = "subclass" + (f" (via {via})" if via else "")
    out = [
        Reference(
            CouplingKind.SUBCLASS_OVERRIDE,
            base,
            info.path,
            info.line,
            lines_snippet,
            detail=detail,
            owner=info.qualname,
            gate=gate_of(info.line),
        )
    ]
    for mq in info.methods:
        fn = functions.get(mq)
        if fn is None:
            continue
        name = mq.rsplit(".", 1)[-1]
        target = f"{base}.{name}"
        calls_orig = name in fn.super_calls or any(
            c == f"{a}.{name}" for a in ancestors for c in fn.upstream_calls
        )
        out.append(
            Reference(
                CouplingKind.SUBCLASS_OVERRIDE,
                target,
                info.path,
                fn.line,
                fn.snippet,
                detail="overrides method",
                owner=mq,
                signature=fn.signature,
                body_hash=fn.body_hash,
                calls_original=calls_orig,
                gate=gate_of(fn.line),
            )
        )
    return out


def index_downstream_file(
    path: str, data: bytes, upstream_roots: tuple[str, ...] = ("torch",)
) -> DownstreamFileIndex:
    """Index one downstream file. Never raises on bad input: ``error`` says what went wrong."""
    out = DownstreamFileIndex(path, module=module_of(path))
    if len(data) > MAX_FILE_BYTES:
        out.error = f"{path}: skipped, {len(data)} bytes (expected a Python source file)"
        return out
    if b"\x00" in data[:8192]:
        out.error = f"{path}: skipped, binary content (expected a Python source file)"
        return out
    try:
        source = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        out.error = f"{path}: skipped, not UTF-8 text (expected a Python source file)"
        return out
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(source, filename=path)
    except (SyntaxError, ValueError, RecursionError) as exc:
        line = getattr(exc, "lineno", None)
        at = f":{line}" if line else ""
        out.error = f"{path}{at}: skipped, not valid Python 3 ({getattr(exc, 'msg', exc)})"
        return out
    v = _Visitor(path, source, tuple(upstream_roots))
    try:
        v.prepare(tree, source)
        v.visit_list(tree.body)
    except RecursionError:
        out.error = f"{path}: skipped, nesting too deep to analyse"
        return out
    spans = gate_spans(tree, path, source)
    lookup = GateLookup(spans)
    functions = {f.qualname: f for f in v.functions}
    refs = v.refs
    for idx, binding in v.local_patches:
        fn = _local_function(binding, functions)
        if fn is not None and refs[idx].kind is CouplingKind.REGISTRATION:
            refs[idx] = replace(refs[idx], signature=fn.signature, body_hash=fn.body_hash)
        elif fn is not None:
            refs[idx] = _apply_function(refs[idx], fn, f"{path}::{fn.qualname}")
        elif binding.kind is LocalKind.CLASS:
            refs[idx] = replace(refs[idx], detail=f"{refs[idx].detail} class {binding.qualname}")
    # same-file patch helpers
    for site in v.calls:
        if type(site.callee) is not Local or site.callee.kind is not LocalKind.DEF:
            continue
        helper = site.callee.qualname
        spec = v.helpers.get(helper)
        if spec is None:
            continue
        got = _helper_patch(site, spec, helper, path)
        if got is None:
            continue
        target, value = got
        ref = Reference(
            CouplingKind.MONKEYPATCH,
            target,
            path,
            site.line,
            site.snippet,
            detail=f"patch helper {helper}: value",
            owner=site.owner,
        )
        if value and value.kind is ArgKind.LOCAL:
            fn = _local_function(value.value, functions)  # type: ignore[arg-type]
            if fn is not None:
                ref = replace(ref, detail=f"patch helper {helper}: replaced by")
                ref = _apply_function(ref, fn, f"{path}::{fn.qualname}")
        elif value and value.kind is ArgKind.DOWNSTREAM:
            ref = replace(ref, detail=f"patch helper {helper}: replaced by")
            v.patch_values.append((len(refs), value.value))  # type: ignore[arg-type]
        refs.append(ref)
    # subclasses resolvable in this file
    local_classes = {f"{out.module}.{c.qualname}": c for c in v.classes}
    roots = frozenset(upstream_roots)
    for c in v.classes:
        anc = _ancestors(f"{out.module}.{c.qualname}", local_classes, roots)
        if anc:
            c.upstream_direct = True
            direct = any(b.split(".", 1)[0] in roots for b in c.bases)
            refs.extend(
                _subclass_refs(
                    c, anc, functions, c.snippet, lookup.at, "" if direct else "downstream base"
                )
            )
    if spans:
        refs = [r if r.gate else replace(r, gate=lookup.at(r.line)) for r in refs]
        v.pending = [replace(r, gate=lookup.at(r.line)) for r in v.pending]
    refs = [
        replace(r, call_shapes=v.call_shapes_of(r))
        if r.kind is CouplingKind.IMPORT_USE
        and (r.detail == "use" or r.detail.startswith(("from ", "import ")))
        else r
        for r in refs
    ]
    out.references = refs
    out.functions = v.functions
    out.gates = [s.gate for s in spans]
    out.gate_spans = spans
    out.lines_fingerprint = forks.lines_fingerprint_of(v.norm)
    out.exports = {k: val for k, val in v.scopes[0][0].items() if val is not None}
    out.classes = v.classes
    out.helpers = v.helpers
    out.calls = [c for c in v.calls if type(c.callee) is not Local]
    out.pending = v.pending
    out.patch_values = v.patch_values
    out.dn_imports = v.dn_imports
    return out


# ----------------------------------------------------------------------------- whole tree


class DownstreamIndex:
    """The coupling index of a whole downstream tree, with cross-file resolution."""

    def __init__(
        self, files: dict[str, DownstreamFileIndex], upstream_roots: tuple[str, ...] = ("torch",)
    ) -> None:
        self.files = files
        self.roots = frozenset(upstream_roots)
        self.by_module = {f.module: f for f in files.values()}
        self._refs: list[Reference] | None = None
        self.sources: dict[str, str] = {}  # optional: path -> text, for snippets
        self._functions: dict[tuple[str, str], DownstreamFunction] | None = None

    @property
    def errors(self) -> list[str]:
        return [f.error for f in self.files.values() if f.error]

    def functions(self) -> list[DownstreamFunction]:
        return [fn for f in self.files.values() for fn in f.functions]

    def _fn_map(self) -> dict[tuple[str, str], DownstreamFunction]:
        if self._functions is None:
            self._functions = {
                (f.module, fn.qualname): fn for f in self.files.values() for fn in f.functions
            }
        return self._functions

    def resolve(self, dotted: str) -> str:
        """Follow downstream re-exports until an upstream or a downstream-defined name."""
        for _ in range(12):
            if dotted.split(".", 1)[0] in self.roots:
                return apply_handles(dotted)[0]
            parts = dotted.split(".")
            for i in range(len(parts) - 1, 0, -1):
                f = self.by_module.get(".".join(parts[:i]))
                if f is None:
                    continue
                b = f.exports.get(parts[i])
                if b is None:
                    return dotted
                if type(b) is Local:
                    return ".".join([f.module, b.qualname, *parts[i + 1 :]])
                dotted = ".".join([b, *parts[i + 1 :]])
                break
            else:
                return dotted
        return dotted

    def _defined(self, dotted: str) -> DownstreamFunction | None:
        """The downstream def a resolved dotted name denotes (module.qualname)."""
        parts = dotted.split(".")
        fmap = self._fn_map()
        for i in range(len(parts) - 1, 0, -1):
            mod = ".".join(parts[:i])
            if mod in self.by_module:
                return fmap.get((mod, ".".join(parts[i:])))
        return None

    def _helper(self, dotted: str) -> tuple[HelperSpec, str] | None:
        parts = dotted.split(".")
        for i in range(len(parts) - 1, 0, -1):
            f = self.by_module.get(".".join(parts[:i]))
            if f is not None:
                q = ".".join(parts[i:])
                spec = f.helpers.get(q)
                return (spec, f"{f.path}::{q}") if spec else None
        return None

    def references(self) -> list[Reference]:
        if self._refs is not None:
            return self._refs
        out: list[Reference] = []
        for f in self.files.values():
            refs = list(f.references)
            for idx, dn in f.patch_values:  # replacement defined in another file
                fn = self._defined(self.resolve(dn))
                if fn is not None:
                    refs[idx] = _apply_function(refs[idx], fn, f"{fn.path}::{fn.qualname}")
            out.extend(refs)
            seen: set[tuple[str, str | None]] = set()
            for r in f.pending:  # uses through downstream re-exports of upstream names
                target = self.resolve(r.target)
                if target.split(".", 1)[0] in self.roots and (target, r.owner) not in seen:
                    seen.add((target, r.owner))
                    ck = config_key(target)
                    kind = CouplingKind.CONFIG if ck else CouplingKind.IMPORT_USE
                    out.append(
                        replace(
                            r,
                            kind=kind,
                            target=target,
                            detail=f"{'read' if ck else 'use'} via {r.target}",
                        )
                    )
            lines = None
            for dn, line, owner in f.dn_imports:  # `from .x import V` where x re-exports upstream
                target = self.resolve(dn)
                if target.split(".", 1)[0] in self.roots:
                    snippet = next((r.snippet for r in f.pending if r.line == line), "")
                    if not snippet:
                        lines = lines if lines is not None else self._lines(f.path)
                        snippet = _snippet(lines, line)
                    out.append(
                        Reference(
                            CouplingKind.IMPORT_USE,
                            target,
                            f.path,
                            line,
                            snippet,
                            detail=f"import of {dn} (re-export)",
                            owner=owner,
                        )
                    )
            for site in f.calls:  # patch helpers defined in another file
                callee = self.resolve(site.callee)
                got_spec = self._helper(callee)
                if got_spec is None:
                    continue
                spec, where = got_spec
                got = _helper_patch(site, spec, where, f.path)
                if got is None:
                    continue
                target, value = got
                ref = Reference(
                    CouplingKind.MONKEYPATCH,
                    target,
                    f.path,
                    site.line,
                    site.snippet,
                    detail=f"patch helper {where}: value",
                    owner=site.owner,
                )
                fn = None
                if value and value.kind is ArgKind.LOCAL:
                    fn = self._fn_map().get((f.module, value.value.qualname))  # type: ignore[union-attr]
                elif value and value.kind is ArgKind.DOWNSTREAM:
                    fn = self._defined(self.resolve(value.value))  # type: ignore[arg-type]
                if fn is not None:
                    ref = replace(ref, detail=f"patch helper {where}: replaced by")
                    ref = _apply_function(ref, fn, f"{fn.path}::{fn.qualname}")
                out.append(ref)
        # subclass chains through classes of other files
        classes = self._class_map()
        by_module: dict[str, dict[str, DownstreamFunction]] = {}
        for (m, q), fn in self._fn_map().items():
            by_module.setdefault(m, {})[q] = fn
        for f in self.files.values():
            funcs = by_module.get(f.module, {}) if f.classes else {}
            for c in f.classes:
                if c.upstream_direct:
                    continue
                anc = _ancestors(f"{f.module}.{c.qualname}", classes, self.roots)
                if anc:
                    gate_at = GateLookup(f.gate_spans).at
                    out.extend(_subclass_refs(c, anc, funcs, c.snippet, gate_at, "downstream base"))
        self._refs = out
        return out

    def _lines(self, path: str) -> list[str]:
        return self.sources.get(path, "").splitlines() if self.sources else []

    def _class_map(self) -> dict[str, DownstreamClass]:
        out: dict[str, DownstreamClass] = {}
        for f in self.files.values():
            for c in f.classes:
                c2 = replace(c, bases=tuple(self.resolve(b) for b in c.bases))
                out[f"{f.module}.{c.qualname}"] = c2
        return out

    def classes(self) -> dict[str, list[str]]:
        """Downstream class (module.qualname) -> its upstream ancestors, nearest first."""
        cmap = self._class_map()
        out = {}
        for name in cmap:
            anc = _ancestors(name, cmap, self.roots)
            if anc:
                out[name] = anc
        return out

    def counts(self) -> dict[str, int]:
        """Figures for reports: references per kind and a few derived counts."""
        refs = self.references()
        c: dict[str, int] = defaultdict(int)
        for r in refs:
            c[str(r.kind)] += 1
        c["monkeypatch_replacing"] = sum(
            1 for r in refs if r.kind is CouplingKind.MONKEYPATCH and "replaced by" in r.detail
        )
        c["import_lines"] = sum(
            1
            for r in refs
            if r.kind is CouplingKind.IMPORT_USE
            and r.detail != "use"
            and not r.detail.startswith("use via")
        )
        c["files"] = len(self.files)
        c["errors"] = len(self.errors)
        return dict(c)


def _index_one(args: tuple[str, bytes, tuple[str, ...]]) -> DownstreamFileIndex:
    path, data, roots = args
    try:
        return index_downstream_file(path, data, roots)
    except Exception as exc:  # a visitor bug must not lose the other files
        log.debug("indexing %s failed", path, exc_info=True)
        return DownstreamFileIndex(
            path, module=module_of(path), error=f"{path}: skipped, cannot index ({exc!r})"
        )


def _index_chunk(
    chunk: list[tuple[str, bytes, tuple[str, ...]]],
    keys: dict[str, str] | None = None,
    cache: ContentCache | None = None,
) -> list[DownstreamFileIndex]:
    """Index a chunk of files; with a cache, write each result there (in the worker, so
    that a cold run's cache writes are parallel too)."""
    with no_cyclic_gc():
        out = [_index_one(a) for a in chunk]
    if cache is not None and keys is not None:
        for r in out:
            cache.put(keys[r.path], r)
    return out


def index_downstream(
    items: Iterable[tuple[str, bytes]],
    cache: ContentCache | None = None,
    jobs: int | None = None,
    upstream_roots: tuple[str, ...] = ("torch",),
) -> DownstreamIndex:
    """Index every (path, content) of a downstream tree; cached by content, in parallel."""
    roots = tuple(upstream_roots)
    files: dict[str, DownstreamFileIndex] = {}
    todo: list[tuple[str, bytes, tuple[str, ...]]] = []
    keys: dict[str, str] = {}
    tag = f"{FORMAT}|{','.join(roots)}|".encode()
    for path, data in items:
        key = content_hash(tag + path.encode() + b"\0" + data)
        keys[path] = key
        hit = cache.get(key) if cache is not None else None
        if isinstance(hit, DownstreamFileIndex):
            files[path] = hit
        else:
            todo.append((path, data, roots))
    jobs = jobs or os.cpu_count() or 1
    results: list[DownstreamFileIndex]
    stored = False
    if jobs <= 1 or len(todo) < 8:
        with no_cyclic_gc():
            results = [_index_one(a) for a in todo]
    else:
        todo.sort(key=lambda a: -len(a[1]))  # big files first, spread round-robin
        n = min(len(todo), jobs * 4)
        chunks = [todo[i::n] for i in range(n)]
        try:
            import multiprocessing

            ctx = multiprocessing.get_context("fork") if os.name == "posix" else None
            with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
                work = [
                    pool.submit(_index_chunk, c, {a[0]: keys[a[0]] for a in c}, cache)
                    for c in chunks
                ]
                results = [r for w in work for r in w.result()]
            stored = cache is not None
        except (OSError, RuntimeError) as exc:  # no processes available: do it here
            log.warning("cannot start %d index workers (%s); indexing in one process", jobs, exc)
            results = [_index_one(a) for a in todo]
    for r in results:
        files[r.path] = r
        if r.error:
            log.warning("%s", r.error)
        if cache is not None and not stored:
            cache.put(keys[r.path], r)
    ordered = {p: files[p] for p in keys if p in files}
    return DownstreamIndex(ordered, roots)
