"""Read one ELF shared object's dynamic linking facts (:class:`~.model.SharedObject`).

pyelftools locates what is needed — the ELF class, byte order and machine, the dynamic
symbol table and its string table (from the section headers, else from the dynamic
segment's ``DT_SYMTAB``/``DT_STRTAB`` and hash table), and the dynamic section's
``DT_NEEDED``/``DT_SONAME``/``DT_RPATH``/``DT_RUNPATH`` — and the symbol table itself is
decoded here in bulk: ``struct.iter_unpack`` over the table's bytes with the entry format
of the class and byte order pyelftools reports, names cut from the string table's bytes.
pyelftools' own ``iter_symbols()`` builds a parsed structure per entry: 5.5 s for the
75,415 dynamic symbols of torch 2.13.0's ``libtorch_cpu.so``, against about 0.1 s here.

The stream must be seekable and cheap to seek (a real file: see :mod:`.files` for zip
members). Only the headers, the dynamic section and the two tables are read — about
8 MB of the 434 MB of ``libtorch_cpu.so``. Symbol versions (``.gnu.version``) are not
read: names are compared without them (torch's libraries define no versioned symbols).
Nothing here demangles, caches or compares.
"""

from __future__ import annotations

import struct
from typing import BinaryIO

from elftools.common.exceptions import ELFError, ELFParseError
from elftools.construct import ConstructError
from elftools.elf.dynamic import DynamicSection, DynamicSegment
from elftools.elf.elffile import ELFFile

from instep.elfindex.model import (
    BINDING_CODES,
    ELF_MAGIC,
    TYPE_CODES,
    VISIBILITY_CODES,
    Binding,
    SharedObject,
    SymbolType,
    Unreadable,
    Visibility,
    pack,
)

SHN_UNDEF = 0
# symbol entry layouts (Elf32_Sym / Elf64_Sym) and where st_name/info/other/shndx sit
_LAYOUT = {64: ("IBBHQQ", 24, (0, 1, 2, 3)), 32: ("IIIBBH", 16, (0, 3, 4, 5))}


