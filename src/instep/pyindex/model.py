"""The nouns of the static Python index: symbols, their kinds and registrations.

A :class:`Symbol` is one definition of one file at one version, as the symbol index
(``instep.pyindex.symbols``) finds it; a :class:`Registration` is an op, backend or
device key that a definition or a call claims. Impact analysis diffs and joins them,
the doctor's API scan lists them. Nothing here parses, diffs or decides.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any


class Vocab(str, Enum):
    """A string-valued enum that prints as its value (the impact vocabularies extend it)."""

    def __str__(self) -> str:
        return self.value


class SymbolKind(Vocab):
    FUNCTION = "function"  # module-level def
    CLASS = "class"
    METHOD = "method"  # def inside a class (qualname 'Class.method', nested classes too)
    ASSIGNMENT = "assignment"  # module-level name = value (config values, op registries)
    CLASS_ATTRIBUTE = "class_attribute"  # name = value in a class body
    BLOCK = "block"  # module-level statement that is not a def/class/assignment
    # a dynamic symbol of a shared object (instep.elfindex): a C++ function, or data
    NATIVE_FUNCTION = "native_function"
    NATIVE_DATA = "native_data"


SOURCE_ROOT = "src/"  # the src/ layout: 'src/pkg/mod.py' installs as 'pkg/mod.py'


def module_of(path: str) -> str:
    """'torch/_inductor/lowering.py' -> 'torch._inductor.lowering' (packages drop __init__);
    'src/werkzeug/routing.py' -> 'werkzeug.routing': a tree in the src/ layout imports its
    packages without the 'src.' (known exception: a package itself named ``src``)."""
    mod = path[:-3] if path.endswith(".py") else path
    mod = mod.replace("\\", "/").strip("/")
    if mod.startswith(SOURCE_ROOT) and mod != SOURCE_ROOT + "__init__":
        mod = mod[len(SOURCE_ROOT) :]
    mod = mod.replace("/", ".")
    return mod[: -len(".__init__")] if mod.endswith(".__init__") else mod


@dataclass(frozen=True)
class Registration:
    """A registration found in source: ``@register_lowering(aten.expand)`` and the like.

    ``key`` is normalised so that upstream and downstream compare: ops as
    ``aten.expand`` (overload kept separately in ``overload``), backends as
    ``backend:inductor``, device overrides as ``device_op_overrides:npu``.
    """

    registrar: str  # 'register_lowering', 'make_fallback', 'register_decomposition', ...
    key: str
    overload: str | None
    path: str
    line: int
    symbol: str | None = None  # qualname of the registered function, when there is one

    def as_dict(self) -> dict[str, Any]:
        return {
            "registrar": self.registrar,
            "key": self.key,
            "overload": self.overload,
            "at": f"{self.path}:{self.line}",
            "symbol": self.symbol,
        }


class Qualified:
    """Names of a symbol found at ``path`` as ``qualname`` (mixed into Symbol, SymbolChange)."""

    path: str
    qualname: str

    @property
    def module(self) -> str:
        return module_of(self.path)

    @property
    def dotted(self) -> str:
        """'torch._inductor.lowering.expand'"""
        return f"{self.module}.{self.qualname}"

    @property
    def ref(self) -> str:
        """'torch/_inductor/lowering.py::expand'"""
        return f"{self.path}::{self.qualname}"


@dataclass(frozen=True)
class Symbol(Qualified):
    """One definition in one version of one upstream (or downstream) file."""

    path: str
    qualname: str
    kind: SymbolKind
    line: int
    end_line: int
    signature: str | None = None  # 'x, sizes, implicit=False' (ast.unparse of the arguments)
    body_hash: str = ""  # hash of the normalised body (no docstring/comments/formatting)
    returns: str | None = None  # functions: the return annotation, unparsed
    decorators: tuple[str, ...] = ()  # unparsed decorator expressions
    bases: tuple[str, ...] = ()  # classes: unparsed base expressions
    value: str | None = None  # assignments: unparsed value (truncated for huge literals)
    calls: frozenset[str] = frozenset()  # names / attribute chains called in the body
    registrations: tuple[Registration, ...] = ()
    # blocks: names a def or class binds in any branch of a module-level if/try (sorted)
    binds: tuple[str, ...] = ()
    # functions: the body only declares (``...``, ``pass``, one ``raise``): a typing stub's
    # member looks like this (pyindex.neutral.is_stub_body)
    stub: bool = False
    # functions: the deprecation the def announces (``warnings.warn("x is deprecated, use
    # y", FutureWarning)``, ``log.warning("... deprecated ...")``, ``@deprecated("...")``):
    # its message; and the name a short body hands the call to (``return y(*args)``)
    deprecated: str | None = None
    delegates: str | None = None
