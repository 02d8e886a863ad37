"""The ``__init__`` that ``@dataclass`` synthesises, as a METHOD symbol of the class.

A dataclass has no ``def __init__`` in its source, yet constructing it binds arguments to
its fields: a field without a default added (or inserted before others) breaks every
positional or short construction. :func:`dataclass_inits` reads the index of one file
(the class's decorators and its annotated class attributes, in order) and gives, for each
``@dataclass`` / ``@dataclasses.dataclass(...)`` class that neither defines ``__init__``
nor passes ``init=False``, a ``Cls.__init__`` symbol whose signature is the synthesised
one, so that the signature machinery (``pyindex.signatures``) and the symbol diff see it:

* fields in definition order, inherited dataclass fields first (a redefined field keeps
  its first place and takes the new default); a plain assignment or a ``ClassVar``
  annotation is no field; ``InitVar`` fields are parameters; ``field(init=False)`` is not;
* defaults: a value, ``field(default=...)``, ``field(default_factory=f)`` (shown ``f()``);
  ``field()`` alone is required;
* keyword-only: ``kw_only=True`` on the decorator (its own fields), ``field(kw_only=...)``
  and the fields after ``_: KW_ONLY``.

:func:`dataclass_inits` resolves bases in the same file only (it runs per file, and a
file's cached index must not depend on other files): a base defined elsewhere (which may
carry fields) gives no symbol rather than a wrong one, except bases known to carry none
(``object``, ``Generic[...]``, ``Protocol``, ``ABC``). Once every file of a snapshot can
be read, :class:`SnapshotDataclasses` gives the others: a base found through the file's
imports in another file of the snapshot brings its fields (and its own bases' fields);
a base it cannot find still gives no symbol. The body hash is a constant: the
synthesised body changes only with the signature, and the signature leaves the field
annotations out: they change no binding, and the class attribute's own change reports
them. Nothing here parses source text.
"""

from __future__ import annotations

import ast
import functools
import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

from instep.pyindex.model import Symbol, SymbolKind, module_of

SYNTHESISED = "<synthesised by @dataclass>"  # the value of a synthesised __init__ symbol
_BODY = hashlib.blake2b(b"dataclass __init__", digest_size=12).hexdigest()
_NO_FIELDS = frozenset({"object", "Generic", "Protocol", "ABC", "NamedTuple"})


@dataclass(frozen=True)
class _Field:
    name: str
    annotation: str
    default: str | None  # None: required
    kw_only: bool


@functools.lru_cache(maxsize=4096)
def _expr(text: str | None) -> ast.expr | None:
    """The expression ``text`` parsed, memoised: the same few annotations, decorators and
    defaults come back thousands of times in a release (14,736 parses of a cold release
    analysis, torch 2.13.0 -> 2.14.1, were of texts parsed before). Callers only read the
    node (never change it): one node serves them all."""
    if not text:
        return None
    try:
        return ast.parse(text, mode="eval").body
    except (SyntaxError, ValueError, RecursionError):
        return None


def _last(node: ast.expr | None) -> str:
    """'dataclasses.dataclass' -> 'dataclass'; 'ClassVar[int]' -> 'ClassVar'."""
    while isinstance(node, (ast.Subscript, ast.Call)):
        node = node.value if isinstance(node, ast.Subscript) else node.func
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return _last(_expr(node.value))  # a string annotation 'ClassVar[int]'
    return ""


def _keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def _is_false(node: ast.expr | None) -> bool:
    return isinstance(node, ast.Constant) and node.value is False


def _is_true(node: ast.expr | None) -> bool:
    return isinstance(node, ast.Constant) and node.value is True


def _decorator(cls: Symbol) -> ast.expr | None:
    """The ``@dataclass`` decorator of ``cls`` that synthesises ``__init__``, if any."""
    for text in cls.decorators:
        node = _expr(text)
        if _last(node) != "dataclass":
            continue
        if isinstance(node, ast.Call) and _is_false(_keyword(node, "init")):
            return None
        return node
    return None


