"""Static index of torchgen's ATen operator schema file, ``native_functions.yaml``: one
symbol per operator overload, so that a release or commit that adds, removes or changes
an overload's schema couples to the downstream places naming it (``aten.x.y``,
``torch.ops.aten.x.y``, ``"aten::x.y"``: :mod:`instep.impact.downstream.op_refs`).

A source tree keeps the file at ``aten/src/ATen/native/native_functions.yaml``, a wheel at
``torchgen/packaged/ATen/native/native_functions.yaml``. The YAML is read with PyYAML's
C loader (``CSafeLoader``, the pure-Python ``SafeLoader`` where libyaml is missing); each
entry's ``func:`` string (``add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) ->
Tensor``) is split by :func:`parse_schema`, a small parser of the schema grammar's
argument list. torchgen's own parser (``FunctionSchema.parse``) is not used: the
torchgen in a wheel is the analysed code, which is never imported, and the one in
instep's environment (when torch is installed at all) is of another version, whose
grammar may reject the newer file.

Each overload becomes a FUNCTION :class:`~instep.pyindex.model.Symbol` named
``aten::op.overload`` (``aten::op`` for the default overload) at the line of its
``- func:`` entry, whose signature is the schema after the name (``(Tensor self, ...) ->
Tensor``). Only the schema is compared: dispatch keys, tags and the rest of an entry are
not read. Nothing here matches downstream references (``join/op_couplings``).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

import yaml

from instep.pyindex.model import Symbol, SymbolKind
from instep.pyindex.symbols import FileIndex, index_of_declarations

try:  # libyaml's loader is ~10x faster; PyYAML wheels ship it, a source build may not
    from yaml import CSafeLoader as _Loader
except ImportError:  # pragma: no cover - depends on how PyYAML was built
    from yaml import SafeLoader as _Loader  # type: ignore[assignment]

log = logging.getLogger(__name__)

SCHEMA_FILES = (
    "aten/src/ATen/native/native_functions.yaml",
    "torchgen/packaged/ATen/native/native_functions.yaml",
)
NAMESPACE = "aten"
_FUNC_LINE = re.compile(r"^- func:[ \t]*(.+?)[ \t]*$", re.M)
_NAME = re.compile(r"[A-Za-z_]\w*(?:\.\w+)?$")


def is_schema_file(path: str) -> bool:
    """Whether ``path`` (relative, posix) is the operator schema file instep reads."""
    return path in SCHEMA_FILES


@dataclass(frozen=True)
class Argument:
    type: str  # 'Tensor(a!)', 'int[1]?', 'Scalar'
    name: str
    default: str | None
    kwarg_only: bool

    def __str__(self) -> str:
        return f"{self.type} {self.name}" + (f"={self.default}" if self.default else "")


@dataclass(frozen=True)
class Schema:
    op: str  # 'add'
    overload: str  # 'Tensor'; '' for the default overload
    arguments: tuple[Argument, ...]
    returns: str

    @property
    def qualname(self) -> str:
        """``aten::add.Tensor``; ``aten::add`` for the default overload."""
        return f"{NAMESPACE}::{self.op}" + (f".{self.overload}" if self.overload else "")

    def argument(self, name: str) -> Argument | None:
        return next((a for a in self.arguments if a.name == name), None)


def split_top(text: str) -> list[str]:
    """Split at commas outside brackets: ``int[2] a, Tensor(a!) b`` -> two parts."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def parse_schema(func: str) -> Schema:
    """One ``func:`` string of native_functions.yaml. A ``ValueError`` names what is wrong."""
    name, paren, rest = func.partition("(")
    name = name.strip()
    if not paren or not _NAME.match(name):
        raise ValueError(f"expected 'name.overload(args) -> returns', got {func!r}")
    depth, end = 1, -1
    for i, ch in enumerate(rest):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth == 0:
            end = i
            break
    if end < 0:
        raise ValueError(f"unbalanced parentheses in {func!r}")
    args: list[Argument] = []
    kwarg_only = False
    for part in split_top(rest[:end]):
        if part == "*":
            kwarg_only = True
            continue
        decl, eq, default = part.partition("=")
        typ, _, arg = decl.strip().rpartition(" ")
        if not typ or not arg.isidentifier():
            raise ValueError(f"expected 'Type name[=default]', got {part!r} in {func!r}")
        args.append(Argument(typ.strip(), arg, default.strip() if eq else None, kwarg_only))
    returns = rest[end + 1 :].strip().removeprefix("->").strip()
    op, _, overload = name.partition(".")
    return Schema(op, overload, tuple(args), returns)


def schema_of(symbol: Symbol) -> Schema | None:
    """The schema a symbol of this module was made from (None for any other symbol)."""
    if symbol.signature is None or not symbol.qualname.startswith(f"{NAMESPACE}::"):
        return None
    try:
        return parse_schema(symbol.qualname.split("::", 1)[1] + symbol.signature)
    except ValueError:
        return None


def declarations(path: str, text: str) -> list[Symbol]:
    """The overloads ``text`` declares, in order. Bad YAML raises ``ValueError``."""
    try:
        entries = yaml.load(text, Loader=_Loader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or exc
        raise ValueError(f"{path}{at}: not valid YAML ({problem})") from None
    if not isinstance(entries, list):
        raise ValueError(f"{path}: expected a YAML list of '- func: ...' entries")
    lines: dict[str, int] = {}
    line, pos = 1, 0
    for m in _FUNC_LINE.finditer(text):
        line += text.count("\n", pos, m.start())
        pos = m.start()
        lines.setdefault(m.group(1).strip("'\""), line)
    out: dict[str, Symbol] = {}
    for entry in entries:
        func = entry.get("func") if isinstance(entry, dict) else None
        if not isinstance(func, str):
            continue
        try:
            schema = parse_schema(func)
        except ValueError as exc:
            log.warning("%s: %s", path, exc)
            continue
        line = lines.get(func, 0)
        signature = func[len(func.partition("(")[0]) :]
        out.setdefault(
            schema.qualname,
            Symbol(
                path=path,
                qualname=schema.qualname,
                kind=SymbolKind.FUNCTION,
                line=line,
                end_line=line,
                signature=signature,
            ),
        )
    return list(out.values())


def index_schema_file(path: str, text: str) -> FileIndex:
    """The index of a schema file; bad input gives an empty index with ``error`` set."""
    try:
        return index_of_declarations(path, text, declarations(path, text))
    except ValueError as exc:
        log.warning("%s", exc)
        return FileIndex(path, {}, {}, [], error=str(exc))


def breaking_changes(old: Schema, new: Schema) -> list[str]:
    """How a call or a registration that binds the old schema's arguments by name stops
    binding: an argument removed or renamed, one added without a default. Positions are
    compared too: a removed argument's place taken by another is reported as a rename."""
    out: list[str] = []
    new_names = {a.name for a in new.arguments}
    old_names = {a.name for a in old.arguments}
    gone = [a for a in old.arguments if a.name not in new_names]
    added = [a for a in new.arguments if a.name not in old_names]
    for a in gone:
        twin = next((b for b in added if b.type == a.type and b.kwarg_only == a.kwarg_only), None)
        if twin is not None:
            added.remove(twin)
            out.append(f"argument '{a.name}' renamed to '{twin.name}'")
        else:
            out.append(f"argument '{a.name}' removed")
    for b in added:
        if b.default is None:
            out.append(f"argument '{b.name}' added without a default")
    return out
