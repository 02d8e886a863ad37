"""Static symbol index of one Python file: what it defines, imports and registers.

:func:`index_source` turns the bytes of one upstream (or downstream) file into a
:class:`FileIndex`: module-level functions, classes, methods (nested classes too),
functions nested in functions (``outer.inner``), module-level assignments (config values,
op registries; tuple targets split), class attributes, and every other module-level
statement as a BLOCK (registration calls are named ``make_fallback(aten.uniform)``, other
blocks after their header: ``<if config.x>``; repeated names get ``#2``, ``#3``...;
``@overload`` stubs (``@_overload`` too) are ``name@overload``, property accessors
``Class.name.setter``).
Each :class:`~instep.pyindex.model.Symbol` carries a normalised ``body_hash`` (AST without
positions, docstring, comments or formatting; decorators, signature, return annotation
and nested definitions excluded: a change inside a member is the member's change), its
signature, return annotation, decorators, bases, value, called names and registrations.

:func:`index_against` indexes a file *reusing* the index of a related version: top-level
statements whose text is unchanged are taken over with their lines shifted, only the
remaining regions are parsed. It is sound because every reused chunk is a complete
top-level statement of the reference version and every re-parsed region must parse on its
own; otherwise it falls back to a full parse (see the function's docstring).

This module never imports or executes the code it reads, and does not diff (see
``instep.impact.upstream.symbol_diff``) or run in parallel (see
``instep.impact.upstream.release_diff``).
"""

from __future__ import annotations

import ast
import hashlib
import io
import logging
import tokenize
from collections.abc import Callable
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any, TypeVar

from instep.pyindex.dataclass_init import dataclass_inits
from instep.pyindex.model import Registration, Symbol, SymbolKind, module_of
from instep.pyindex.neutral import (
    Names,
    as_assert,
    assert_without_message,
    cast_value,
    documented_value,
    is_stub_body,
    is_type_checking,
    local_annotation,
    rename_locals,
)
from instep.pyindex.registrations import (
    dotted_name,
    item_assignment,
    registrations_of_call,
    registrations_of_decorators,
    registry_entries,
)
from instep.pyindex.unparse import unparse

log = logging.getLogger(__name__)

# Bump when the shape or the meaning of a FileIndex changes (cache namespaces carry it).
# 3: the __init__ that @dataclass synthesises (pyindex.dataclass_init); 4: deprecations;
# 5: neutral rewrites seen through, Symbol.stub (pyindex.neutral); 6: _add_docstr(x, doc)
FORMAT_VERSION = 6

VALUE_DISPLAY_CHARS = 300  # Symbol.value is truncated for display; the hash sees all of it
BLOCK_NAME_CHARS = 80


@dataclass
class Chunk:
    """One top-level statement group (whole lines) and what it contributed to the index."""

    start: int  # first line (decorators included)
    end: int  # last line
    symbols: list[Symbol]  # with base qualnames (before '#n' numbering)
    imports: list[tuple[str, str]]
    registrations: list[Registration]


@dataclass
class Unit:
    """A def or class nested in a class or function, reusable by :func:`index_against`."""

    start: int  # first line (decorators included)
    end: int
    prefix: str  # qualname prefix of its parent ('Outer.')
    token: str  # what its parent's body hash records for it
    symbols: list[Symbol]  # itself first, then what it contains (base qualnames)


@dataclass
class FileIndex:
    """The static index of one version of one file."""

    path: str  # upstream relative path 'torch/_inductor/lowering.py'
    symbols: dict[str, Symbol]  # qualname -> Symbol
    imports: dict[str, str]  # module-level local name -> absolute dotted target
    registrations: list[Registration]  # every registration in the file
    error: str | None = None  # decode/syntax problem: symbols empty, warning logged
    chunks: list[Chunk] = field(default_factory=list, repr=False)  # top-level statements
    units: list[Unit] = field(default_factory=list, repr=False)  # nested defs and classes

    @property
    def module(self) -> str:
        return module_of(self.path)

    def bound_in_block(self, name: str) -> Symbol | None:
        """The module-level ``if``/``try`` block one of whose branches defines ``name``."""
        for sym in self.symbols.values():
            if name in sym.binds:
                return sym
        return None

    def members(self, qualname: str) -> list[Symbol]:
        """Symbols directly or indirectly inside ``qualname`` (methods of a class, ...)."""
        prefix = qualname + "."
        return [s for q, s in self.symbols.items() if q.startswith(prefix)]


# ---------------------------------------------------------------- decoding


class UndecodableSource(ValueError):
    """The bytes are not text in the encoding Python would use for them."""


def decode_source(data: bytes) -> str:
    """Source text as Python reads it: PEP 263 cookie or BOM honoured, newlines normalised.

    Raises ``UnicodeDecodeError``/``SyntaxError``/``LookupError`` on undecodable input.
    """
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as exc:  # undecodable first lines or a bad cookie
        raise UndecodableSource(exc.msg) from None
    text = data.decode(encoding)
    if text.startswith("\ufeff"):
        text = text[1:]
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text


