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

Bases are resolved in the same file only: a base defined elsewhere (which may carry
fields) gives no symbol rather than a wrong one, except bases known to carry none
(``object``, ``Generic[...]``, ``Protocol``, ``ABC``). The body hash is a constant: the
synthesised body changes only with the signature, and the signature leaves the field
annotations out: they change no binding, and the class attribute's own change reports
them. Nothing here parses source text.
"""

from __future__ import annotations

import ast
import hashlib
from dataclasses import dataclass

from instep.pyindex.model import Symbol, SymbolKind

SYNTHESISED = "<synthesised by @dataclass>"  # the value of a synthesised __init__ symbol
_BODY = hashlib.blake2b(b"dataclass __init__", digest_size=12).hexdigest()
_NO_FIELDS = frozenset({"object", "Generic", "Protocol", "ABC", "NamedTuple"})


@dataclass(frozen=True)
class _Field:
    name: str
    annotation: str
    default: str | None  # None: required
    kw_only: bool


def _expr(text: str | None) -> ast.expr | None:
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


class _Classes:
    """The classes of one file and their member symbols, fields collected on demand."""

    def __init__(self, symbols: dict[str, Symbol]) -> None:
        self.symbols = symbols
        self.members: dict[str, list[Symbol]] = {}
        for q, sym in symbols.items():
            owner = q.rpartition(".")[0]
            if owner and owner in symbols and symbols[owner].kind is SymbolKind.CLASS:
                self.members.setdefault(owner, []).append(sym)
        self.memo: dict[str, list[_Field] | None] = {}

    def _base(self, qual: str, text: str) -> str | None:
        """The qualname of a base written ``text`` in the class ``qual``, if in this file."""
        if "=" in text.split("[", 1)[0]:
            return ""  # metaclass=..., a keyword of the class statement
        name = _last(_expr(text))
        if name in _NO_FIELDS:
            return ""
        text = text.split("[", 1)[0].strip()  # Base[T]: the class Base
        scope = qual.rpartition(".")[0]
        while True:  # a nested class may name a sibling (not correct Python: a near miss)
            cand = f"{scope}.{text}" if scope else text
            if cand in self.symbols and self.symbols[cand].kind is SymbolKind.CLASS:
                return cand
            if not scope:
                return None
            scope = scope.rpartition(".")[0]

    def fields(self, qual: str, depth: int = 0) -> list[_Field] | None:
        """Every ``__init__`` field of class ``qual`` (inherited first); None: not known."""
        if qual in self.memo:
            return self.memo[qual]
        self.memo[qual] = None  # a cycle (never in valid code) gives None
        cls = self.symbols[qual]
        merged: dict[str, _Field] = {}
        for text in reversed(cls.bases):
            base = self._base(qual, text)
            if base is None or depth > 20:
                return None
            for f in (self.fields(base, depth + 1) if base else []) or []:
                merged[f.name] = f
            if base and self.memo.get(base) is None:
                return None
        deco = _decorator(cls)
        if deco is not None:
            kw_all = isinstance(deco, ast.Call) and _is_true(_keyword(deco, "kw_only"))
            for f in _own_fields(cls, self.members.get(qual, []), kw_all) or []:
                merged[f.name] = f
        out = list(merged.values())
        self.memo[qual] = out
        return out


def _signature(fields: list[_Field]) -> str:
    def param(f: _Field) -> str:
        return f.name + (f"={f.default}" if f.default is not None else "")

    positional = [param(f) for f in fields if not f.kw_only]
    keyword = [param(f) for f in fields if f.kw_only]
    return ", ".join(["self", *positional, *(["*", *keyword] if keyword else [])])


def dataclass_inits(symbols: dict[str, Symbol]) -> list[Symbol]:
    """A ``Cls.__init__`` METHOD symbol for each dataclass of one file's ``symbols``
    whose ``__init__`` is synthesised (see the module docstring)."""
    classes = [s for s in symbols.values() if s.kind is SymbolKind.CLASS and _decorator(s)]
    if not classes:
        return []
    table = _Classes(symbols)
    out: list[Symbol] = []
    for cls in classes:
        qual = f"{cls.qualname}.__init__"
        if qual in symbols:
            continue  # its own __init__: @dataclass keeps it
        fields = table.fields(cls.qualname)
        if fields is None:
            continue  # a base from another file: the fields are not known here
        out.append(
            Symbol(
                path=cls.path,
                qualname=qual,
                kind=SymbolKind.METHOD,
                line=cls.line,
                end_line=cls.line,
                signature=_signature(fields),
                body_hash=_BODY,
                returns="None",
                value=SYNTHESISED,
            )
        )
    return out
