"""Linked-symbol coupling: which dynamic symbols each downstream shared object takes from
the old upstream's libraries, and what the new upstream does with each.

For every readable downstream shared object (a library or an extension module), its
undefined dynamic symbols are resolved the way the linker bound them: in ``DT_NEEDED``
order, over the downstream's own objects and the old upstream's libraries it names
(``torch/lib/libtorch_cpu.so``, ``libc10.so``, ``libtorch_python.so``, ...); the first
that exports the name provides it. A symbol an upstream library provides is *taken from
upstream*; the rest come from the downstream itself or from libraries outside both
(``libascendcl.so``, ``libstdc++.so.6``) and are not checked. Only the upstream
libraries the downstream names are read.

On the new upstream each taken symbol is (:class:`Fate`):

- ``present``: the new version of its library still exports it;
- ``moved_loaded`` / ``moved_unloaded``: another new-upstream library exports it, one the
  object still loads (its ``DT_NEEDED`` closure: the library loads, the dynamic linker
  searches the whole closure) or one it does not. The closure is searched first, then
  the other libraries, smallest first, and only for missing symbols: a release where
  nothing is missing reads no other library (``libtorch_cuda.so`` is read only when a
  symbol is missing and the object's closure holds it);
- ``signature``: gone, and the new upstream exports a new overload of the same qualified
  C++ name (demangled) that the old library did not: the parameter list changed;
- ``removed``: gone, no new overload (overloads that remain are named);
- ``library_gone``: the new upstream has no library of that name.

Which Python place loads each object (:mod:`instep.impact.downstream.native_loads`),
where each symbol was declared (:mod:`instep.impact.upstream.native_headers`) and the
verdicts are :mod:`instep.impact.join.native_units`'s: one unit per downstream object
that loses symbols. Nothing here reads files itself: it asks ``SharedObjectFiles``.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field

from instep.elfindex.demangle import Declaration, demangle, source_names, split_declaration
from instep.elfindex.files import SharedObjectFiles
from instep.elfindex.model import SharedObject, Unreadable
from instep.impact.model import (
    UnreadObject,
)
from instep.pyindex.model import Vocab

MAX_CANDIDATES = 2000  # new-upstream names demangled per missing symbol, at most
_ABI_TAG = re.compile(r"\[abi:\w+\]")
# names of the C++ runtime (std::, __gnu_cxx::, __cxxabiv1::, the __cxa_ ABI, the unwinder)
# that torch's libraries re-export because they link the newer parts of the toolchain's
# libstdc++ statically (std::filesystem, std::__glibcxx_assert_fail, ...): the object's
# own libstdc++ has them only when it is as new as that toolchain (fact cxx_runtime). A
# std:: template over a torch type (std::vector<at::Tensor>::..., a nested name N2at...)
# is no runtime name: only torch has it
CXX_RUNTIME_NAME = re.compile(
    r"^(?:_Z(?:T[VISTHW])?N?[rVKRO]*(?:St|S[aboisd]|9__gnu_cxx|10__cxxabiv1)(?!.*N\d)"
    r"|__cxa_|__gxx_|_Unwind_)"
)
CXX_RUNTIME_LIBRARY = re.compile(r"^lib(?:stdc\+\+|c\+\+)\.so")


class Fate(Vocab):
    PRESENT = "present"
    MOVED_LOADED = "moved_loaded"
    MOVED_UNLOADED = "moved_unloaded"
    SIGNATURE = "signature"
    REMOVED = "removed"
    LIBRARY_GONE = "library_gone"


MISSING = frozenset({Fate.MOVED_UNLOADED, Fate.SIGNATURE, Fate.REMOVED, Fate.LIBRARY_GONE})


@dataclass(frozen=True)
class TakenSymbol:
    """A symbol a downstream object takes from an old-upstream library."""

    obj: str  # the downstream object's path
    name: str  # mangled, as the object's .dynsym names it
    weak: bool  # a weak reference: a missing definition resolves to null, the load succeeds
    library: str  # the old-upstream library (path) that provided it


@dataclass(frozen=True)
class SymbolFate:
    taken: TakenSymbol
    fate: Fate
    where: str | None = None  # moves: the new library that exports it
    new_overloads: tuple[str, ...] = ()  # signature: the new overloads (mangled)
    kept_overloads: tuple[str, ...] = ()  # removed: overloads of the name that remain


@dataclass
class LinkedFindings:
    """What :class:`LinkedSymbols` found: every taken symbol's fate, and what it read."""

    objects: list[str] = field(default_factory=list)  # downstream objects read
    unreadable: list[UnreadObject] = field(default_factory=list)
    fates: list[SymbolFate] = field(default_factory=list)
    upstream_libraries: list[str] = field(default_factory=list)  # old-upstream libraries read

    @property
    def missing(self) -> list[SymbolFate]:
        return [f for f in self.fates if f.fate in MISSING]