def _error_index(path: str, message: str) -> FileIndex:
    log.warning("skipping %s: %s", path, message)
    return FileIndex(path, {}, {}, [], error=message)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, SyntaxError):
        where = f" (line {exc.lineno})" if exc.lineno else ""
        return f"not valid Python 3: {exc.msg}{where}"
    if isinstance(exc, UnicodeDecodeError):
        return f"not decodable as {exc.encoding} (byte {exc.start})"
    if isinstance(exc, UndecodableSource):
        return f"not decodable source text: {exc}"
    if isinstance(exc, LookupError):
        return f"unknown source encoding: {exc}"
    if isinstance(exc, RecursionError):
        return "too deeply nested to analyse"
    return f"cannot be parsed: {' '.join(str(exc).split())}"


_PARSE_ERRORS = (SyntaxError, UnicodeDecodeError, LookupError, ValueError, RecursionError)


# ---------------------------------------------------------------- normalised hashing

_SKIP_FIELDS = frozenset({"ctx", "kind", "type_comment"})
# per node class: its name and a getter of its fields (None: no fields; a tuple getter
# when there are several), fields in a fixed order without positions or contexts
_SHAPES: dict[type, tuple[str, Callable[[Any], Any] | None, bool]] = {}


def _shape(cls: type) -> tuple[str, Callable[[Any], Any] | None, bool]:
    shape = _SHAPES.get(cls)
    if shape is None:
        names = tuple(x for x in cls._fields if x not in _SKIP_FIELDS)
        getter = attrgetter(*names) if names else None
        shape = _SHAPES[cls] = (cls.__name__, getter, len(names) > 1)
    return shape


_LENGTHS = tuple(f"[{k}" for k in range(64))  # the token of a list of k items, premade


def _block(stmts: list[ast.stmt], in_function: bool) -> list[ast.stmt]:
    """A block as it runs (``pyindex.neutral``): an ``if TYPE_CHECKING:`` replaced by its
    ``else`` (kept when that defines a def or class, which the index names), and in a
    function a local's bare annotation ``x: T`` left out."""
    for s in stmts:
        if (s.__class__ is ast.If and is_type_checking(s.test)) or (  # type: ignore[attr-defined]
            in_function and s.__class__ is ast.AnnAssign and s.value is None  # type: ignore[attr-defined]
        ):
            break
    else:
        return stmts  # the common case: nothing to leave out, no copy
    out: list[ast.stmt] = []
    for s in stmts:
        if s.__class__ is ast.If and is_type_checking(s.test):  # type: ignore[attr-defined]
            if any(isinstance(x, (*_DEFS, ast.ClassDef)) for x in s.orelse):  # type: ignore[attr-defined]
                out.append(s)
            else:
                out.extend(_block(s.orelse, in_function))  # type: ignore[attr-defined]
        elif not (in_function and s.__class__ is ast.AnnAssign and s.value is None):  # type: ignore[attr-defined]
            out.append(s)
    return out


# 76 lines: one loop whose fast paths are inlined (the hottest code of a cold run)
def _serialise(
    nodes: list, out: list[str], calls: list[ast.expr] | None, names: Names | None = None
) -> None:
    """Tokens of ``nodes`` (no positions, no ctx) in a fixed order; collect called expressions.

    Node names, then their fields in a fixed order (lists prefixed by their length), so
    the token stream determines the tree. Name, lists, None, Attribute and Constant, the
    most common values, take a fast path (in about that order of frequency); other nodes'
    fields are read by one ``attrgetter`` call. The rewrites of ``pyindex.neutral`` are
    seen through (``typing.cast``, ``if not c: raise AssertionError``, an assertion's
    message, ``TYPE_CHECKING``);
    ``names`` (a function body's) collects the names for its alpha-renaming, and marks
    the nodes as a function's (its locals' annotations never run).
    """
    stack: list = list(nodes)
    pop = stack.pop
    push = stack.append
    extend = stack.extend
    append = out.append
    shapes = _SHAPES
    lengths = _LENGTHS
    Name, Constant, Attribute, Call, AST = ast.Name, ast.Constant, ast.Attribute, ast.Call, ast.AST
    If, AnnAssign, Assert, stmt = ast.If, ast.AnnAssign, ast.Assert, ast.stmt
    in_function = names is not None
    while stack:
        n = pop()
        cls = n.__class__
        if cls is Name:
            append("N")
            append(n.id)
            if names is not None:
                names.saw(n, len(out) - 1)
        elif cls is list:
            if n and isinstance(n[0], stmt):
                n = _block(n, in_function)
            k = len(n)
            try:
                append(lengths[k])
            except IndexError:  # a list of 64 items or more
                append(f"[{k}")
            if k:
                extend(n)
        elif n is None:
            append("-")
        elif cls is Attribute:
            append("A")
            append(n.attr)
            push(n.value)
        elif cls is Constant:
            append("C")
            append(repr(n.value))
        else:
            if cls is Call:
                inner = cast_value(n)
                if inner is None:
                    inner = documented_value(n)
                if inner is not None:
                    push(inner)  # typing.cast(T, x) is x, _add_docstr(x, doc) is x
                    continue
            elif cls is If:
                check = as_assert(n)
                if check is not None:
                    n, cls = check, ast.Assert  # if not c: raise AssertionError(m)
            if cls is Assert and n.msg is not None:
                n = assert_without_message(n, calls)  # a passing assert never reads it
            elif cls is AnnAssign and in_function:
                n = local_annotation(n)  # type: ignore[assignment]
                if n is None:
                    continue
                cls = ast.Assign
            elif names is not None and (cls is ast.Global or cls is ast.Nonlocal):
                names.declared.update(n.names)
            shape = shapes.get(cls)
            if shape is None:
                if not isinstance(n, AST):  # a name, an identifier, an import level
                    append(repr(n))
                    continue
                shape = _shape(cls)
            name, getter, many = shape
            append(name)
            if getter is None:
                continue
            if cls is Call and calls is not None:
                calls.append(n.func)
            try:
                if many:
                    extend(getter(n))
                else:
                    push(getter(n))
            except AttributeError:  # a node built without an optional field
                names = tuple(x for x in cls._fields if x not in _SKIP_FIELDS)
                extend(getattr(n, f, None) for f in names)


