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
where each symbol was declared (:class:`HeaderSearch`, only for the symbols reported)
and the verdicts (rows ``linked_symbol.*`` of ``verdict_rules.toml``) are applied by
:func:`native_units`: one unit per downstream object that loses symbols, its couplings
one per symbol, grouped in the title by the header that declared them (else their
namespace). Nothing here reads files itself: it asks ``SharedObjectFiles``.
"""

from __future__ import annotations

import re
from collections import defaultdict, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from instep.elfindex.demangle import Declaration, demangle, source_names, split_declaration
from instep.elfindex.files import SharedObjectFiles
from instep.elfindex.model import SharedObject, Unreadable
from instep.impact.downstream.native_loads import LoadSite
from instep.impact.join.verdicts import decide
from instep.impact.model import (
    ChangeKind,
    Coupling,
    CouplingKind,
    Reference,
    Stage,
    SymbolChange,
    UnreadObject,
    UpstreamChange,
)
from instep.pyindex.model import Symbol, SymbolKind, Vocab

MAX_CANDIDATES = 2000  # new-upstream names demangled per missing symbol, at most
_ABI_TAG = re.compile(r"\[abi:\w+\]")
# names of the C++ runtime (std::, __gnu_cxx::, __cxxabiv1::, the __cxa_ ABI, the unwinder)
# that torch's libraries re-export because they link the newer parts of the toolchain's
# libstdc++ statically (std::filesystem, std::__glibcxx_assert_fail, ...): the object's
# own libstdc++ has them only when it is as new as that toolchain (fact cxx_runtime). A
# std:: template over a torch type (std::vector<at::Tensor>::..., a nested name N2at...)
# is no runtime name: only torch has it
_CXX_RUNTIME = re.compile(
    r"^(?:_Z(?:T[VISTHW])?N?[rVKRO]*(?:St|S[aboisd]|9__gnu_cxx|10__cxxabiv1)(?!.*N\d)"
    r"|__cxa_|__gxx_|_Unwind_)"
)
_CXX_RUNTIME_LIBS = re.compile(r"^lib(?:stdc\+\+|c\+\+)\.so")


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

    def _resolve_down(self, obj: str, name: str) -> str | None:
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
            down = self._resolve_down(path, name)
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
            for p in (self._resolve_down(path, n) for n in self._down(path).needed)  # type: ignore[union-attr]
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
                    down = self._resolve_down(where, name)
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


# --- headers ---------------------------------------------------------------------------


class HeaderSearch:
    """Where a C++ declaration sits in a release's installed headers: the header that
    names the function after (or inside) its scope's namespaces and classes. Headers are
    read when first needed, and asked only for the symbols a report names."""

    def __init__(self, headers) -> None:
        self.headers = headers
        self._texts: dict[str, str] = {}
        self._having: dict[str, list[str]] = {}  # word -> headers whose text holds it

    def _text(self, path: str) -> str:
        text = self._texts.get(path)
        if text is None:
            text = self._texts[path] = self.headers.read(path)
        return text

    def _with(self, word: str) -> list[str]:
        found = self._having.get(word)
        if found is None:
            found = self._having[word] = [p for p in self.headers.paths() if word in self._text(p)]
        return found

    def find(self, decl: Declaration, only: str | None = None) -> tuple[str, int] | None:
        """(header path, line) of ``decl``'s declaration; with ``only``, in that header."""
        name = _ABI_TAG.sub("", decl.name).split("<", 1)[0]
        if not name or not (_word(name) or name.startswith("operator")):
            return None
        scope = [
            _ABI_TAG.sub("", p).split("<", 1)[0]
            for p in _split_scope(decl.scope)
            if p and not p.startswith("(")
        ]
        words = [w for w in (*scope, name) if _word(w)]
        if not words:
            return None
        longest = max(words, key=len)
        paths = [only] if only is not None else self._with(longest)
        call = decl.parameters is not None
        pattern = re.compile(
            (re.escape(name) + r"\s*\(") if call else (r"\b" + re.escape(name) + r"\b")
        )
        best: tuple[int, int, str, int] | None = None
        for path in paths:
            text = self._text(path)
            if any(w not in text for w in words):
                continue
            found = _declaration_line(text, scope, pattern)
            if found is None:
                continue
            line, matched = found
            rank = (-matched, path.count("/"), path, line)
            if best is None or rank < best:
                best = rank
        if best is None:
            return None
        return best[2], best[3]


