"""Linked-symbol findings as report units: one unit per downstream shared object that
loses (or moves) symbols, one coupling per symbol (a :class:`Found` the coupling book
decides by the ``linked_symbol.*`` rows of ``verdict_rules.toml``; its ``unit`` is the
unit's place among these units).

The coupling's downstream place is the Python line that loads the object
(``downstream/native_loads``; else the object, line 0), its upstream symbol
``<library>::<demangled name>``, its change's place the header line that declared it in
each version (``upstream/native_headers``), its evidence what the dynamic loader will say.
The unit's title groups the symbols by that header, else by namespace. What each symbol
became is :mod:`instep.impact.join.linked_symbols`'s; nothing here reads files.
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass, replace

from instep.elfindex.demangle import Declaration, demangle, split_declaration
from instep.impact.downstream.native_loads import LoadSite
from instep.impact.join.fact_names import Fact
from instep.impact.join.linked_symbols import (
    CXX_RUNTIME_LIBRARY,
    CXX_RUNTIME_NAME,
    MISSING,
    Fate,
    LinkedFindings,
    SymbolFate,
)
from instep.impact.join.pass_api import Found
from instep.impact.model import (
    ChangeKind,
    CouplingKind,
    Reference,
    Stage,
    SymbolChange,
    UnitKind,
    UpstreamChange,
)
from instep.impact.upstream.native_headers import HeaderSearch
from instep.pyindex.model import Symbol, SymbolKind


def _file_name(path: str) -> str:
    return path.rsplit("/", 1)[-1]


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
) -> list[tuple[UpstreamChange, list[Found]]]:
    """One unit per downstream object that loses or moves symbols, with one coupling per
    symbol, for the ``linked_symbol.*`` rules (``needs``: each object's ``DT_NEEDED``, for
    the C++ runtime it loads)."""
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
        couplings: list[Found] = []
        groups: dict[str, int] = defaultdict(int)
        used: set[str] = set()
        for f in fates:
            change, group, declared = _change(f, old_headers, new_headers, labels, used)
            groups[group] += 1
            changes.append(change)
            found = _coupling(f, change, load, declared, labels, needs.get(obj, ()))
            couplings.append(replace(found, unit=len(out)))
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
            unit_kind=UnitKind.LIBRARY,
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
    old_at, new_at = _declared_at(f, decl, old_headers, new_headers)
    group = old_at[0].split("/include/", 1)[-1] if old_at else (decl.scope or "(global)")
    qualname = _qualname(decl, t.name, used)
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
    kind = ChangeKind.REMOVED
    renamed_from = None
    path = t.library
    if f.fate is Fate.SIGNATURE:
        kind = ChangeKind.SIGNATURE
        old_sym, new_sym, detail = _signature_change(f, decl, old_sym, new_at)
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
    return change, group, _declared_text(f, old_at, new_at, labels)


Place = tuple[str, int]  # a header and the line that declares the symbol


def _qualname(decl: Declaration, mangled: str, used: set[str]) -> str:
    """The demangled name with its parameters, unique in the unit (the mangled name added
    to a repeat: C1/C2 constructors, D0/D1/D2 destructors)."""
    qualname = (
        decl.qualified
        + (decl.parameters or "")
        + (f" {decl.qualifiers}" if decl.qualifiers else "")
    )
    if qualname in used:
        qualname = f"{qualname} [{mangled}]"
    used.add(qualname)
    return qualname


def _declared_at(
    f: SymbolFate,
    decl: Declaration,
    old_headers: HeaderSearch | None,
    new_headers: HeaderSearch | None,
) -> tuple[Place | None, Place | None]:
    """Where the old and the new upstream declare the symbol (its new overload for a
    signature change), when a header does: the new side searched in the old header first."""
    old_at = old_headers.find(decl) if old_headers is not None else None
    new_decl = decl
    if f.fate is Fate.SIGNATURE and f.new_overloads:
        new_decl = split_declaration(demangle(f.new_overloads[0]))
    new_at = None
    if new_headers is not None and old_at is not None:
        new_at = new_headers.find(new_decl, only=old_at[0]) or (
            new_headers.find(new_decl) if f.fate is Fate.SIGNATURE else None
        )
    return old_at, new_at


def _signature_change(
    f: SymbolFate, decl: Declaration, old_sym: Symbol, new_at: Place | None
) -> tuple[Symbol, Symbol, str]:
    """The old and the new symbol of a signature change, and its detail (old -> new)."""
    t = f.taken
    # one per parameter list: C1/C2 constructors and D0/D1/D2 destructors repeat them
    overloads = (split_declaration(demangle(n)) for n in f.new_overloads)
    news = list({d.parameters: d for d in overloads}.values())
    new_params = " | ".join(d.parameters or "" for d in news)
    new_sym = Symbol(
        new_at[0] if new_at else f.where or t.library,
        old_sym.qualname,
        old_sym.kind,
        new_at[1] if new_at else 0,
        0,
        " | ".join(_bare(d.parameters) or "" for d in news),
    )
    if all(d.parameters == decl.parameters for d in news):
        # same parameters, another mangled name: the return type or an ABI tag changed;
        # the whole names are what differs, so they are what old -> new shows
        new_full = " | ".join(dict.fromkeys(demangle(n) for n in f.new_overloads))
        detail = f"signature: {demangle(t.name)} -> {new_full}"
        return (
            replace(old_sym, signature=demangle(t.name)),
            replace(new_sym, signature=new_full),
            detail,
        )
    return old_sym, new_sym, f"signature: {decl.parameters} -> {new_params}"


def _declared_text(
    f: SymbolFate, old_at: Place | None, new_at: Place | None, labels: dict[str, str]
) -> str:
    """Where the symbol was declared in each version, for the detail ('' for a move into
    a library still loaded: nothing to adapt)."""
    if f.fate is Fate.MOVED_LOADED:
        return ""
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
    return declared


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
) -> Found:
    t = f.taken
    site = load.site
    facts, via = _load_facts(f, load, runtime_needs)
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
    chain = [change.ref, *load.chain[::-1], site.at] if site is not None else [change.ref, t.obj]
    return Found(
        0,  # the unit's place: native_units sets it
        change,
        ref,
        CouplingKind.LINKED_SYMBOL,
        chain=chain,
        detail=detail,
        extra=frozenset(facts),
        evidence=_evidence(f),
        problems=(problem,),
    )


def _load_facts(
    f: SymbolFate, load: Loading, runtime_needs: tuple[str, ...]
) -> tuple[set[str], str]:
    """The facts of how the object meets the symbol and is loaded, and the words for how."""
    t, site = f.taken, load.site
    facts: set[str] = set()
    if f.fate is Fate.MOVED_LOADED:
        facts.add(Fact.STILL_LOADED)
    if t.weak:
        facts.add(Fact.WEAK_REFERENCE)
    if CXX_RUNTIME_NAME.match(t.name) and any(CXX_RUNTIME_LIBRARY.match(n) for n in runtime_needs):
        facts.add(Fact.CXX_RUNTIME)
    if site is None:
        return facts, "no Python place that loads it was found"
    facts.add(Fact.LOADED_AT_IMPORT if site.at_import else Fact.LOADED_WHEN_CALLED)
    if site.guarded:
        facts.add(Fact.LOAD_GUARDED)
    when = "at import" if site.at_import else "when its function runs"
    via = f"loaded {when} by {site.at} ({site.snippet})"
    if site.guarded:
        via += ", inside a try that catches the failed load"
    if len(load.chain) > 1:
        via += ", through DT_NEEDED " + " -> ".join(load.chain)
    return facts, via


def _evidence(f: SymbolFate) -> str:
    """What the loader will say (a weak reference loads; a symbol moved still resolves)."""
    t = f.taken
    if f.fate in MISSING and not t.weak:
        return f"{t.obj}: undefined symbol: {t.name}"
    if f.fate in MISSING:
        return f"{t.obj} loads: its weak reference {t.name} resolves to null"
    return f"{t.obj} still resolves {t.name}, from {f.where}"
