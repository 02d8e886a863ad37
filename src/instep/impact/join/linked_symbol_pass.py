"""The linked-symbol pass: the downstream's shared objects against the two upstreams'
libraries, as units of its own (one per object that loses or moves symbols), their
couplings, and the native part of the report's scope.

An early pass (``join/pass_api.py``): :meth:`LinkedSymbolPass.prepare`, in a forked child
started before the indexing, opens the shared objects of the three sides
(:mod:`instep.impact.upstream.sources.built`; read through the content cache), runs the
linked-symbol check (:mod:`instep.impact.join.linked_symbols`), finds the Python places
that load each object (:mod:`instep.impact.downstream.native_loads`, only when a symbol
is missing or moved) and the headers that declared the symbols reported
(:mod:`instep.impact.upstream.native_headers`), and returns a picklable
:class:`NativeResult`; :meth:`LinkedSymbolPass.run`, in the parent, turns it into
findings: the units after the diff's, their couplings for the book to decide, the scope
fields, the stats, the child's warnings logged. It says why it checked nothing when it
could not: a git range or patches have no built libraries, an upstream source tree has no
``torch/lib``, a downstream may hold no shared object. It never imports, loads or runs
what it reads.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from instep.elfindex.files import CACHE_NAMESPACE, SharedObjectFiles
from instep.elfindex.model import SharedObject
from instep.impact.downstream.native_loads import find_load_sites
from instep.impact.join.linked_symbols import MISSING, Fate, LinkedFindings, LinkedSymbols
from instep.impact.join.native_units import loadings, native_units
from instep.impact.join.pass_api import Findings, Found, JoinInputs, JoinPass, PassSources
from instep.impact.logged_warnings import collect_warnings
from instep.impact.model import CouplingKind, NativeCheck, UnreadObject, UpstreamChange
from instep.impact.upstream.native_headers import HeaderSearch
from instep.impact.upstream.sources.built import Headers, shared_objects_of
from instep.pyindex.cache import ContentCache

log = logging.getLogger(__name__)


@dataclass
class NativeResult:
    """What the check found, as it crosses from the child: whether it ran (and why not),
    the counts of the scope, the units with their couplings (``Found.unit``: the unit's
    place among these), the warnings, and what was read."""

    check: NativeCheck
    detail: str = ""  # why the check did not run (names the side)
    objects: int = 0  # downstream shared objects read
    unreadable: tuple[UnreadObject, ...] = ()
    linked: int = 0  # (object, symbol) pairs taken from the old upstream
    missing: int = 0
    moved: int = 0  # moved into a library the object still loads
    upstream_libraries: tuple[str, ...] = ()
    units: list[tuple[UpstreamChange, list[Found]]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    reads: int = 0  # shared objects read from their files (0 on a warm run)
    # per downstream object: [symbols taken from the old upstream, of which missing]
    by_object: dict[str, list[int]] = field(default_factory=dict)

    def scope(self) -> dict[str, Any]:
        """The fields of the report's scope this pass fills."""
        return {
            "native": self.check,
            "shared_objects": self.objects,
            "unreadable": self.unreadable,
            "linked_symbols": self.linked,
            "missing_symbols": self.missing,
            "moved_symbols": self.moved,
            "upstream_libraries": self.upstream_libraries,
            "detail": self.detail,
        }


class LinkedSymbolPass(JoinPass):
    """linked_symbol couplings, in units of their own: see the module's docstring."""

    name = "linked symbols"
    kinds = frozenset({CouplingKind.LINKED_SYMBOL})
    early = True

    def prepare(self, sources: PassSources) -> NativeResult:
        with collect_warnings() as warnings:
            result = _analyse(sources)
        result.warnings = sorted(dict.fromkeys([*result.warnings, *warnings]))
        return result

    def identity(self, sources: PassSources) -> str:
        """Each side's shared objects by path and identity (CRC-32 and size of a wheel
        member, the stat of a file), none of them read."""
        snaps = sources.snapshots
        h = hashlib.blake2b(digest_size=16)
        for role, snap in (("old", snaps.old), ("new", snaps.new), ("down", snaps.down)):
            h.update(role.encode())
            files = shared_objects_of(snap, None)
            if files is None:
                continue
            try:
                for path in files.paths():
                    line = f"{path}\0{files.identity(path)}\n"
                    h.update(line.encode("utf-8", "surrogateescape"))
            except OSError:
                h.update(b"?")
            finally:
                files.close()
        return h.hexdigest()

    def run(self, inputs: JoinInputs, earlier: Mapping[str, Findings]) -> Findings:
        result: NativeResult = inputs.prepared[self.name]
        for warning in result.warnings:
            log.warning("%s", warning)
        first = len(inputs.units)
        stats: dict[str, Any] = {"native_reads": result.reads}
        if result.by_object:  # [taken from the old upstream, of which missing] per object
            stats["linked_symbols_by_object"] = result.by_object
        return Findings(
            [dataclasses.replace(f, unit=first + f.unit) for _, fs in result.units for f in fs],
            stats=stats,
            units=[unit for unit, _ in result.units],
            scope=result.scope(),
        )