def _word(text: str) -> bool:
    return text.replace("_", "a").isalnum()


def _split_scope(scope: str) -> list[str]:
    parts, depth, cur = [], 0, []
    i = 0
    while i < len(scope):
        ch = scope[i]
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth -= 1
        if depth == 0 and scope.startswith("::", i):
            parts.append("".join(cur))
            cur = []
            i += 2
            continue
        cur.append(ch)
        i += 1
    parts.append("".join(cur))
    return parts


def _declaration_line(text: str, scope: list[str], pattern: re.Pattern) -> tuple[int, int] | None:
    """(line, scope parts found before it) of the first match of ``pattern`` after the
    innermost scope part the header opens as a namespace, class, struct or union."""
    start = 0
    matched = 0
    for part in scope:
        opener = re.compile(
            r"\b(?:namespace|class|struct|union)\b[^\n;{}()]*?\b" + re.escape(part) + r"\b"
        )
        m = opener.search(text, start)
        if m is None:
            continue
        start = m.start()
        matched += 1
    m = pattern.search(text, start)
    if m is None:
        return None
    return text.count("\n", 0, m.start()) + 1, matched


# --- units and couplings ------------------------------------------------------------------


@dataclass(frozen=True)
class Loading:
    """How a downstream object gets loaded: the Python place (None: none found), whether
    at import, and the chain of objects from that place to it."""

    site: LoadSite | None
    chain: tuple[str, ...] = ()  # extension module -> ... -> the object


def loadings(
    findings_objects: list[str], sites: list[LoadSite], needed_of: Callable[[str], list[str]]
) -> dict[str, Loading]:
    """Per downstream object, the first place that loads it (at import before when
    called; shallow files first), following ``DT_NEEDED`` among the downstream objects."""
    order = sorted(sites, key=lambda s: (not s.at_import, s.path.count("/"), s.path, s.line))
    out: dict[str, Loading] = {}
    for site in order:
        queue = deque([(site.library, (site.library,))])
        while queue:
            obj, chain = queue.popleft()
            if obj in out:
                continue
            out[obj] = Loading(site, chain)
            for dep in needed_of(obj):
                if dep not in out:
                    queue.append((dep, (*chain, dep)))
    for obj in findings_objects:
        out.setdefault(obj, Loading(None))
    return out


def native_units(
    findings: LinkedFindings,
    loading: dict[str, Loading],
    old_headers: HeaderSearch | None,
    new_headers: HeaderSearch | None,
    labels: dict[str, str],
    needs: dict[str, tuple[str, ...]] | None = None,
) -> list[tuple[UpstreamChange, list[Coupling]]]:
    """One unit per downstream object that loses or moves symbols, with one coupling per
    symbol, decided by the ``linked_symbol.*`` rules (``needs``: each object's
    ``DT_NEEDED``, for the C++ runtime it loads)."""
    needs = needs or {}
    by_obj: dict[str, list[SymbolFate]] = defaultdict(list)
    for f in findings.fates:
        if f.fate is not Fate.PRESENT:
            by_obj[f.taken.obj].append(f)
    out = []
    for obj in sorted(by_obj):
        fates = sorted(by_obj[obj], key=lambda f: (f.taken.library, demangle(f.taken.name)))
        load = loading.get(obj, Loading(None))
        changes: list[SymbolChange] = []
        couplings: list[Coupling] = []
        groups: dict[str, int] = defaultdict(int)
        used: set[str] = set()
        for f in fates:
            change, group, declared = _change(f, old_headers, new_headers, labels, used)
            groups[group] += 1
            changes.append(change)
            couplings.append(_coupling(f, change, load, declared, labels, needs.get(obj, ())))
        libs = sorted({f.taken.library for f in fates})
        missing = sum(1 for f in fates if f.fate in MISSING)
        head = (
            f"{obj}: {missing} linked symbol(s) the new upstream no longer gives it"
            if missing
            else f"{obj}: {len(fates)} linked symbol(s) moved to other libraries"
        )
        shown = sorted(groups.items(), key=lambda kv: (-kv[1], kv[0]))
        title = (
            head
            + f" (from {', '.join(_file_name(lib) for lib in libs)}): "
            + ", ".join(f"{g} ×{n}" for g, n in shown[:6])
            + (f" +{len(shown) - 6} more groups" if len(shown) > 6 else "")
        )
        unit = UpstreamChange(
            id=f"{obj} (linked symbols)",
            title=title,
            unit_kind="library",
            files=libs,
            changes=changes,
        )
        out.append((unit, couplings))
    return out