def _digest(tokens: list[str]) -> str:
    return hashlib.blake2b(
        "\x00".join(tokens).encode("utf-8", "surrogatepass"), digest_size=12
    ).hexdigest()


def call_name(func: ast.expr) -> str | None:
    """Dotted name of a called expression: 'foo', 'self.bar', 'super.m', None if dynamic."""
    parts: list[str] = []
    node = func
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    elif (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "super"
        and parts
    ):
        parts.append("super")
    else:
        return None
    return ".".join(reversed(parts))


def _call_names(funcs: list[ast.expr]) -> frozenset[str]:
    names = set()
    for f in funcs:
        n = call_name(f)
        if n is not None:
            names.add(n)
    return frozenset(names)


def _strip_docstring(body: list[ast.stmt]) -> list[ast.stmt]:
    if (
        body
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
        and isinstance(body[0].value.value, str)
    ):
        return body[1:]
    return body


def _short(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _unparse(node: ast.AST, limit: int = VALUE_DISPLAY_CHARS) -> str:
    try:
        return _short(unparse(node), limit)
    except Exception:  # pragma: no cover - unparse of exotic nodes
        return "<?>"


# ---------------------------------------------------------------- statement indexer


_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)
_ACCESSORS = frozenset({"setter", "getter", "deleter"})


PLACEHOLDER = "__instep_reuse_{}__"

_Record = TypeVar("_Record", Symbol, Registration)


def _amended(record: _Record, **changes: Any) -> _Record:
    """``dataclasses.replace`` for a Symbol or a Registration, without its per-field work.

    Both are frozen dataclasses whose every field is an ``__init__`` argument and that have
    no ``__post_init__`` (a test checks this), so a copy of the instance dict with
    ``changes`` applied is the same record; reuse copies ~50,000 of them in a release diff.
    """
    out = object.__new__(record.__class__)
    state = out.__dict__
    state.update(record.__dict__)
    state.update(changes)
    return out


