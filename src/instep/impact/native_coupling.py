"""The native half of an analysis: the downstream's shared objects against the two
upstreams' libraries, as units, couplings and the native part of the report's scope.

:func:`analyse_native` opens the shared objects of the three sides
(:mod:`instep.impact.upstream.sources.built`; read through the content cache), runs the
linked-symbol check (:mod:`instep.impact.join.linked_symbols`), finds the Python places
that load each object (:mod:`instep.impact.downstream.native_loads`, only when a symbol
is missing or moved) and the headers that declared the symbols reported, and returns a
picklable :class:`NativeResult`: ``impact/analysis.py`` runs it in a forked child while
the Python side is indexed. It says why it checked nothing when it could not: a git
range or patches have no built libraries, an upstream source tree has no
``torch/lib``, a downstream may hold no shared object. It never imports, loads or runs
what it reads.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from instep.elfindex.files import CACHE_NAMESPACE, SharedObjectFiles
from instep.elfindex.model import SharedObject
from instep.impact.model import Coupling, NativeCheck, ReportScope, UpstreamChange
from instep.pyindex.cache import ContentCache

log = logging.getLogger(__name__)


@dataclass
class NativeResult:
    """What the native half found (the scope's ``python_files`` and
    ``registered_kernels`` are the caller's to fill)."""

    scope: ReportScope
    units: list[tuple[UpstreamChange, list[Coupling]]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    seconds: float = 0.0
    reads: int = 0  # shared objects read from their files (0 on a warm run)
    # per downstream object: [symbols taken from the old upstream, of which missing]
    by_object: dict[str, list[int]] = field(default_factory=dict)


def not_checked(check: NativeCheck, detail: str) -> NativeResult:
    return NativeResult(ReportScope(python_files=0, native=check, detail=detail))


def _cache(cache_root: Path | None) -> ContentCache | None:
    return ContentCache(cache_root, CACHE_NAMESPACE) if cache_root is not None else None


def sides(old, new, down, cache_root: Path | None):
    """The three sides' shared objects (None where a side has no built libraries)."""
    from instep.impact.upstream.sources.built import shared_objects_of

    cache = _cache(cache_root)
    return tuple(shared_objects_of(s, cache) for s in (old, new, down))


def identity(old, new, down) -> str:
    """What the native half reads, named without reading it (the remembered report's
    key): each side's shared objects by path and identity (CRC-32 and size of a wheel
    member, the stat of a file)."""
    h = hashlib.blake2b(digest_size=16)
    for role, files in zip(("old", "new", "down"), sides(old, new, down, None), strict=True):
        h.update(role.encode())
        if files is None:
            continue
        try:
            for path in files.paths():
                h.update(f"{path}\0{files.identity(path)}\n".encode("utf-8", "surrogateescape"))
        except OSError:
            h.update(b"?")
        finally:
            files.close()
    return h.hexdigest()


def analyse_native(
    *,
    mode: str,
    old,
    new,
    down,
    python_paths: list[str],
    read_python: Callable[[str], bytes],
    cache_root: Path | None,
    labels: dict[str, str],
) -> NativeResult:
    """The linked-symbol check of ``down`` from ``old`` to ``new`` (snapshots)."""
    from instep.impact.logged_warnings import collect_warnings

    start = time.perf_counter()
    with collect_warnings() as warnings:
        result = _analyse(mode, old, new, down, python_paths, read_python, cache_root, labels)
    result.warnings = sorted(dict.fromkeys([*result.warnings, *warnings]))
    result.seconds = round(time.perf_counter() - start, 3)
    return result


def _analyse(mode, old, new, down, python_paths, read_python, cache_root, labels) -> NativeResult:
    from instep.impact.downstream.native_loads import find_load_sites
    from instep.impact.join.linked_symbols import MISSING, LinkedSymbols
    from instep.impact.join.native_units import loadings, native_units
    from instep.impact.upstream.native_headers import HeaderSearch
    from instep.impact.upstream.sources.built import Headers

    if mode != "release":
        what = "a git range" if mode == "git" else "patches"
        return not_checked(
            NativeCheck.NEEDS_RELEASES,
            f"{what} has no built libraries: the linked-symbol check needs releases "
            "(wheels or installed trees) on both upstream sides",
        )
    old_files, new_files, down_files = sides(old, new, down, cache_root)
    try:
        if down_files is None or not down_files.paths():
            return not_checked(
                NativeCheck.NO_SHARED_OBJECTS,
                "the downstream holds no shared object (a source tree? give its wheel or "
                "installed tree to check its linked symbols)",
            )
        for role, files, snap in (("old", old_files, old), ("new", new_files, new)):
            if files is None or not files.paths():
                label = labels.get(role) or getattr(snap, "label", role)
                return not_checked(
                    NativeCheck.UPSTREAM_NOT_BUILT,
                    f"the {role} upstream ({label}) holds no shared library (a source tree?):"
                    " the linked-symbol check needs releases (wheels or installed trees)",
                )
        checker = LinkedSymbols(old_files, new_files, down_files)
        findings = checker.check()
        units = []
        if any(f.fate.value != "present" for f in findings.fates):
            sites = find_load_sites(python_paths, read_python, findings.objects)

            def needed_of(obj: str) -> list[str]:
                so = down_files.read(obj)
                if not isinstance(so, SharedObject):
                    return []
                found = (checker._resolve_down(obj, n) for n in so.needed)
                return [p for p in found if p is not None and p != obj]

            old_headers, new_headers = Headers(old), Headers(new)
            try:
                units = native_units(
                    findings,
                    loadings(findings.objects, sites, needed_of),
                    HeaderSearch(old_headers),
                    HeaderSearch(new_headers),
                    labels,
                    {
                        obj: so.needed
                        for obj in findings.objects
                        if isinstance(so := down_files.read(obj), SharedObject)
                    },
                )
            finally:
                old_headers.close()
                new_headers.close()
        missing_fates = findings.missing
        missing = len(missing_fates)
        moved = sum(1 for f in findings.fates if f.fate.value == "moved_loaded")
        scope = ReportScope(
            python_files=0,
            native=NativeCheck.CHECKED,
            shared_objects=len(findings.objects),
            unreadable=tuple(findings.unreadable),
            linked_symbols=len(findings.fates),
            missing_symbols=missing,
            moved_symbols=moved,
            upstream_libraries=tuple(findings.upstream_libraries),
        )
        reads = sum(f.reads for f in (old_files, new_files, down_files) if f is not None)
        by_object = {obj: [0, 0] for obj in findings.objects}
        for f in findings.fates:
            by_object[f.taken.obj][0] += 1
            by_object[f.taken.obj][1] += f.fate in MISSING
        return NativeResult(scope, units, reads=reads, by_object=by_object)
    finally:
        for files in (old_files, new_files, down_files):
            if files is not None:
                files.close()


def with_python(result: NativeResult, python_files: int, kernels: int | None) -> ReportScope:
    """The report's scope: the native part with the Python side's counts."""
    from dataclasses import replace

    return replace(result.scope, python_files=python_files, registered_kernels=kernels)


__all__ = [
    "NativeResult",
    "SharedObjectFiles",
    "analyse_native",
    "identity",
    "not_checked",
    "with_python",
]