def _file_name(path: str) -> str:
    return path.rsplit("/", 1)[-1]


def _by_file_name(files: SharedObjectFiles) -> dict[str, str]:
    """File name -> path; a name held twice goes to the shallowest path (``torch/lib``)."""
    out: dict[str, str] = {}
    for path in sorted(files.paths(), key=lambda p: (p.count("/"), p)):
        out.setdefault(_file_name(path), path)
    return out


class LinkedSymbols:
    """The linked-symbol check of one downstream against an old and a new upstream."""

    def __init__(
        self, old: SharedObjectFiles, new: SharedObjectFiles, down: SharedObjectFiles
    ) -> None:
        self.old, self.new, self.down = old, new, down
        self.old_names = _by_file_name(old)
        self.new_names = _by_file_name(new)
        self.down_paths = down.paths()
        self.down_names = _by_file_name(down)
        self._machine: str | None = None
        self._names: dict[str, str] = {}  # new-upstream library -> its exports, one per line

    # reading -------------------------------------------------------------------------

    def _upstream(self, files: SharedObjectFiles, path: str) -> SharedObject | None:
        found = files.read(path)
        if isinstance(found, SharedObject):
            if self._machine is None:
                self._machine = found.machine
            return found
        return None

    def _down(self, path: str) -> SharedObject | None:
        found = self.down.read(path)
        return found if isinstance(found, SharedObject) else None

    def resolve_down(self, obj: str, name: str) -> str | None:
        """The downstream object a ``DT_NEEDED`` name of ``obj`` loads: through its
        ``$ORIGIN``-relative RPATH/RUNPATH, else any downstream file of that name."""
        so = self._down(obj)
        here = obj.rpartition("/")[0]
        for entry in (*(so.runpath or so.rpath),) if so is not None else ():
            if not entry.startswith("$ORIGIN"):
                continue
            rel = entry[len("$ORIGIN") :].strip("/")
            candidate = _normalise("/".join(p for p in (here, rel, name) if p))
            if candidate in self.down:
                return candidate
        return self.down_names.get(name)

    # the check -----------------------------------------------------------------------

    def check(self) -> LinkedFindings:
        out = LinkedFindings()
        readable: dict[str, SharedObject] = {}
        for path in self.down_paths:
            found = self.down.read(path)
            if isinstance(found, Unreadable):
                out.unreadable.append(UnreadObject(path, found.reason))
            else:
                readable[path] = found
        old_read: set[str] = set()
        for so in readable.values():
            for name in so.needed:
                lib = self.old_names.get(name)
                if lib is not None and self._upstream(self.old, lib) is not None:
                    old_read.add(lib)
        for path, so in list(readable.items()):
            if self._machine is not None and so.machine != self._machine:
                out.unreadable.append(
                    UnreadObject(
                        path,
                        f"another architecture ({so.machine}; the upstream is {self._machine})",
                    )
                )
                del readable[path]
        out.objects = sorted(readable)
        out.upstream_libraries = sorted(old_read)
        for path in out.objects:
            taken = list(self._taken(path, readable[path]))
            out.fates += self._fates(path, taken)
        out.unreadable.sort(key=lambda u: u.path)
        return out

    def _taken(self, path: str, so: SharedObject) -> Iterator[TakenSymbol]:
        """The object's undefined symbols that an old-upstream library provides, bound in
        ``DT_NEEDED`` order (a downstream library that exports the name first keeps it)."""
        providers: list[tuple[bool, SharedObject, str]] = []
        for name in so.needed:
            down = self.resolve_down(path, name)
            if down is not None and down != path:
                dso = self._down(down)
                if dso is not None:
                    providers.append((False, dso, down))
                continue
            lib = self.old_names.get(name)
            if lib is not None:
                uso = self._upstream(self.old, lib)
                if uso is not None:
                    providers.append((True, uso, lib))
        if not any(up for up, _, _ in providers):
            return
        for sym in so.iter_imports():
            for upstream, provider, where in providers:
                if sym.name in provider.exports:
                    if upstream:
                        yield TakenSymbol(path, sym.name, sym.weak, where)
                    break

    def _fates(self, path: str, taken: list[TakenSymbol]) -> list[SymbolFate]:
        fates: dict[tuple[str, str], SymbolFate] = {}
        missing: list[TakenSymbol] = []
        # downstream libraries the object loads: one that exports a name torch drops
        # still provides it (bound to torch's copy before, to the downstream's now)
        own = [
            self._down(p)
            for p in (self.resolve_down(path, n) for n in self._down(path).needed)  # type: ignore[union-attr]
            if p is not None and p != path
        ]
        for t in taken:
            new_path = self.new_names.get(_file_name(t.library))
            new_so = self._upstream(self.new, new_path) if new_path else None
            if new_so is not None and t.name in new_so.exports:
                fates[(t.name, t.library)] = SymbolFate(t, Fate.PRESENT, new_path)
                continue
            keeper = next((so for so in own if so is not None and t.name in so.exports), None)
            if keeper is not None:
                fates[(t.name, t.library)] = SymbolFate(t, Fate.PRESENT, keeper.soname)
            elif new_so is None:
                fates[(t.name, t.library)] = SymbolFate(t, Fate.LIBRARY_GONE)
            else:
                missing.append(t)
        if missing:
            for t, fate in self._missing_fates(path, missing):
                fates[(t.name, t.library)] = fate
        return [fates[(t.name, t.library)] for t in taken]

    def _closure(self, path: str) -> Iterator[str]:
        """The new-upstream libraries ``path`` loads, breadth first over ``DT_NEEDED``
        (through downstream objects too), each read as it is reached."""
        seen_down = {path}
        seen_up: set[str] = set()
        queue: deque[tuple[bool, str]] = deque([(False, path)])
        while queue:
            upstream, where = queue.popleft()
            so = self._upstream(self.new, where) if upstream else self._down(where)
            if so is None:
                continue
            for name in so.needed:
                if not upstream:
                    down = self.resolve_down(where, name)
                    if down is not None:
                        if down not in seen_down:
                            seen_down.add(down)
                            queue.append((False, down))
                        continue
                lib = self.new_names.get(name)
                if lib is not None and lib not in seen_up:
                    seen_up.add(lib)
                    yield lib
                    queue.append((True, lib))

    def _missing_fates(
        self, path: str, missing: list[TakenSymbol]
    ) -> Iterator[tuple[TakenSymbol, SymbolFate]]:
        left = {t.name: t for t in missing}
        closure = []
        for lib in self._closure(path):
            closure.append(lib)
            so = self._upstream(self.new, lib)
            if so is None:
                continue
            for name in [n for n in left if n in so.exports]:
                t = left.pop(name)
                if lib != self.new_names.get(_file_name(t.library)):
                    yield t, SymbolFate(t, Fate.MOVED_LOADED, lib)
                else:  # pragma: no cover - the same library was checked before
                    yield t, SymbolFate(t, Fate.PRESENT, lib)
            if not left:
                return
        others = sorted(
            (p for p in self.new.paths() if p not in closure),
            key=lambda p: (self.new.size(p), p),
        )
        for lib in others:
            so = self._upstream(self.new, lib)
            if so is None:
                continue
            for name in [n for n in left if n in so.exports]:
                t = left.pop(name)
                yield t, SymbolFate(t, Fate.MOVED_UNLOADED, lib)
            if not left:
                return
        yield from self._overloads(list(left.values()), closure)

    def _overloads(
        self, gone: list[TakenSymbol], closure: list[str]
    ) -> Iterator[tuple[TakenSymbol, SymbolFate]]:
        """Removed or signature changed: the new overloads of each gone name, searched in
        the new version of its library, then in the libraries the object loads."""
        for t in gone:
            wanted = _key(split_declaration(demangle(t.name)))
            old_so = self._upstream(self.old, t.library)
            new_path = self.new_names.get(_file_name(t.library))
            token = max(source_names(t.name), key=len, default="")
            new_ones: list[str] = []
            kept: list[str] = []
            if wanted is not None and token:
                for lib in dict.fromkeys([p for p in (new_path, *closure) if p]):
                    so = self._upstream(self.new, lib)
                    if so is None:
                        continue
                    for name in self._containing(lib, so, token)[:MAX_CANDIDATES]:
                        if name == t.name or _key(split_declaration(demangle(name))) != wanted:
                            continue
                        if old_so is not None and name in old_so.exports:
                            kept.append(name)
                        else:
                            new_ones.append(name)
            if new_ones:
                yield t, SymbolFate(t, Fate.SIGNATURE, new_path, tuple(sorted(new_ones)))
            else:
                yield t, SymbolFate(t, Fate.REMOVED, None, kept_overloads=tuple(sorted(kept)))

    def _containing(self, lib: str, so: SharedObject, token: str) -> list[str]:
        """The exported names of ``so`` that contain ``token``: one C-speed scan of the
        names joined by newlines, not a Python loop over 75,000 names per token."""
        blob = self._names.get(lib)
        if blob is None:
            blob = self._names[lib] = "\n".join(so.exports)
        out = []
        pos = blob.find(token)
        while pos >= 0:
            start = blob.rfind("\n", 0, pos) + 1
            end = blob.find("\n", pos)
            end = len(blob) if end < 0 else end
            out.append(blob[start:end])
            pos = blob.find(token, end)
        return out


def _key(decl: Declaration) -> str | None:
    """What two overloads of one function share: the qualified name (ABI tags dropped);
    None for data, which has no overloads."""
    if decl.parameters is None:
        return None
    return _ABI_TAG.sub("", decl.qualified)


def _normalise(path: str) -> str:
    parts: list[str] = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if parts:
                parts.pop()
            continue
        parts.append(part)
    return "/".join(parts)