class _Indexer:
    def __init__(
        self,
        path: str,
        record: bool = False,
        reuse: dict[str, Unit] | None = None,
        lines: list[str] | None = None,
    ) -> None:
        self.path = path
        self.lines = lines  # source lines, for cheap display of long values
        self.units: list[Unit] | None = [] if record else None  # record nested units
        self.reuse = reuse or {}  # placeholder name -> unit of the reference version
        self.spliced = 0
        mod = module_of(path)
        is_pkg = path.replace("\\", "/").endswith("__init__.py")
        self.package = mod if is_pkg else mod.rpartition(".")[0]

    # ---- imports

    def _resolve(self, module: str | None, level: int) -> str:
        if level == 0:
            return module or ""
        parts = self.package.split(".") if self.package else []
        if level > 1:
            parts = parts[: len(parts) - (level - 1)] if level - 1 <= len(parts) else []
        base = ".".join(parts)
        if module:
            return f"{base}.{module}" if base else module
        return base

    def imports_of(self, stmt: ast.stmt, out: list[tuple[str, str]]) -> None:
        if isinstance(stmt, ast.Import):
            for a in stmt.names:
                if a.asname:
                    out.append((a.asname, a.name))
                else:
                    top = a.name.split(".", 1)[0]
                    out.append((top, top))
        elif isinstance(stmt, ast.ImportFrom):
            base = self._resolve(stmt.module, stmt.level)
            for a in stmt.names:
                if a.name == "*":
                    continue
                target = f"{base}.{a.name}" if base else a.name
                out.append((a.asname or a.name, target))
        elif isinstance(stmt, (ast.If, ast.Try)) or type(stmt).__name__ == "TryStar":
            for block in ("body", "orelse", "finalbody"):
                for s in getattr(stmt, block, ()):
                    self.imports_of(s, out)
            for h in getattr(stmt, "handlers", ()):
                for s in h.body:
                    self.imports_of(s, out)

    # ---- one top-level statement

    def statement(
        self, stmt: ast.stmt
    ) -> tuple[list[Symbol], list[tuple[str, str]], list[Registration]]:
        syms: list[Symbol] = []
        imports: list[tuple[str, str]] = []
        if isinstance(stmt, _DEFS):
            self.function(stmt, "", SymbolKind.FUNCTION, syms)
        elif isinstance(stmt, ast.ClassDef):
            self.klass(stmt, "", syms)
        elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
            self.imports_of(stmt, imports)
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign)) and self.assignment(
            stmt, "", SymbolKind.ASSIGNMENT, syms
        ):
            pass
        elif (
            isinstance(stmt, ast.Expr)
            and isinstance(stmt.value, ast.Constant)
            and isinstance(stmt.value.value, str)
        ):
            pass  # module docstring or a bare string: documentation, not code
        else:
            if isinstance(stmt, (ast.If, ast.Try)) or type(stmt).__name__ == "TryStar":
                self.imports_of(stmt, imports)
            self.block(stmt, syms)
        regs: list[Registration] = []
        for s in syms:
            regs.extend(s.registrations)
        return syms, imports, regs

    def function(
        self,
        node: ast.FunctionDef | ast.AsyncFunctionDef,
        prefix: str,
        kind: SymbolKind,
        out: list[Symbol],
    ) -> Symbol:
        if self.reuse and self._is_placeholder(node):
            return self._splice(self.reuse[node.name], node.lineno, prefix, kind, out)
        name = node.name
        for dec in node.decorator_list:
            if isinstance(dec, ast.Attribute) and dec.attr in _ACCESSORS:
                name = f"{name}.{dec.attr}"  # @size.setter: 'Class.size.setter'
                break
            if (dotted_name(dec) or "").rsplit(".", 1)[-1] in ("overload", "_overload"):
                name = f"{name}@overload"  # typing stubs; the implementation keeps the name
                break
        qual = prefix + name
        tokens: list[str] = ["async" if isinstance(node, ast.AsyncFunctionDef) else "def"]
        funcs: list[ast.expr] = []
        nested: list[ast.stmt] = []
        names = Names()
        body = _block(_strip_docstring(node.body), True)
        for stmt in body:
            if isinstance(stmt, (*_DEFS, ast.ClassDef)):
                tokens.append(self._nested_token(stmt))
                nested.append(stmt)
            else:
                _serialise([stmt], tokens, funcs, names)
        a = node.args
        params = [x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg) if x]
        rename_locals(tokens, names, tuple(params))
        position = len(out)
        out.append(None)  # type: ignore[arg-type]  # keep definition order: parent first
        inner_calls: set[str] = set()
        for stmt in nested:
            if isinstance(stmt, ast.ClassDef):
                child = self.klass(stmt, qual + ".", out)
            else:
                child = self.function(stmt, qual + ".", SymbolKind.FUNCTION, out)
            inner_calls.update(child.calls)
        sym = Symbol(
            path=self.path,
            qualname=qual,
            kind=kind,
            line=node.lineno,
            end_line=node.end_lineno or node.lineno,
            signature=unparse(node.args),
            body_hash=_digest(tokens),
            returns=_unparse(node.returns, 1 << 20) if node.returns is not None else None,
            decorators=tuple(_unparse(d) for d in node.decorator_list),
            calls=_call_names(funcs) | inner_calls,
            registrations=tuple(registrations_of_decorators(node.decorator_list, self.path, qual)),
            stub=is_stub_body(body),
            **_deprecation(node),
        )
        out[position] = sym
        if prefix and self.units is not None:
            self._record(node, prefix, out, position)
        return sym

    def _display(self, node: ast.expr) -> str:
        """A value for display: unparsed when short, else its source text (cheaper)."""
        end = node.end_lineno or node.lineno
        if self.lines is None or end - node.lineno < 2:
            return _unparse(node)
        parts: list[str] = []
        size = 0
        for row in range(node.lineno - 1, min(end, len(self.lines))):
            line = self.lines[row]
            if row == node.lineno - 1 or row == end - 1:  # col offsets count UTF-8 bytes
                raw = line.encode("utf-8", "surrogatepass")
                lo = node.col_offset if row == node.lineno - 1 else 0
                hi = node.end_col_offset if row == end - 1 else len(raw)
                line = raw[lo:hi].decode("utf-8", "replace")
            parts.append(line)
            size += len(line)
            if size > 2 * VALUE_DISPLAY_CHARS:
                break
        return _short(" ".join(parts), VALUE_DISPLAY_CHARS)

    # ---- reuse of nested definitions (see index_against)

    @staticmethod
    def _token(stmt: ast.stmt) -> str:
        return f"<nested {type(stmt).__name__} {stmt.name}>"  # type: ignore[attr-defined]

    def _is_placeholder(self, stmt: ast.stmt) -> bool:
        return type(stmt) is ast.FunctionDef and stmt.name in self.reuse and not stmt.decorator_list

    def _nested_token(self, stmt: ast.stmt) -> str:
        if self.reuse and self._is_placeholder(stmt):
            return self.reuse[stmt.name].token  # type: ignore[attr-defined]
        return self._token(stmt)

    def _record(self, node: ast.stmt, prefix: str, out: list[Symbol], position: int) -> None:
        decorators = getattr(node, "decorator_list", ())
        start = min([node.lineno, *(d.lineno for d in decorators)])
        unit = Unit(
            start, node.end_lineno or node.lineno, prefix, self._token(node), out[position:]
        )
        self.units.append(unit)  # type: ignore[union-attr]

    def _splice(
        self, unit: Unit, line: int, prefix: str, kind: SymbolKind, out: list[Symbol]
    ) -> Symbol:
        """Put a reference unit where its placeholder stands: lines shifted, names re-based."""
        delta = line - unit.start
        cut = len(unit.prefix)
        position = len(out)
        for i, sym in enumerate(unit.symbols):
            regs = tuple(
                _amended(
                    r, line=r.line + delta, symbol=prefix + r.symbol[cut:] if r.symbol else None
                )
                for r in sym.registrations
            )
            out.append(
                _amended(
                    sym,
                    qualname=prefix + sym.qualname[cut:],
                    kind=kind if i == 0 and sym.kind is not SymbolKind.CLASS else sym.kind,
                    line=sym.line + delta,
                    end_line=sym.end_line + delta,
                    registrations=regs,
                )
            )
        self.spliced += 1
        return out[position]

    def klass(self, node: ast.ClassDef, prefix: str, out: list[Symbol]) -> Symbol:
        qual = prefix + node.name
        tokens: list[str] = ["class"]
        funcs: list[ast.expr] = []
        position = len(out)
        out.append(None)  # type: ignore[arg-type]
        for stmt in _block(_strip_docstring(node.body), False):
            if isinstance(stmt, _DEFS):
                self.function(stmt, qual + ".", SymbolKind.METHOD, out)
            elif isinstance(stmt, ast.ClassDef):
                self.klass(stmt, qual + ".", out)
            elif isinstance(stmt, (ast.Assign, ast.AnnAssign)) and self.assignment(
                stmt, qual + ".", SymbolKind.CLASS_ATTRIBUTE, out
            ):
                pass
            else:
                _serialise([stmt], tokens, funcs)
        bases = [_unparse(b) for b in node.bases]
        bases += [
            f"{k.arg}={_unparse(k.value)}" if k.arg else f"**{_unparse(k.value)}"
            for k in node.keywords
        ]
        sym = Symbol(
            path=self.path,
            qualname=qual,
            kind=SymbolKind.CLASS,
            line=node.lineno,
            end_line=node.end_lineno or node.lineno,
            body_hash=_digest(tokens),
            decorators=tuple(_unparse(d) for d in node.decorator_list),
            bases=tuple(bases),
            calls=_call_names(funcs),
            registrations=tuple(registrations_of_decorators(node.decorator_list, self.path, qual)),
        )
        out[position] = sym
        if prefix and self.units is not None:
            self._record(node, prefix, out, position)
        return sym

    def assignment(
        self, node: ast.Assign | ast.AnnAssign, prefix: str, kind: SymbolKind, out: list[Symbol]
    ) -> bool:
        """Assignments to names (or dotted names at module level); False if not one."""
        if isinstance(node, ast.AnnAssign):
            targets = [node.target]
            annotation = node.annotation
        else:
            targets = node.targets
            annotation = None
        value = node.value
        named: list[tuple[str, ast.expr | None]] = []
        for target in targets:
            if isinstance(target, (ast.Tuple, ast.List)):
                elts = target.elts
                split = (
                    isinstance(value, (ast.Tuple, ast.List))
                    and len(value.elts) == len(elts)
                    and not any(isinstance(e, ast.Starred) for e in (*elts, *value.elts))
                )
                for i, elt in enumerate(elts):
                    if isinstance(elt, ast.Starred):
                        elt = elt.value
                    name = dotted_name(elt)
                    if name is None:
                        return False
                    named.append((name, value.elts[i] if split else value))  # type: ignore[union-attr]
            else:
                name = dotted_name(target)
                if name is None or ("." in name and prefix):
                    return False
                named.append((name, value))
        calls: list[ast.expr] = []
        for name, val in named:
            qual = prefix + name
            tokens: list[str] = ["="]
            if annotation is not None:
                _serialise([annotation], tokens, None)
            _serialise([val], tokens, calls)
            regs: list[Registration] = []
            if val is not None and not prefix:
                regs = registry_entries(name, val, self.path)
                if isinstance(val, ast.Call):
                    regs += registrations_of_call(val, self.path, qual)
            out.append(
                Symbol(
                    path=self.path,
                    qualname=qual,
                    kind=kind,
                    line=node.lineno,
                    end_line=node.end_lineno or node.lineno,
                    signature=_unparse(annotation) if annotation is not None else None,
                    body_hash=_digest(tokens),
                    value=self._display(val) if val is not None else None,
                    calls=_call_names(calls),
                    registrations=tuple(regs),
                )
            )
        return bool(named)

    def block(self, stmt: ast.stmt, out: list[Symbol]) -> None:
        tokens: list[str] = []
        funcs: list[ast.expr] = []
        _serialise([stmt], tokens, funcs)
        regs = self._block_registrations(stmt)
        name = self._block_name(stmt, regs)
        out.append(
            Symbol(
                path=self.path,
                qualname=name,
                kind=SymbolKind.BLOCK,
                line=stmt.lineno,
                end_line=stmt.end_lineno or stmt.lineno,
                body_hash=_digest(tokens),
                calls=_call_names(funcs),
                registrations=tuple(regs),
                binds=_branch_definitions(stmt),
            )
        )

    def _block_registrations(self, stmt: ast.stmt) -> list[Registration]:
        regs: list[Registration] = []
        todo = [stmt]
        while todo:
            s = todo.pop()
            if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call):
                regs.extend(registrations_of_call(s.value, self.path))
            elif isinstance(s, ast.Assign):
                for t in s.targets:
                    if isinstance(t, ast.Subscript):
                        regs.extend(item_assignment(t, self.path))
            elif not isinstance(s, (*_DEFS, ast.ClassDef)):
                for f in ("body", "orelse", "finalbody", "handlers"):
                    todo.extend(reversed(getattr(s, f, ()) or ()))
        return regs

    @staticmethod
    def _block_name(stmt: ast.stmt, regs: list[Registration]) -> str:
        if regs and isinstance(stmt, (ast.Expr, ast.Assign)):
            first = regs[0]
            same = [r for r in regs if r.registrar == first.registrar]
            keys = first.key + (f".{first.overload}" if first.overload else "")
            if len(same) > 1:  # a list: named by its first op so that edits keep the name
                keys += ", ..."
            if first.registrar.startswith("table:"):
                return f"{first.registrar[6:]}[{keys}]"
            return f"{first.registrar}({keys})"
        if isinstance(stmt, ast.If):
            head = f"if {_unparse(stmt.test, BLOCK_NAME_CHARS)}"
        elif isinstance(stmt, (ast.For, ast.AsyncFor)):
            head = f"for {_unparse(stmt.target)} in {_unparse(stmt.iter, BLOCK_NAME_CHARS)}"
        elif isinstance(stmt, ast.While):
            head = f"while {_unparse(stmt.test, BLOCK_NAME_CHARS)}"
        elif isinstance(stmt, (ast.With, ast.AsyncWith)):
            head = "with " + ", ".join(_unparse(i.context_expr, 40) for i in stmt.items)
        elif isinstance(stmt, ast.Try) or type(stmt).__name__ == "TryStar":
            body = stmt.body[0] if stmt.body else None  # type: ignore[attr-defined]
            first = _unparse(body, 60).split("\n", 1)[0] if body is not None else ""
            head = f"try: {first}"
        elif isinstance(stmt, ast.Expr):
            head = _unparse(stmt.value, BLOCK_NAME_CHARS)
        elif isinstance(stmt, ast.AugAssign):
            op = _unparse(stmt, 200).split("=", 1)[0].strip()
            head = f"{op}= ..."
        elif isinstance(stmt, ast.Assign):
            head = " = ".join(_unparse(t, 60) for t in stmt.targets) + " = ..."
        else:
            head = _unparse(stmt, BLOCK_NAME_CHARS).split("\n", 1)[0]
        return f"<{_short(head, BLOCK_NAME_CHARS)}>"


