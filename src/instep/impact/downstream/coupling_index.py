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
import logging
import multiprocessing
import os
import warnings
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace

from instep.impact.downstream import forks, imported_flags, install_gates
from instep.impact.downstream.ast_children import fields_of
from instep.impact.downstream.c_shim_names import CShimNames
from instep.impact.downstream.definitions import Definitions
from instep.impact.downstream.handles import config_key, handle_classes
from instep.impact.downstream.imports import ImportUses
from instep.impact.downstream.monkeypatches import MOCK_PATCHERS, Monkeypatches
from instep.impact.downstream.op_refs import op_references
from instep.impact.downstream.patch_helpers import (
    apply_local_patches,
    base_mixin_patches,
    same_file_helper_patches,
)
from instep.impact.downstream.pruning import BLOCK_STMTS, SIMPLE_STMTS, TRY_STMTS
from instep.impact.downstream.records import DownstreamFileIndex, Local, LocalKind
from instep.impact.downstream.subclasses import local_subclass_refs
from instep.impact.downstream.tree_index import DownstreamIndex
from instep.impact.downstream.version_conditions import version_helpers
from instep.impact.downstream.version_gates import (
    GateLookup,
    catches_import_error,
    gate_spans,
    may_gate,
)
from instep.impact.downstream.version_refusals import flags_and_refusals
from instep.impact.model import CouplingKind, Reference, VersionGate
from instep.impact.no_gc import no_cyclic_gc
from instep.pyindex.cache import ContentCache, content_hash
from instep.pyindex.model import module_of
from instep.pyindex.registrations import (
    FALLBACK_CALLS,
    OVERRIDE_DECOMP,
    overrides_decomposition,
    registrations_of_call,
)
from instep.pyindex.signatures import call_shape

log = logging.getLogger(__name__)

FORMAT = "coupling-index-v22"  # bump when any cached class changes shape or content
MAX_FILE_BYTES = 8 * 1024 * 1024


def _typed(r: Reference, v: _Visitor) -> Reference:
    """An import_use reference with how its place calls the target, and whether it names
    it only in type positions."""
    r = _with(r, "call_shapes", v.call_shapes_of(r))
    return _with(r, "type_only", True) if r.through is None and v.type_only(r) else r


def _with(r: Reference, name: str, value: object) -> Reference:
    """``dataclasses.replace(r, name=value)``, three times cheaper: ``Reference`` is a
    frozen dataclass without ``__post_init__``, so a copy of its fields (same order, same
    objects) with one changed is what ``replace`` and ``__init__`` would build."""
    new = object.__new__(type(r))
    fields = new.__dict__
    fields.update(r.__dict__)
    fields[name] = value
    return new


def _gate_of(r: Reference, v: _Visitor, lookup: GateLookup) -> VersionGate | None:
    """The gate around ``r``'s line; for a use of a name bound by ``try: from a import x
    except ImportError: from b import x``, the ``try`` import's gate (the name only
    exists when that import or its fallback worked: removed.guarded, not removed.breaks)."""
    line = v.uses_behind_fallback.get((r.target, r.line))
    return lookup.at(line if line is not None and r.detail == "use" else r.line)


class _Visitor(ImportUses, CShimNames, Definitions, Monkeypatches):
    """One file's visit: the recognisers of every coupling kind over one scope."""

    def visit(self, node: ast.AST) -> None:
        t = type(node)
        meth = _DISPATCH.get(t)
        if t in _STMTS:  # one set test for the expressions, the most visited; a statement
            # here is simple or a block (TRY_STMTS taken first)
            if t in TRY_STMTS:
                self.v_Try(node)  # type: ignore[arg-type]
                return
            if not self.full and not self._touches(
                self.hot, node.lineno, node.end_lineno or node.lineno
            ):
                if t in SIMPLE_STMTS:
                    return
                # nothing upstream is named in it: only its defs and classes matter
                for field in ("body", "orelse", "finalbody"):
                    for child in getattr(node, field, ()) or ():
                        self.visit(child)
                for h in getattr(node, "handlers", ()) or ():
                    self.visit_list(h.body)
                for c in getattr(node, "cases", ()) or ():
                    self.visit_list(c.body)
                return
        if meth is not None:
            meth(self, node)
            return
        # the children, as _children gives them (inlined: most nodes come here)
        visit = self.visit
        for name in fields_of(t):
            value = getattr(node, name, None)
            if isinstance(value, ast.AST):
                visit(value)
            elif isinstance(value, list):
                for item in value:
                    if isinstance(item, ast.AST):
                        visit(item)

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
        for name, value in primary.items():
            # the handler imports the same name from elsewhere: a use goes through whichever
            # import worked (a handler that sets it to None or a local leaves the use bare)
            other = scope.get(name)
            if isinstance(value, str) and isinstance(other, str) and other != value:
                self.import_fallbacks[(name, value)] = node.body[0].lineno
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
            self.frames[-1].super_call_shapes.add((func.attr, call_shape(node)))
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
        fn, via_handle = self.resolve(func)
        if type(fn) is str and fn in MOCK_PATCHERS:
            self.mock_patch(node, MOCK_PATCHERS[fn])
        if fn is not None and not (type(fn) is Local and fn.kind is LocalKind.CLASS):
            if self.is_up(fn):
                self.note_call(fn)
                self.note_use(fn, func, node, instance=via_handle and fn in handle_classes())
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


