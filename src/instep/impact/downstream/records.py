"""What the downstream index keeps per file: defs, classes, calls to possible patch
helpers, and the :class:`DownstreamFileIndex` (cached by content, pickled). Data only.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from instep.impact.downstream import forks
from instep.impact.downstream.scope import Arg, HelperSpec, Local
from instep.impact.downstream.version_gates import GateSpan
from instep.impact.downstream.version_refusals import Refusal
from instep.impact.model import Reference, VersionGate
from instep.pyindex.model import Registration


@dataclass
class DownstreamFunction:
    """One def of a downstream file (nested defs included: lowerings inside functions)."""

    path: str
    qualname: str
    line: int
    end_line: int
    signature: str
    body_hash: str
    fingerprint: forks.Fingerprint
    registrations: tuple[Registration, ...] = ()
    snippet: str = ""
    upstream_calls: frozenset[str] = frozenset()  # upstream dotted names it calls
    super_calls: frozenset[str] = frozenset()  # method names called as super().name
    # (method name, signatures.call_shape) of each distinct super().name(...) call
    super_call_shapes: tuple[tuple[str, str], ...] = ()


@dataclass
class DownstreamClass:
    """A downstream class and its bases (absolute dotted names, upstream or downstream)."""

    path: str
    qualname: str
    line: int
    snippet: str
    bases: tuple[str, ...]
    methods: tuple[str, ...]  # qualnames of the defs directly in its body
    upstream_direct: bool = False  # some base is upstream (references already emitted)


@dataclass(frozen=True)
class CallSite:
    """A call to a downstream function with upstream objects and strings as arguments."""

    callee: str | Local  # absolute dotted (downstream), or a def of this file
    args: tuple[Arg | None, ...]  # per position
    keywords: tuple[tuple[str, Arg | None], ...]
    line: int
    snippet: str
    owner: str | None
    decorated: str | None = None  # qualname of the def it decorates


@dataclass
class DownstreamFileIndex:
    path: str
    references: list[Reference] = field(default_factory=list)
    functions: list[DownstreamFunction] = field(default_factory=list)
    gates: list[VersionGate] = field(default_factory=list)
    lines_fingerprint: forks.LinesFingerprint | None = None
    error: str | None = None
    # for cross-file resolution (DownstreamIndex)
    module: str = ""
    exports: dict[str, str | Local] = field(default_factory=dict)  # module-level bindings
    classes: list[DownstreamClass] = field(default_factory=list)
    helpers: dict[str, HelperSpec] = field(default_factory=dict)
    calls: list[CallSite] = field(default_factory=list)
    pending: list[Reference] = field(default_factory=list)  # targets in downstream names
    patch_values: list[tuple[int, str]] = field(default_factory=list)  # ref idx -> dn dotted
    dn_imports: list[tuple[str, int, str | None]] = field(default_factory=list)
    gate_spans: list[GateSpan] = field(default_factory=list)  # gates with the lines they guard
    refusals: list[Refusal] = field(default_factory=list)  # version checks that raise
    # module-level flags set in a version check: name -> (when true, when false) predicates
    flags: dict[str, tuple[object, object]] = field(default_factory=dict)
    # ``if FLAG:`` on a flag imported from another downstream module: spans whose gate's
    # predicate is an ``imported_flags.ImportedFlag``, resolved by the tree index
    flag_uses: list[GateSpan] = field(default_factory=list)