def _branch_definitions(stmt: ast.stmt) -> tuple[str, ...]:
    """Names a def or class binds in any branch of an ``if``/``try`` (nested ones too):
    ``if TYPE_CHECKING: ... else: def is_compiling()`` binds ``is_compiling`` whichever
    branch runs. The body of ``if TYPE_CHECKING:`` never runs: it binds nothing. Other
    statements bind nothing here."""
    names: set[str] = set()
    todo = [stmt]
    while todo:
        s = todo.pop()
        if isinstance(s, (*_DEFS, ast.ClassDef)):
            names.add(s.name)
        elif isinstance(s, ast.If) and _unparse(s.test).endswith("TYPE_CHECKING"):
            todo.extend(s.orelse)
        elif isinstance(s, (ast.If, ast.Try)) or type(s).__name__ == "TryStar":
            for block in ("body", "orelse", "finalbody"):
                todo.extend(getattr(s, block, ()))
            for h in getattr(s, "handlers", ()):
                todo.extend(h.body)
    if not isinstance(stmt, (ast.If, ast.Try)) and type(stmt).__name__ != "TryStar":
        return ()
    return tuple(sorted(names))


# ---------------------------------------------------------------- assembling an index


def _chunks_of(indexer: _Indexer, body: list[ast.stmt]) -> list[Chunk]:
    """Group top-level statements into whole-line chunks and index each."""
    chunks: list[Chunk] = []
    for stmt in body:
        start = min([stmt.lineno, *(d.lineno for d in getattr(stmt, "decorator_list", ()))])
        end = stmt.end_lineno or stmt.lineno
        syms, imports, regs = indexer.statement(stmt)
        if chunks and start <= chunks[-1].end:  # 'a = 1; b = 2' share a line
            last = chunks[-1]
            last.end = max(last.end, end)
            last.symbols.extend(syms)
            last.imports.extend(imports)
            last.registrations.extend(regs)
        else:
            chunks.append(Chunk(start, end, syms, imports, regs))
    return chunks