_DISPATCH = {
    getattr(ast, name[2:]): meth
    for klass in reversed(_Visitor.__mro__)
    for name, meth in vars(klass).items()
    if name.startswith("v_") and hasattr(ast, name[2:])
}


_STMTS = TRY_STMTS | SIMPLE_STMTS | BLOCK_STMTS


def _children(node: ast.AST):
    """ast.iter_child_nodes without the generator-per-field overhead (and without the
    context and operator leaves, see :mod:`ast_children`)."""
    for name in fields_of(type(node)):
        value = getattr(node, name, None)
        if isinstance(value, ast.AST):
            yield value
        elif isinstance(value, list):
            for item in value:
                if isinstance(item, ast.AST):
                    yield item


def _parse(path: str, data: bytes) -> tuple[str, ast.Module] | str:
    """(source, tree) of a downstream file, or why it is skipped."""
    if len(data) > MAX_FILE_BYTES:
        return f"{path}: skipped, {len(data)} bytes (expected a Python source file)"
    if b"\x00" in data[:8192]:
        return f"{path}: skipped, binary content (expected a Python source file)"
    try:
        source = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return f"{path}: skipped, not UTF-8 text (expected a Python source file)"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return source, ast.parse(source, filename=path)
    except (SyntaxError, ValueError, RecursionError) as exc:
        line = getattr(exc, "lineno", None)
        at = f":{line}" if line else ""
        return f"{path}{at}: skipped, not valid Python 3 ({getattr(exc, 'msg', exc)})"


def _version_gates_of(
    tree: ast.Module,
    path: str,
    source: str,
    v: _Visitor,
    exports: dict,
    upstream_roots: tuple[str, ...],
) -> tuple:
    """The file's version helpers, flags, refusals, gate spans and flag uses: its own
    helpers and flags, and placeholders for flags and helpers imported from other
    downstream modules (resolved at tree level, ``imported_flags``)."""
    helpers = version_helpers(tree, source) if may_gate(source) else ({}, set())
    flags, refusals = flags_and_refusals(tree, path, source, tuple(upstream_roots), helpers)
    imported = imported_flags.candidates(tree, exports, upstream_roots, flags, v.walk_statements)
    bound = imported_flags.downstream_bindings(exports, tuple(upstream_roots), flags)
    helper_calls = imported_flags.helper_candidates(bound, v.walk_statements) if bound else {}
    spans = gate_spans(
        tree,
        path,
        source,
        {**imported, **flags},
        v.walk_statements,
        helper_calls=helper_calls,
        helpers=helpers,
    )
    spans, flag_uses = imported_flags.split(spans)
    return helpers, flags, refusals, spans, flag_uses


def index_downstream_file(
    path: str, data: bytes, upstream_roots: tuple[str, ...] = ("torch",)
) -> DownstreamFileIndex:
    """Index one downstream file. Never raises on bad input: ``error`` says what went wrong."""
    out = DownstreamFileIndex(path, module=module_of(path))
    parsed = _parse(path, data)
    if isinstance(parsed, str):
        out.error = parsed
        out.name_hashes = install_gates.name_hashes(data.decode("utf-8", "replace"))
        return out
    source, tree = parsed
    out.name_hashes = install_gates.name_hashes(source)
    v = _Visitor(path, source, tuple(upstream_roots))
    try:
        v.prepare(tree, source)
        v.visit_list(tree.body)
    except RecursionError:
        out.error = f"{path}: skipped, nesting too deep to analyse"
        return out
    exports = {k: val for k, val in v.scopes[0][0].items() if val is not None}
    helpers, flags, refusals, spans, flag_uses = _version_gates_of(
        tree, path, source, v, exports, upstream_roots
    )
    lookup = GateLookup(spans)
    functions = {f.qualname: f for f in v.functions}
    refs = v.refs
    apply_local_patches(refs, v.local_patches, functions, path)
    same_file_helper_patches(refs, v.calls, v.helpers, functions, v.patch_values, path)
    refs.extend(base_mixin_patches(v.base_mixins, functions, path, v.lines))
    refs.extend(local_subclass_refs(v.classes, out.module, functions, upstream_roots, lookup.at))
    refs.extend(op_references(tree, path, source))
    if spans:
        refs = [r if r.gate else _with(r, "gate", _gate_of(r, v, lookup)) for r in refs]
        v.pending = [_with(r, "gate", lookup.at(r.line)) for r in v.pending]
    out.references = [
        _typed(r, v)
        if r.kind is CouplingKind.IMPORT_USE
        and (r.detail == "use" or r.detail.startswith(("from ", "import ")))
        else r
        for r in refs
    ]
    out.functions = v.functions
    out.gates = [s.gate for s in spans]
    out.gate_spans = spans
    if spans or flag_uses:
        out.def_mentions = install_gates.def_mentions(tree, source)
    out.refusals = refusals
    out.lines_fingerprint = forks.lines_fingerprint_of(v.norm)
    out.exports = exports
    out.flags = flags
    out.flag_uses = flag_uses
    out.version_helpers, out.not_version_helpers = helpers[0], frozenset(helpers[1])
    out.classes = v.classes
    out.helpers = v.helpers
    out.calls = [c for c in v.calls if type(c.callee) is not Local]
    out.pending = v.pending
    out.patch_values = v.patch_values
    out.dn_imports = v.dn_imports
    return out


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