def _own_fields(cls: Symbol, members: list[Symbol], kw_only_all: bool) -> list[_Field] | None:
    fields: list[_Field] = []
    kw_only = kw_only_all
    for sym in members:
        if sym.kind is not SymbolKind.CLASS_ATTRIBUTE or sym.signature is None:
            continue  # not annotated: no field
        name = sym.qualname.rsplit(".", 1)[-1]
        annotation = _expr(sym.signature)
        kind = _last(annotation)
        if kind == "ClassVar":
            continue
        if kind == "KW_ONLY":
            kw_only = True
            continue
        default: str | None = None
        field_kw_only = kw_only
        value = _expr(sym.value) if sym.value is not None else None
        if sym.value is not None and value is None:
            default = "..."  # a value too long to show whole: a default all the same
        elif isinstance(value, ast.Call) and _last(value.func) == "field":
            if _is_false(_keyword(value, "init")):
                continue
            given = _keyword(value, "default")
            factory = _keyword(value, "default_factory")
            if given is not None:
                default = ast.unparse(given)
            elif factory is not None:
                shown = ast.unparse(factory)
                default = f"({shown})()" if isinstance(factory, ast.Lambda) else f"{shown}()"
            flag = _keyword(value, "kw_only")
            if flag is not None:
                field_kw_only = _is_true(flag)
        elif value is not None:
            default = ast.unparse(value)
        fields.append(_Field(name, sym.signature, default, field_kw_only))
    return fields


#: ``outside(table, text)``: the class a base written ``text`` in ``table``'s file names in
#: another file of the snapshot, as (that file's table, qualname); None: not known.
Outside = Callable[["_Classes", str], "tuple[_Classes, str] | None"]


class _Classes:
    """The classes of one file and their member symbols, fields collected on demand.

    ``outside`` finds a base that is not defined in the file (see :class:`SnapshotDataclasses`);
    without it such a base leaves the fields unknown."""

    def __init__(
        self,
        symbols: dict[str, Symbol],
        imports: dict[str, str] | None = None,
        path: str = "",
        outside: Outside | None = None,
    ) -> None:
        self.symbols = symbols
        self.imports = imports or {}
        self.path = path
        self.outside = outside
        self.members: dict[str, list[Symbol]] = {}
        for q, sym in symbols.items():
            owner = q.rpartition(".")[0]
            if owner and owner in symbols and symbols[owner].kind is SymbolKind.CLASS:
                self.members.setdefault(owner, []).append(sym)
        self.memo: dict[str, list[_Field] | None] = {}
        self.sources: dict[str, frozenset[str]] = {}  # class -> other files its fields read

    def _base(self, qual: str, text: str) -> tuple[_Classes, str] | None:
        """Where the base written ``text`` in the class ``qual`` is defined: (table,
        qualname); ``(self, "")``: a base known to carry no fields; None: not known."""
        if "=" in text.split("[", 1)[0]:
            return self, ""  # metaclass=..., a keyword of the class statement
        name = _last(_expr(text))
        if name in _NO_FIELDS:
            return self, ""
        text = text.split("[", 1)[0].strip()  # Base[T]: the class Base
        scope = qual.rpartition(".")[0]
        while True:  # a nested class may name a sibling (not correct Python: a near miss)
            cand = f"{scope}.{text}" if scope else text
            if cand in self.symbols and self.symbols[cand].kind is SymbolKind.CLASS:
                return self, cand
            if not scope:
                break
            scope = scope.rpartition(".")[0]
        return self.outside(self, text) if self.outside is not None else None

    def fields(self, qual: str, depth: int = 0) -> list[_Field] | None:
        """Every ``__init__`` field of class ``qual`` (inherited first); None: not known."""
        if qual in self.memo:
            return self.memo[qual]
        self.memo[qual] = None  # a cycle (never in valid code) gives None
        cls = self.symbols[qual]
        merged: dict[str, _Field] = {}
        sources: set[str] = set()
        for text in reversed(cls.bases):
            found = self._base(qual, text)
            if found is None or depth > 20:
                return None
            table, base = found
            if not base:
                continue
            inherited = table.fields(base, depth + 1)
            if inherited is None:
                return None
            for f in inherited:
                merged[f.name] = f
            sources.update(table.sources.get(base, ()))
            if table is not self:
                sources.add(table.path)
        deco = _decorator(cls)
        if deco is not None:
            kw_all = isinstance(deco, ast.Call) and _is_true(_keyword(deco, "kw_only"))
            for f in _own_fields(cls, self.members.get(qual, []), kw_all) or []:
                merged[f.name] = f
        out = list(merged.values())
        self.memo[qual] = out
        self.sources[qual] = frozenset(sources)
        return out


def _signature(fields: list[_Field]) -> str:
    def param(f: _Field) -> str:
        return f.name + (f"={f.default}" if f.default is not None else "")

    positional = [param(f) for f in fields if not f.kw_only]
    keyword = [param(f) for f in fields if f.kw_only]
    return ", ".join(["self", *positional, *(["*", *keyword] if keyword else [])])


def _init_symbol(cls: Symbol, fields: list[_Field]) -> Symbol:
    return Symbol(
        path=cls.path,
        qualname=f"{cls.qualname}.__init__",
        kind=SymbolKind.METHOD,
        line=cls.line,
        end_line=cls.line,
        signature=_signature(fields),
        body_hash=_BODY,
        returns="None",
        value=SYNTHESISED,
    )