def _assemble(path: str, chunks: list[Chunk], units: list[Unit] | None = None) -> FileIndex:
    symbols: dict[str, Symbol] = {}
    imports: dict[str, str] = {}
    registrations: list[Registration] = []
    for chunk in chunks:
        for sym in chunk.symbols:
            qual = sym.qualname
            if qual in symbols:
                n = 2
                while f"{qual}#{n}" in symbols:
                    n += 1
                numbered = f"{qual}#{n}"
                regs = tuple(
                    _amended(r, symbol=numbered) if r.symbol == qual else r
                    for r in sym.registrations
                )
                sym = _amended(sym, qualname=numbered, registrations=regs)
            symbols[sym.qualname] = sym
        imports.update(chunk.imports)
        registrations.extend(chunk.registrations)
    for sym in dataclass_inits(symbols):  # derived from the whole file: in no chunk
        symbols[sym.qualname] = sym
    return FileIndex(path, symbols, imports, registrations, chunks=chunks, units=units or [])


def index_tree(path: str, tree: ast.Module, lines: list[str] | None = None) -> FileIndex:
    """Index an already parsed module (recording what :func:`index_against` can reuse).

    ``lines``: the source split at newlines; long values are then shown from the source.
    """
    indexer = _Indexer(path, record=True, lines=lines)
    return _assemble(path, _chunks_of(indexer, tree.body), indexer.units)