def _change(
    f: SymbolFate,
    old_headers: HeaderSearch | None,
    new_headers: HeaderSearch | None,
    labels: dict[str, str],
    used: set[str],
) -> tuple[SymbolChange, str, str]:
    """The symbol's change, its group (the old header, else the namespace) and where it
    was and is declared (text)."""
    t = f.taken
    decl = split_declaration(demangle(t.name))
    kind_of = SymbolKind.NATIVE_FUNCTION if decl.parameters is not None else SymbolKind.NATIVE_DATA
    old_at = old_headers.find(decl) if old_headers is not None else None
    new_at = None
    new_decl = decl
    if f.fate is Fate.SIGNATURE and f.new_overloads:
        new_decl = split_declaration(demangle(f.new_overloads[0]))
    if new_headers is not None and old_at is not None:
        new_at = new_headers.find(new_decl, only=old_at[0]) or (
            new_headers.find(new_decl) if f.fate is Fate.SIGNATURE else None
        )
    group = old_at[0].split("/include/", 1)[-1] if old_at else (decl.scope or "(global)")
    qualname = (
        decl.qualified
        + (decl.parameters or "")
        + (f" {decl.qualifiers}" if decl.qualifiers else "")
    )
    if qualname in used:
        qualname = f"{qualname} [{t.name}]"  # C1/C2 constructors, D0/D1/D2 destructors
    used.add(qualname)
    # the symbol's place is its declaration (header:line) when found, else its library
    old_sym = Symbol(
        old_at[0] if old_at else t.library,
        qualname,
        kind_of,
        old_at[1] if old_at else 0,
        0,
        _bare(decl.parameters),
    )
    new_sym = None
    detail = ""
    kind = ChangeKind.REMOVED
    renamed_from = None
    path = t.library
    if f.fate is Fate.SIGNATURE:
        kind = ChangeKind.SIGNATURE
        # one per parameter list: C1/C2 constructors and D0/D1/D2 destructors repeat them
        news = list(
            {
                d.parameters: d for d in (split_declaration(demangle(n)) for n in f.new_overloads)
            }.values()
        )
        new_params = " | ".join(d.parameters or "" for d in news)
        new_sym = Symbol(
            new_at[0] if new_at else f.where or t.library,
            qualname,
            kind_of,
            new_at[1] if new_at else 0,
            0,
            " | ".join(_bare(d.parameters) or "" for d in news),
        )
        if all(d.parameters == decl.parameters for d in news):
            # same parameters, another mangled name: the return type or an ABI tag changed
            new_full = " | ".join(dict.fromkeys(demangle(n) for n in f.new_overloads))
            detail = f"signature: {demangle(t.name)} -> {new_full}"
        else:
            detail = f"signature: {decl.parameters} -> {new_params}"
    elif f.fate in (Fate.MOVED_LOADED, Fate.MOVED_UNLOADED):
        kind = ChangeKind.RENAMED
        renamed_from = f"{t.library}::{qualname}"
        path = f.where or t.library
        new_sym = Symbol(path, qualname, kind_of, 0, 0, _bare(decl.parameters))
        detail = f"moved: {t.library} -> {path}"
    elif f.fate is Fate.LIBRARY_GONE:
        detail = f"the new upstream has no {_file_name(t.library)}"
    else:
        detail = "no longer exported"
        if f.kept_overloads:
            kept = [split_declaration(demangle(n)).parameters or "" for n in f.kept_overloads]
            detail += "; overloads that remain: " + " | ".join(kept[:3])
    declared = ""
    if f.fate is not Fate.MOVED_LOADED:
        old_label, new_label = labels.get("old", "old"), labels.get("new", "new")
        declared = (
            f"declared in {old_at[0]}:{old_at[1]} ({old_label})"
            if old_at
            else f"declared in no header of {old_label} found"
        )
        if f.fate is Fate.SIGNATURE:
            declared += f", {new_at[0]}:{new_at[1]} ({new_label})" if new_at else ""
        elif old_at:
            declared += (
                f", still named in {new_at[0]}:{new_at[1]} ({new_label})"
                if new_at
                else f", in no header of {new_label}"
            )
    change = SymbolChange(
        path=path,
        qualname=qualname,
        kind=kind,
        symbol_kind=kind_of,
        stage=Stage.RUNTIME,
        old=old_sym,
        new=new_sym,
        detail=detail,
        renamed_from=renamed_from,
    )
    return change, group, declared


