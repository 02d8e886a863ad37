"""What a join pass is: one entry point over the same inputs, typed findings out.

Every pass of the join (``join/registry.py`` lists them in order) is a :class:`JoinPass`:
``run(inputs, earlier) -> Findings``. :class:`JoinInputs` is the same for every pass: the
diff units and their index (:class:`~instep.impact.join.change_index.ChangeIndex`), the new
upstream's index (resolver) and files (``calls``: texts, trees, call sites), the downstream
index, the three snapshots for files that are not Python (a yaml table, a shared
library's symbols), line readers, and the services computed from them once for every pass
(the downstream references, the overridden and patched names, the device classes, ...).
A pass returns :class:`Findings`: the couplings it found (:class:`Found`, the arguments of
``CouplingBook.add``), places later passes read (fork detection's forked functions), and
stats. ``earlier`` holds the findings of the passes it names in ``needs``.

A pass never adds to the book itself: the runner (``join/pass_runner.py``) adds each
pass's couplings in the registry's order, so that which of two equal couplings is kept
never depends on which pass ended first. A pass may declare ``forked = True``: it then
starts in a forked child before the parent computes anything else, and reads only what
:class:`JoinInputs` holds at that moment (its fields and the change index); the late
services refuse a forked child (:meth:`JoinInputs.late`), so a pass cannot read the
parent's later state by mistake.

A pass whose main work needs neither the diff nor the downstream index, only the sources
(:class:`PassSources`: the three snapshots, the mode, the labels), declares
``early = True`` and does that work in :meth:`JoinPass.prepare`: the runner's
``start_early`` starts it in a forked child before the indexing (started, not waited for:
"start early, collect later"), and :meth:`JoinPass.run` finds its result in
``inputs.prepared[name]``. A pass that reads downstream files that are not Python names
their suffixes in ``lists`` (the downstream snapshot lists them), and one that reads files
no snapshot lists (shared objects) names them in :meth:`JoinPass.identity`, for the
remembered report's key. A pass may add units of its own (``Findings.units``: a shared
object that loses symbols is a change no upstream file diff holds). Nothing here finds a
coupling or picks a verdict.
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Container, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar

from instep.errors import BadInput
from instep.impact.downstream.class_escapes import ClassEscapes
from instep.impact.downstream.inductor_use import InductorUse, find_inductor_use
from instep.impact.downstream.tree_index import DownstreamIndex
from instep.impact.downstream.wholesale import Swap, find_swaps
from instep.impact.join import forked_passes
from instep.impact.join.change_index import ChangeIndex
from instep.impact.join.device_classes import DeviceClasses
from instep.impact.join.extension_bases import ExtensionBases
from instep.impact.join.facts import DeadFallback
from instep.impact.join.op_arguments import OpArguments
from instep.impact.join.patch_installs import PatchInstalls
from instep.impact.join.probe_outcomes import ProbeOutcomes
from instep.impact.join.renamed_classes import RenamedClasses
from instep.impact.join.upstream_calls import UpstreamCalls
from instep.impact.model import CouplingKind, Reference, SymbolChange, UpstreamChange
from instep.impact.upstream.resolver import UpstreamResolver
from instep.impact.upstream.sources.snapshot import Snapshot
from instep.pyindex.parsed_files import ParsedFiles
from instep.pyindex.symbols import FileIndex

#: decoded old and new lines of the file of a change (None: that side has no such file)
LinesOf = Callable[
    [UpstreamChange, SymbolChange], tuple[Sequence[str] | None, Sequence[str] | None]
]


@dataclass(frozen=True)
class Found:
    """One coupling a pass found: what :meth:`CouplingBook.add` takes. ``kind`` None is
    the reference's own kind; ``per_file`` keeps one coupling per file (indirect
    evidence); ``extra`` are facts the pass computed (``join/fact_names.py``);
    ``problems`` what the pass found broken itself (the rules' ``{problem}``), in place of
    the signature problems the verdict finds."""

    # index of the unit in ``JoinInputs.units``; ``len(inputs.units) + k`` for the k-th of
    # the pass's own units (``Findings.units``)
    unit: int
    change: SymbolChange
    ref: Reference
    kind: CouplingKind | None = None
    chain: list[str] | None = None
    detail: str = ""
    extra: frozenset[str] = frozenset()
    per_file: bool = False
    evidence: str = ""
    problems: tuple[str, ...] = ()


@dataclass
class Findings:
    """What one pass gives: couplings to add (in order), places for later passes, stats
    (counters and small tables, for people), the units the pass adds after the diff's,
    and the fields of the report's scope it fills (:class:`~instep.impact_contract.Scope`:
    what it read; two passes never fill the same field)."""

    couplings: list[Found] = field(default_factory=list)
    references: list[Reference] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)
    units: list[UpstreamChange] = field(default_factory=list)
    scope: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Snapshots:
    """The three trees, for what is not Python (each has ``paths()`` and ``read(path)``)."""

    old: Snapshot
    new: Snapshot
    down: Snapshot


@dataclass(frozen=True)
class PassSources:
    """What an early pass's :meth:`JoinPass.prepare` reads, before any indexing: the three
    snapshots, the mode (``release``: the sides are wheels or trees, with their built
    libraries; ``git``/``patches``: revisions), each upstream side's label for people
    (``torch 2.13.0``), which downstream paths ``--exclude`` leaves out, the cache root."""

    snapshots: Snapshots
    mode: str
    labels: Mapping[str, str]  # 'old' / 'new' -> 'torch 2.13.0' (the label as given if none)
    excluded: Callable[[str], bool]
    cache_root: Path | None = None


@dataclass(frozen=True)
class Overrides:
    """What the downstream overrides, from its references: the (class, member) pairs
    (with the file). The names it patches: :attr:`JoinInputs.patched_on_path`."""

    overridden: frozenset[tuple[str, str]]  # (downstream class, member it defines)
    overridden_in: frozenset[tuple[str, str, str]]  # (file, class, member)


@dataclass
class JoinInputs:
    """The inputs of every join pass (see the module's docstring)."""

    units: list[UpstreamChange]
    resolver: UpstreamResolver
    calls: UpstreamCalls
    down: DownstreamIndex
    snapshots: Snapshots
    lines_of: LinesOf
    read_down: Callable[[str], bytes]  # a downstream file's bytes (kept once read)
    names_in: Callable[[str], Container[str]]  # attribute names and quoted identifiers
    new_index: Callable[[str], FileIndex]  # the index of a file of the new upstream
    probes: ProbeOutcomes
    new_version: tuple[int, ...] | None
    jobs: int = 1
    cache_root: Path | None = None
    sources: PassSources | None = None  # what early passes read (None: no early pass runs)
    # the results of the early passes' ``prepare``, by pass name (the runner fills it)
    prepared: dict[str, Any] = field(default_factory=dict)
    changes: ChangeIndex = field(init=False)
    down_trees: ParsedFiles = field(init=False)  # downstream trees and lines, made once

    def __post_init__(self) -> None:
        self.changes = ChangeIndex(self.units)
        self.down_trees = ParsedFiles(self.read_down)

    def warm(self) -> None:
        """Read what forked children and this process would each read again: every
        ``.py`` file of the new upstream and of the downstream (a read error is not
        kept: the pass that reads the file meets it as before)."""
        self.calls.texts()
        for p in self.snapshots.down.paths():
            if p.endswith(".py"):
                with contextlib.suppress(OSError, KeyError, BadInput):
                    self.read_down(p)

    # -- late services: computed in this process, after the forked passes started -----

    @staticmethod
    def late(name: str) -> None:
        """Refuse a late service to a forked child: it would compute its own copy."""
        if forked_passes.in_child():
            raise RuntimeError(
                f"JoinInputs.{name} is computed after the forked passes start: "
                "a pass with forked = True may not read it"
            )

    @cached_property
    def references(self) -> list[Reference]:
        """Every downstream reference (the coupling index's, resolved across files)."""
        self.late("references")
        return list(self.down.references())

    @cached_property
    def overrides(self) -> Overrides:
        overridden: set[tuple[str, str]] = set()
        overridden_in: set[tuple[str, str, str]] = set()
        for r in self.references:
            if r.kind is CouplingKind.SUBCLASS_OVERRIDE and r.owner and "." in r.owner:
                owner_cls, member = r.owner.rsplit(".", 1)
                overridden.add((owner_cls, member))
                overridden_in.add((r.path, owner_cls, member))
        return Overrides(frozenset(overridden), frozenset(overridden_in))

    @cached_property
    def swaps(self) -> tuple[Swap, ...]:
        """Upstream modules the downstream swaps wholesale for a copy (wholesale.py)."""
        self.late("swaps")
        paths = self.snapshots.down.paths()
        return tuple(find_swaps(paths, self.read_down, self.resolver.module_paths, self.down_trees))

    @cached_property
    def op_arguments(self) -> OpArguments:
        self.late("op_arguments")
        return OpArguments(self.snapshots.new.paths(), self.new_index)

    @cached_property
    def escapes(self) -> ClassEscapes:
        self.late("escapes")
        paths = self.snapshots.down.paths()
        return ClassEscapes(paths, self.read_down, self.calls.texts, self.down_trees)

    @cached_property
    def installs(self) -> PatchInstalls:
        """Which patches are installed only under a switch off by default."""
        self.late("installs")
        texts, paths = self.calls.texts, self.resolver.module_paths
        return PatchInstalls(
            self.snapshots.down.paths(),
            self.read_down,
            lambda module: texts().get(paths.get(module, "")),
            self.down_trees,
        )

    @cached_property
    def patched_on_path(self) -> dict[str, str]:
        """The upstream names the downstream patches where the patch is installed on
        the normal path (not only under a switch off by default), with the place."""
        out: dict[str, str] = {}
        for r in self.references:
            if r.kind is not CouplingKind.MONKEYPATCH or r.signature is None:
                continue
            if not self.installs.off_by_default(r.path, r.line, r.owner):
                out.setdefault(self.resolver.resolve(r.target), r.at)
        return out

    @cached_property
    def devices(self) -> DeviceClasses:
        self.late("devices")
        paths = self.snapshots.down.paths()
        return DeviceClasses(
            self.down, self.resolver, paths, self.read_down, self.calls.texts, self.down_trees
        )

    @cached_property
    def inductor(self) -> InductorUse:
        self.late("inductor")
        return find_inductor_use(self.snapshots.down.paths(), self.read_down, self.down_trees)

    @cached_property
    def dead_fallback(self) -> DeadFallback:
        return DeadFallback(self.resolver, self.down.roots)

    @cached_property
    def renamed_classes(self) -> RenamedClasses:
        return RenamedClasses(self.units, self.resolver)

    @cached_property
    def extension_bases(self) -> ExtensionBases:
        """Members inherited from extension types, read from the new side's stubs."""
        return ExtensionBases(self.resolver, self.probes)


class JoinPass(ABC):
    """One pass of the join. Subclasses set the class attributes and implement :meth:`run`."""

    name: ClassVar[str]  # how stats, logs and ``needs`` name it
    kinds: ClassVar[frozenset[CouplingKind]]  # the kinds of the couplings it finds
    needs: ClassVar[tuple[str, ...]] = ()  # passes whose findings :meth:`run` reads
    forked: ClassVar[bool] = False  # starts in a forked child (reads no late service)
    counted_as: ClassVar[str | None] = None  # stat: how many of its couplings were new
    early: ClassVar[bool] = False  # :meth:`prepare` starts before the indexing
    # suffixes of the downstream files it reads that are not Python (listed for it)
    lists: ClassVar[tuple[str, ...]] = ()

    @abstractmethod
    def run(self, inputs: JoinInputs, earlier: Mapping[str, Findings]) -> Findings:
        """The pass's findings; ``earlier`` holds those of the passes in ``needs``."""

    def prepare(self, sources: PassSources) -> Any:
        """An early pass's work on the sources alone (no diff, no downstream index), in a
        forked child started before the indexing (here when there is one job, no
        ``fork``, or the child died); its result, picklable, is ``inputs.prepared[name]``
        when :meth:`run` runs."""
        raise NotImplementedError(f"join pass {self.name!r} is not early")

    def identity(self, sources: PassSources) -> str:
        """What the pass reads that no snapshot lists, named without reading it (the
        remembered report's key changes when it does); '' when it reads nothing else."""
        return ""