def index_of_declarations(path: str, text: str, syms: list[Symbol]) -> FileIndex:
    """The index of a non-Python file whose symbols another reader found (an upstream C
    shim header: ``instep.impact.upstream.file_index``), as one chunk spanning the whole text."""
    regs = [r for sym in syms for r in sym.registrations]
    return _assemble(path, [Chunk(1, text.count("\n") + 1, syms, [], regs)])


def index_text(path: str, text: str) -> FileIndex:
    """Index decoded Python source text; a syntax error gives an index with ``error`` set."""
    try:
        tree = ast.parse(text, filename=path)
        return index_tree(path, tree, text.split("\n"))
    except _PARSE_ERRORS as exc:
        return _error_index(path, _describe(exc))


def decode_or_error(path: str, data: bytes) -> tuple[str | None, FileIndex | None]:
    """(text, None), or (None, an error index) when the bytes are not decodable source."""
    try:
        return decode_source(data), None
    except _PARSE_ERRORS as exc:
        return None, _error_index(path, _describe(exc))


def index_source(path: str, data: bytes) -> FileIndex:
    """Index one file's bytes. Bad input gives an empty index with ``error`` (and a warning)."""
    text, failed = decode_or_error(path, data)
    return failed if text is None else index_text(path, text)  # type: ignore[return-value]


# ---------------------------------------------------------------- reuse of a related version


def _shift(chunk: Chunk, delta: int) -> Chunk:
    if delta == 0:
        return chunk

    def reg(r: Registration) -> Registration:
        return _amended(r, line=r.line + delta)

    symbols = [
        _amended(
            s,
            line=s.line + delta,
            end_line=s.end_line + delta,
            registrations=tuple(reg(r) for r in s.registrations),
        )
        for s in chunk.symbols
    ]
    return Chunk(
        chunk.start + delta,
        chunk.end + delta,
        symbols,
        list(chunk.imports),
        [reg(r) for r in chunk.registrations],
    )


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


def _ends_block(lines: list[str], at: int, size: int) -> bool:
    """Whether the first code line after lines[at:at+size] indents no deeper than lines[at]."""
    level = _indent(lines[at])
    for k in range(at + size, len(lines)):
        stripped = lines[k].strip()
        if stripped and not stripped.startswith("#"):
            return _indent(lines[k]) <= level
    return True


def _punch(region: list[str], row: int, size: int, name: str) -> None:
    """Replace region[row:row+size] by a placeholder def spanning the same lines."""
    first = region[row]
    indent = first[: _indent(first)]
    if size == 1:
        region[row] = f"{indent}def {name}(): pass"
        return
    region[row] = f"{indent}def {name}():"
    for k in range(row + 1, row + size - 1):
        region[k] = ""
    region[row + size - 1] = f"{indent} pass"


def _index_region(
    path: str, start: int, region: list[str], reuse: dict[str, Unit], lines: list[str]
) -> list[Chunk] | None:
    """Chunks of one region parsed on its own; None if it does not parse or a placeholder
    was not found as a member."""
    source = "\n".join(region)
    if not source.strip():
        return []
    indexer = _Indexer(path, reuse=reuse, lines=lines)
    try:
        tree = ast.parse("\n" * (start - 1) + source, filename=path)
        chunks = _chunks_of(indexer, tree.body)
    except _PARSE_ERRORS:
        return None
    return chunks if indexer.spliced == len(reuse) else None


@dataclass
class ReuseStats:
    """What :func:`index_against` did (for tests and benchmarks)."""

    reused_chunks: int = 0  # top-level statements taken over
    reused_units: int = 0  # nested defs/classes taken over through placeholders
    parsed_regions: int = 0
    parsed_lines: int = 0
    full_parse: bool = False