def _bare(parameters: str | None) -> str | None:
    """'(int, bool)' -> 'int, bool': a parameter list as Python symbols keep theirs."""
    return parameters[1:-1] if parameters else parameters


def _coupling(
    f: SymbolFate,
    change: SymbolChange,
    load: Loading,
    declared: str,
    labels: dict[str, str],
    runtime_needs: tuple[str, ...] = (),
) -> Coupling:
    t = f.taken
    site = load.site
    facts = set()
    if f.fate is Fate.MOVED_LOADED:
        facts.add("still_loaded")
    if t.weak:
        facts.add("weak_reference")
    if _CXX_RUNTIME.match(t.name) and any(_CXX_RUNTIME_LIBS.match(n) for n in runtime_needs):
        facts.add("cxx_runtime")
    if site is not None:
        facts.add("loaded_at_import" if site.at_import else "loaded_when_called")
        if site.guarded:
            facts.add("load_guarded")
        when = "at import" if site.at_import else "when its function runs"
        via = f"loaded {when} by {site.at} ({site.snippet})"
        if site.guarded:
            via += ", inside a try that catches the failed load"
        if len(load.chain) > 1:
            via += ", through DT_NEEDED " + " -> ".join(load.chain)
    else:
        via = "no Python place that loads it was found"
    new_label = labels.get("new", "the new upstream")
    what = {
        Fate.REMOVED: f"gone on {new_label}",
        Fate.SIGNATURE: f"gone on {new_label}, its signature changed",
        Fate.LIBRARY_GONE: f"gone on {new_label} with its library",
        Fate.MOVED_LOADED: f"moved to {f.where} on {new_label}, which it still loads",
        Fate.MOVED_UNLOADED: f"moved to {f.where} on {new_label}, which it does not load",
    }[f.fate]
    problem = f"{t.obj} takes {change.qualname} from {t.library}: {what}"
    if f.fate is Fate.SIGNATURE:
        problem += f" ({change.detail.removeprefix('signature: ')})"
    detail = "; ".join(
        x
        for x in (
            f"{t.obj} takes {t.name}" + (" (weak)" if t.weak else "") + f" from {t.library}",
            change.detail,
            declared,
            via,
        )
        if x
    )
    ref = Reference(
        kind=CouplingKind.LINKED_SYMBOL,
        target=t.name,
        path=site.path if site is not None else t.obj,
        line=site.line if site is not None else 0,
        snippet=site.snippet if site is not None else "",
        detail=detail,
    )
    if f.fate in MISSING and not t.weak:
        evidence = f"{t.obj}: undefined symbol: {t.name}"  # what the loader says
    elif f.fate in MISSING:
        evidence = f"{t.obj} loads: its weak reference {t.name} resolves to null"
    else:
        evidence = f"{t.obj} still resolves {t.name}, from {f.where}"
    chain = [change.ref, *load.chain[::-1], site.at] if site is not None else [change.ref, t.obj]
    coupling = decide(
        change,
        ref,
        kind=CouplingKind.LINKED_SYMBOL,
        extra_facts=frozenset(facts),
        chain=chain,
        detail=detail,
        evidence=evidence,
    )
    coupling.problems = [problem]
    return coupling