class UnreadableObject(Exception):
    """The file is no readable ELF shared object; ``str()`` says why in one line."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason

    def record(self) -> Unreadable:
        return Unreadable(self.reason)


def read_shared_object(stream: BinaryIO) -> SharedObject:
    """The dynamic linking facts of the ELF file in ``stream`` (seekable)."""
    stream.seek(0)
    head = stream.read(len(ELF_MAGIC))
    if head != ELF_MAGIC:
        raise UnreadableObject("not an ELF file")
    try:
        elf = ELFFile(stream)
        located = _locate(elf)
        if located is None:
            raise UnreadableObject("no dynamic symbol table (not a shared object?)")
        symtab_offset, count, strtab_offset, strtab_size, dynamic = located
        tags = _tags(dynamic)
        machine = str(elf.header["e_machine"])
        elf_class = int(elf.elfclass)
        little = bool(elf.little_endian)
    except (ELFError, ELFParseError, ConstructError, struct.error, ValueError, EOFError) as exc:
        raise UnreadableObject(f"truncated or malformed ELF ({_one_line(exc)})") from None
    table = _read_at(stream, symtab_offset, count * _LAYOUT[elf_class][1], ".dynsym")
    strings = _read_at(stream, strtab_offset, strtab_size, ".dynstr")
    exports, imports = decode_symbols(table, strings, elf_class, little)
    return SharedObject(
        machine=machine,
        elf_class=elf_class,
        soname=tags["DT_SONAME"][0] if tags["DT_SONAME"] else None,
        needed=tuple(tags["DT_NEEDED"]),
        rpath=_paths(tags["DT_RPATH"]),
        runpath=_paths(tags["DT_RUNPATH"]),
        exports=exports,
        imports=imports,
    )


def _locate(elf: ELFFile):
    """(symbol table offset, entry count, string table offset and size, the dynamic
    section or segment), from the section headers, else from the dynamic segment."""
    dynsym = dynamic = None
    for section in elf.iter_sections():
        kind = section["sh_type"]
        if kind == "SHT_DYNSYM":
            dynsym = section
        elif isinstance(section, DynamicSection):
            dynamic = section
    if dynsym is not None:
        strtab = elf.get_section(dynsym["sh_link"])
        entsize = dynsym["sh_entsize"] or _LAYOUT[elf.elfclass][1]
        return (
            dynsym["sh_offset"],
            dynsym["sh_size"] // entsize,
            strtab["sh_offset"],
            strtab["sh_size"],
            dynamic,
        )
    # no section headers (stripped by sstrip, or cut off): the dynamic segment says it all
    segment = next((s for s in elf.iter_segments() if isinstance(s, DynamicSegment)), None)
    if segment is None:
        return None
    sizes = {t.entry.d_tag: t.entry.d_val for t in segment.iter_tags()}
    if "DT_SYMTAB" not in sizes or "DT_STRTAB" not in sizes:
        return None
    _, symtab_offset = segment.get_table_offset("DT_SYMTAB")
    _, strtab_offset = segment.get_table_offset("DT_STRTAB")
    return symtab_offset, segment.num_symbols(), strtab_offset, sizes.get("DT_STRSZ", 0), segment


def _tags(dynamic) -> dict[str, list[str]]:
    tags: dict[str, list[str]] = {
        "DT_NEEDED": [],
        "DT_SONAME": [],
        "DT_RPATH": [],
        "DT_RUNPATH": [],
    }
    if dynamic is None:
        return tags
    for tag in dynamic.iter_tags():
        kind = tag.entry.d_tag
        if kind == "DT_NEEDED":
            tags[kind].append(tag.needed)
        elif kind == "DT_SONAME":
            tags[kind].append(tag.soname)
        elif kind == "DT_RPATH":
            tags[kind].append(tag.rpath)
        elif kind == "DT_RUNPATH":
            tags[kind].append(tag.runpath)
    return tags


def _paths(values: list[str]) -> tuple[str, ...]:
    return tuple(p for v in values for p in v.split(":") if p)


def _read_at(stream: BinaryIO, offset: int, size: int, what: str) -> bytes:
    stream.seek(offset)
    data = stream.read(size)
    if len(data) != size:
        raise UnreadableObject(f"truncated: {what} ends past the end of the file")
    return data


def decode_symbols(
    table: bytes, strings: bytes, elf_class: int, little_endian: bool
) -> tuple[dict[str, int], dict[str, int]]:
    """(exported, imported) ``name -> pack(...)`` of a dynamic symbol table's bytes.

    Exported: defined, global/weak/unique, default/protected visibility (hidden and
    internal symbols cannot be bound from outside). Imported: undefined and named.
    Local symbols, sections and file symbols are neither."""
    fmt, size, (i_name, i_info, i_other, i_shndx) = _LAYOUT[elf_class]
    fmt = ("<" if little_endian else ">") + fmt
    exports: dict[str, int] = {}
    imports: dict[str, int] = {}
    index = strings.index
    codes: dict[tuple[int, int, bool], int | None] = {}
    for entry in struct.iter_unpack(fmt, table[: len(table) - len(table) % size]):
        name_at = entry[i_name]
        if not name_at:
            continue
        info, other = entry[i_info], entry[i_other]
        undefined = entry[i_shndx] == SHN_UNDEF
        key = (info, other & 3, undefined)
        code = codes.get(key, -1)
        if code == -1:
            code = codes[key] = _code(info, other & 3, undefined)
        if code is None:
            continue
        try:
            name = strings[name_at : index(b"\0", name_at)].decode("utf-8", "surrogateescape")
        except ValueError:  # no terminating NUL: a name cut off by a truncated table
            raise UnreadableObject("truncated: a symbol name runs past .dynstr") from None
        (imports if undefined else exports)[name] = code
    return exports, imports


def _code(info: int, visibility: int, undefined: bool) -> int | None:
    """pack() of an entry's attributes; None for an entry that is neither exported nor
    imported (local, hidden, a section or file symbol)."""
    binding = BINDING_CODES.get(info >> 4)
    type_ = TYPE_CODES.get(info & 0xF)
    if binding is None or type_ is None:
        return None
    if undefined:
        return pack(binding, type_, Visibility.DEFAULT)
    vis = VISIBILITY_CODES.get(visibility)
    if vis is None:
        return None
    return pack(binding, type_, vis)


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 160 else text[:159] + "…"


__all__ = [
    "Binding",
    "SymbolType",
    "UnreadableObject",
    "decode_symbols",
    "read_shared_object",
]