def _cache(cache_root: Path | None) -> ContentCache | None:
    return ContentCache(cache_root, CACHE_NAMESPACE) if cache_root is not None else None


def _analyse(sources: PassSources) -> NativeResult:
    """The check of the downstream's shared objects from the old upstream to the new."""
    if sources.mode != "release":
        what = "a git range" if sources.mode == "git" else "patches"
        return NativeResult(
            NativeCheck.NEEDS_RELEASES,
            f"{what} has no built libraries: the linked-symbol check needs releases "
            "(wheels or installed trees) on both upstream sides",
        )
    snaps, cache = sources.snapshots, _cache(sources.cache_root)
    sides = [shared_objects_of(s, cache) for s in (snaps.old, snaps.new, snaps.down)]
    old_files, new_files, down_files = sides
    try:
        if down_files is None or not down_files.paths():
            return NativeResult(
                NativeCheck.NO_SHARED_OBJECTS,
                "the downstream holds no shared object (a source tree? give its wheel or "
                "installed tree to check its linked symbols)",
            )
        for role, files in (("old", old_files), ("new", new_files)):
            if files is None or not files.paths():
                return NativeResult(
                    NativeCheck.UPSTREAM_NOT_BUILT,
                    f"the {role} upstream ({sources.labels.get(role, role)}) holds no shared"
                    " library (a source tree?): the linked-symbol check needs releases"
                    " (wheels or installed trees)",
                )
        assert old_files is not None and new_files is not None
        checker = LinkedSymbols(old_files, new_files, down_files)
        findings = checker.check()
        result = _counted(findings)
        if any(f.fate is not Fate.PRESENT for f in findings.fates):
            result.units = _units(sources, checker, findings, down_files)
        result.reads = sum(f.reads for f in sides if f is not None)
        return result
    finally:
        for files in sides:
            if files is not None:
                files.close()


def _counted(findings: LinkedFindings) -> NativeResult:
    by_object = {obj: [0, 0] for obj in findings.objects}
    for f in findings.fates:
        by_object[f.taken.obj][0] += 1
        by_object[f.taken.obj][1] += f.fate in MISSING
    return NativeResult(
        NativeCheck.CHECKED,
        objects=len(findings.objects),
        unreadable=tuple(findings.unreadable),
        linked=len(findings.fates),
        missing=len(findings.missing),
        moved=sum(1 for f in findings.fates if f.fate is Fate.MOVED_LOADED),
        upstream_libraries=tuple(findings.upstream_libraries),
        by_object=by_object,
    )


def _units(
    sources: PassSources,
    checker: LinkedSymbols,
    findings: LinkedFindings,
    down_files: SharedObjectFiles,
) -> list[tuple[UpstreamChange, list[Found]]]:
    """The units of the objects that lose or move symbols: where Python loads each, and
    the headers that declare the symbols in each version."""
    snaps = sources.snapshots
    python = [p for p in snaps.down.paths() if p.endswith(".py") and not sources.excluded(p)]
    sites = find_load_sites(python, snaps.down.read, findings.objects)
    objects = {
        obj: so for obj in findings.objects if isinstance(so := down_files.read(obj), SharedObject)
    }

    def needed_of(obj: str) -> list[str]:  # the downstream objects it loads
        if obj not in objects:
            return []
        found = (checker.resolve_down(obj, n) for n in objects[obj].needed)
        return [p for p in found if p is not None and p != obj]

    old_headers, new_headers = Headers(snaps.old), Headers(snaps.new)
    try:
        return native_units(
            findings,
            loadings(findings.objects, sites, needed_of),
            HeaderSearch(old_headers),
            HeaderSearch(new_headers),
            dict(sources.labels),
            {obj: so.needed for obj, so in objects.items()},
        )
    finally:
        old_headers.close()
        new_headers.close()