def _synthesising(symbols: dict[str, Symbol]) -> list[Symbol]:
    """The dataclasses of ``symbols`` whose ``__init__`` ``@dataclass`` writes."""
    return [
        s
        for s in symbols.values()
        if s.kind is SymbolKind.CLASS and _decorator(s) and f"{s.qualname}.__init__" not in symbols
    ]


def dataclass_inits(symbols: dict[str, Symbol]) -> list[Symbol]:
    """A ``Cls.__init__`` METHOD symbol for each dataclass of one file's ``symbols``
    whose ``__init__`` is synthesised and whose bases are all in the file (see the module
    docstring); :class:`SnapshotDataclasses` adds those with a base in another file."""
    classes = _synthesising(symbols)
    if not classes:
        return []
    table = _Classes(symbols)
    out: list[Symbol] = []
    for cls in classes:
        fields = table.fields(cls.qualname)
        if fields is not None:  # None: a base from another file, not known here
            out.append(_init_symbol(cls, fields))
    return out


class IndexedFile(Protocol):
    """What :class:`SnapshotDataclasses` reads of a file's index (``symbols.FileIndex``)."""

    symbols: dict[str, Symbol]
    imports: dict[str, str]


MAX_HOPS = 6  # re-exports followed from an import to the class it names


def _nothing(path: str) -> None:
    return None


class SnapshotDataclasses:
    """The synthesised ``__init__`` of dataclasses whose bases lie in other files of one
    snapshot (one version of a tree), found after every file was indexed on its own.

    A base written ``Base`` or ``m.Base`` is looked up in the file's imports (``from a.b
    import Base``, ``import a.b as m``, relative imports already absolute), then in the
    module of the longest dotted prefix that is a file of the snapshot, following
    re-exports (``a/__init__.py`` importing ``Base`` from ``a.impl``) up to
    :data:`MAX_HOPS` times. A base outside the snapshot, or written as an expression,
    leaves the class without a synthesised ``__init__``. ``load(path)`` gives a file's
    index (None: unreadable); each file is loaded at most once.
    """

    def __init__(self, paths: Iterable[str], load: Callable[[str], IndexedFile | None]) -> None:
        self.module_paths = {module_of(p): p for p in paths if p.endswith(".py")}
        self._load = load
        self._tables: dict[str, _Classes | None] = {}

    def close(self) -> None:
        """Drop the tables and the loader: each table holds this object's bound method
        (a cycle), which a caller that pauses the cyclic collector would keep alive."""
        self._tables.clear()
        self._load = _nothing

    def table(self, path: str) -> _Classes | None:
        if path not in self._tables:
            index = self._load(path)
            self._tables[path] = (
                None
                if index is None
                else _Classes(index.symbols, index.imports, path, self._outside)
            )
        return self._tables[path]

    def _outside(self, table: _Classes, text: str) -> tuple[_Classes, str] | None:
        parts = text.split(".")
        if not all(p.isidentifier() for p in parts):
            return None  # an expression: not followed
        for cut in range(len(parts), 0, -1):
            target = table.imports.get(".".join(parts[:cut]))
            if target is not None:
                return self._find(".".join([target, *parts[cut:]]), 0)
        return None

    def _find(self, dotted: str, hops: int) -> tuple[_Classes, str] | None:
        if hops > MAX_HOPS:
            return None
        parts = dotted.split(".")
        for cut in range(len(parts) - 1, 0, -1):
            path = self.module_paths.get(".".join(parts[:cut]))
            if path is None:
                continue
            table = self.table(path)
            if table is None:
                return None
            qual = ".".join(parts[cut:])
            sym = table.symbols.get(qual)
            if sym is not None:
                return (table, qual) if sym.kind is SymbolKind.CLASS else None
            head, _, tail = qual.partition(".")
            target = table.imports.get(head)
            if target is None:
                return None
            return self._find(".".join(filter(None, [target, tail])), hops + 1)
        return None

    def inits(self, path: str) -> dict[str, tuple[Symbol, frozenset[str]]]:
        """``Cls.__init__`` -> (its synthesised symbol, the other files its fields come
        from) for each dataclass of ``path`` that needs a base from another file."""
        table = self.table(path)
        if table is None:
            return {}
        out: dict[str, tuple[Symbol, frozenset[str]]] = {}
        for cls in _synthesising(table.symbols):
            fields = table.fields(cls.qualname)
            sources = table.sources.get(cls.qualname, frozenset())
            if fields is not None and sources:
                out[f"{cls.qualname}.__init__"] = (_init_symbol(cls, fields), sources)
        return out