def index_against(
    path: str,
    text: str,
    reference: FileIndex,
    reference_text: str,
    stats: ReuseStats | None = None,
) -> FileIndex:
    """Index ``text`` reusing ``reference`` (the index of ``reference_text``, same path).

    1. Every top-level chunk of the reference (complete statements, whole lines) whose
       lines occur verbatim in ``text`` is taken over there, its symbols shifted.
    2. In the rest, every nested def/class of the reference whose lines occur verbatim is
       replaced by a placeholder ``def __instep_reuse_N__(): pass`` at the same
       indentation spanning the same lines (the lines between left blank).
    3. The text between taken-over chunks is parsed region by region, each on its own,
       and indexed; each placeholder found as a plain, undecorated member of a class or
       function is replaced by the reference unit's symbols (shifted, re-prefixed).
    4. If a region does not parse on its own, or a placeholder is not found where a
       member stands, the whole text is parsed instead.

    Sound because each piece taken over is a complete statement of the reference that
    starts at a line start and leaves the tokenizer neutral (no open bracket or string),
    and a placeholder that parses as an undecorated member followed by a line that does
    not indent deeper stands exactly where the original statement stood. The result
    equals :func:`index_text` (a test checks this on real files).
    """
    stats = stats if stats is not None else ReuseStats()
    if reference.error is not None or not reference.chunks:
        stats.full_parse = True
        return index_text(path, text)
    lines = text.split("\n")
    ref_lines = reference_text.split("\n")
    by_first: dict[str, list[tuple[int, Chunk | Unit]]] = {}
    for item in (*reference.chunks, *reference.units):
        key = ref_lines[item.start - 1]
        by_first.setdefault(key, []).append((item.end - item.start + 1, item))
    for cands in by_first.values():
        cands.sort(key=lambda c: -c[0])
    pieces: list[tuple[int, int, Chunk | None]] = []  # 1-based (start, end, chunk | gap)
    holes: list[tuple[int, int, Unit]] = []  # 0-based start, size, unit
    i, n = 0, len(lines)
    gap_start = 0
    get = by_first.get
    while i < n:
        cands = get(lines[i])
        matched: Chunk | Unit | None = None
        size = 0
        if cands:
            for size, item in cands:
                if lines[i : i + size] == ref_lines[item.start - 1 : item.end] and _ends_block(
                    lines, i, size
                ):
                    matched = item
                    break
        if matched is None:
            i += 1
        elif isinstance(matched, Chunk):
            if gap_start < i:
                pieces.append((gap_start + 1, i, None))
            pieces.append((i + 1, i + size, matched))
            i += size
            gap_start = i
        else:
            holes.append((i, size, matched))
            i += size
    if gap_start < n:
        pieces.append((gap_start + 1, n, None))

    chunks: list[Chunk] = []
    h = 0
    for start, end, reused in pieces:
        if reused is not None:
            chunks.append(_shift(reused, start - reused.start))
            stats.reused_chunks += 1
            continue
        region = lines[start - 1 : end]
        reuse: dict[str, Unit] = {}
        while h < len(holes) and holes[h][0] < end:
            at, size, unit = holes[h]
            h += 1
            name = PLACEHOLDER.format(len(reuse))
            _punch(region, at - start + 1, size, name)
            reuse[name] = unit
        if not any(line.strip() for line in region):
            continue  # blank lines and nothing else
        parsed = _index_region(path, start, region, reuse, lines)
        if parsed is None and reuse:  # a placeholder fell where no member stands
            parsed = _index_region(path, start, lines[start - 1 : end], {}, lines)
            reuse = {}
        if parsed is None:
            stats.full_parse = True
            return index_text(path, text)
        chunks.extend(parsed)
        stats.parsed_regions += 1
        stats.parsed_lines += end - start + 1 - sum(u.end - u.start for u in reuse.values())
        stats.reused_units += len(reuse)
    return _assemble(path, chunks)


# --- deprecated wrappers -----------------------------------------------------------------

_WARNERS = ("warn", "warning", "warn_once", "warn_deprecated", "_warn_deprecated")
_DEPRECATION_CATEGORIES = ("DeprecationWarning", "FutureWarning", "PendingDeprecationWarning")
_SHORT_BODY = 4  # statements (docstring aside) a deprecated wrapper has at most


def _deprecation(node: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, str]:
    """``deprecated``/``delegates`` of a def that announces its deprecation: a
    ``@deprecated("...")`` decorator, or a short body that warns (``warnings.warn`` with a
    deprecation category or message, a logger's ``warning`` whose message says
    "deprecated") and, for ``delegates``, ends by calling another name
    (``return new(*args, **kwargs)``). Empty for every other def (cheap: one look at a
    short body)."""
    out: dict[str, str] = {}
    for dec in node.decorator_list:
        call = dec if isinstance(dec, ast.Call) else None
        name = dotted_name(call.func if call is not None else dec) or ""
        if name.rsplit(".", 1)[-1] == "deprecated":
            message = _message(call.args[0]) if call is not None and call.args else None
            out["deprecated"] = message or "deprecated"
    body = _strip_docstring(node.body)
    if len(body) > _SHORT_BODY:
        return out
    for stmt in body:
        if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
            continue
        call = stmt.value
        if (dotted_name(call.func) or "").rsplit(".", 1)[-1] not in _WARNERS:
            continue
        message = _message(call.args[0]) if call.args else None
        category = [
            dotted_name(a) or ""
            for a in [*call.args[1:2], *(k.value for k in call.keywords if k.arg == "category")]
        ]
        by_category = any(c.rsplit(".", 1)[-1] in _DEPRECATION_CATEGORIES for c in category)
        if by_category or (message is not None and "deprecat" in message.lower()):
            out.setdefault("deprecated", message or "deprecated")
    if "deprecated" in out and body:
        last = body[-1]
        value = last.value if isinstance(last, (ast.Return, ast.Expr)) else None
        if isinstance(value, ast.Call):
            callee = dotted_name(value.func)
            if callee and callee.rsplit(".", 1)[-1] not in _WARNERS:
                out["delegates"] = callee
    return out


def _message(node: ast.expr) -> str | None:
    """The text of a warning message: a string, an f-string (its literal parts, ``{}``
    for the values), strings joined by ``+`` or implicit concatenation."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(
            v.value if isinstance(v, ast.Constant) and isinstance(v.value, str) else "{}"
            for v in node.values
        )
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _message(node.left), _message(node.right)
        if left is not None and right is not None:
            return left + right
    return None
