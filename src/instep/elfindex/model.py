"""The nouns of the native index: one ELF shared object's dynamic linking facts.

A :class:`SharedObject` is what the dynamic linker sees of one ``.so``: its name
(``DT_SONAME``), the libraries it needs (``DT_NEEDED``) and where it looks for them
(``DT_RPATH``/``DT_RUNPATH``), the symbols it exports (defined dynamic symbols of global,
weak or unique binding and default or protected visibility) and the symbols it takes from
others (undefined dynamic symbols, strong or weak). :class:`Unreadable` says why a file
could not be read as one. Nothing here reads files, demangles or compares.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from instep.pyindex.model import Vocab


class Binding(Vocab):
    GLOBAL = "global"
    WEAK = "weak"  # an undefined weak reference never fails a load: it resolves to null
    UNIQUE = "unique"  # STB_GNU_UNIQUE: one definition per process (inline statics)


class SymbolType(Vocab):
    FUNC = "func"
    OBJECT = "object"
    TLS = "tls"
    IFUNC = "ifunc"  # STT_GNU_IFUNC: a function chosen at load time
    COMMON = "common"
    NOTYPE = "notype"


class Visibility(Vocab):
    DEFAULT = "default"
    PROTECTED = "protected"  # exported, but bound inside its own object first


ELF_MAGIC = b"\x7fELF"

# the st_info / st_other values behind each member (ELF gABI, GNU extensions)
BINDING_CODES = {1: Binding.GLOBAL, 2: Binding.WEAK, 10: Binding.UNIQUE}
TYPE_CODES = {
    0: SymbolType.NOTYPE,
    1: SymbolType.OBJECT,
    2: SymbolType.FUNC,
    5: SymbolType.COMMON,
    6: SymbolType.TLS,
    10: SymbolType.IFUNC,
}
VISIBILITY_CODES = {0: Visibility.DEFAULT, 3: Visibility.PROTECTED}

_BINDINGS = tuple(Binding)
_TYPES = tuple(SymbolType)
_VISIBILITIES = tuple(Visibility)


def pack(binding: Binding, type_: SymbolType, visibility: Visibility) -> int:
    """One small int for a symbol's attributes (75,000 symbols are kept per library)."""
    return _BINDINGS.index(binding) * 64 + _TYPES.index(type_) * 8 + _VISIBILITIES.index(visibility)


def unpack(code: int) -> tuple[Binding, SymbolType, Visibility]:
    return _BINDINGS[code // 64], _TYPES[code // 8 % 8], _VISIBILITIES[code % 8]


@dataclass(frozen=True)
class DynamicSymbol:
    """One dynamic symbol as the linker sees it (``name`` is the mangled name)."""

    name: str
    defined: bool
    binding: Binding
    type: SymbolType
    visibility: Visibility = Visibility.DEFAULT

    @property
    def weak(self) -> bool:
        return self.binding is Binding.WEAK


@dataclass(frozen=True, eq=False)
class SharedObject:
    """The dynamic linking facts of one ELF shared object (or executable)."""

    machine: str  # e_machine as pyelftools names it: 'EM_X86_64', 'EM_AARCH64'
    elf_class: int  # 32 or 64
    soname: str | None
    needed: tuple[str, ...]  # DT_NEEDED, in order (the order the linker searches)
    rpath: tuple[str, ...] = ()  # DT_RPATH entries ($ORIGIN kept as written)
    runpath: tuple[str, ...] = ()  # DT_RUNPATH entries
    # mangled name -> pack(binding, type, visibility): exported (defined) symbols, and
    # the symbols it takes from others (undefined; visibility always default)
    exports: dict[str, int] = field(default_factory=dict)
    imports: dict[str, int] = field(default_factory=dict)

    def defines(self, name: str) -> bool:
        return name in self.exports

    def exported(self, name: str) -> DynamicSymbol | None:
        code = self.exports.get(name)
        if code is None:
            return None
        return DynamicSymbol(name, True, *unpack(code))

    def imported(self, name: str) -> DynamicSymbol | None:
        code = self.imports.get(name)
        if code is None:
            return None
        return DynamicSymbol(name, False, *unpack(code))

    def iter_imports(self):
        for name, code in self.imports.items():
            yield DynamicSymbol(name, False, *unpack(code))


@dataclass(frozen=True)
class Unreadable:
    """A file that could not be read as a shared object, and why (one line)."""

    reason: str  # 'not an ELF file', 'truncated: ...', 'another architecture (EM_AARCH64)'
