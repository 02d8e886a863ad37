"""What the downstream index keeps per file: defs, classes, calls to possible patch
helpers, the gates and refusals of version checks, and the :class:`DownstreamFileIndex`
(cached by content, pickled). Data only: every type a record holds is defined here or
below (``impact/model.py``, ``pyindex/model.py``, :mod:`version_predicates`), never in the
modules that build or read the records (``scope``, ``forks``, ``version_gates``,
``version_refusals``, ``coupling_index``, ``tree_index``), which import it.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum
from functools import cached_property
from typing import NamedTuple

from instep.impact.downstream.version_conditions import HelperSpec as VersionHelperSpec
from instep.impact.downstream.version_predicates import Predicate
from instep.impact.model import Reference, VersionGate
from instep.pyindex.model import Registration

# --- names and call arguments (scope.py reads and binds them) ---------------------------


class LocalKind(Enum):
    DEF = "def"
    CLASS = "class"


class Local(NamedTuple):
    """A name bound to a def or class of the file being indexed (``qualname`` may go on
    into its attributes: ``C.m``), as opposed to an absolute dotted name (a ``str``)."""

    kind: LocalKind
    qualname: str


#: What a name is bound to: an absolute dotted name, a local def/class, or unknown.
Binding = str | Local | None


class ArgKind(Enum):
    UPSTREAM = "up"  # an upstream object (absolute dotted name)
    DOWNSTREAM = "dn"  # a downstream object of another module (absolute dotted name)
    LOCAL = "fn"  # a def or class of this file (a Local)
    STRING = "str"  # a string constant


class Arg(NamedTuple):
    """What a call passes at one position or keyword, when it is statically known."""

    kind: ArgKind
    value: str | Local


@dataclass(frozen=True)
class HelperSpec:
    """A downstream patch helper: ``setattr(<obj param>, <name param>, value)``."""

    params: tuple[str, ...]
    obj: str
    name: str
    value: str | None  # parameter holding the replacement; None: decorator factory
    dotted_name: bool  # the name parameter is a dotted path below obj


# --- fork fingerprints (forks.py computes and matches them) ------------------------------


def pack_hashes(values: Iterable[int]) -> bytes:
    return array("I", sorted(set(values))).tobytes()


@dataclass(frozen=True)
class Fingerprint:
    """Gram hashes of a function's normalised logical lines (see :func:`line_grams`).

    Stored packed (bytes of uint32) so that a cached index of a whole tree loads fast;
    the set is built on first use.
    """

    packed: bytes
    tokens: int  # non-trivial logical lines
    # logical lines that are not framework boilerplate (forks.substantial_lines); -1: not
    # counted (upstream fingerprints: the downstream side decides)
    substance: int = -1

    @classmethod
    def of(cls, grams: Iterable[int], tokens: int, substance: int = -1) -> Fingerprint:
        return cls(pack_hashes(grams), tokens, substance)

    @cached_property
    def grams(self) -> frozenset[int]:
        """The set, kept (an upstream fingerprint: matched against many functions)."""
        return frozenset(array("I", self.packed))

    def gram_set(self) -> frozenset[int]:
        """The set, built on each call and not kept: a downstream function's is used
        once per run, and kept on vllm 0.34.0's 47,270 functions the sets held ~190 MiB
        (2.2 million ints) in the fork-detection child (issue #32)."""
        return frozenset(array("I", self.packed))

    def __len__(self) -> int:
        return len(self.packed) // 4


@dataclass(frozen=True)
class LinesFingerprint:
    """Hashes of a file's normalised non-trivial lines (packed like :class:`Fingerprint`)."""

    packed: bytes

    @cached_property
    def lines(self) -> frozenset[int]:
        return frozenset(array("I", self.packed))

    def __len__(self) -> int:
        return len(self.packed) // 4


# --- version checks (version_gates.py, version_refusals.py read them) -------------------


@dataclass(frozen=True)
class GateSpan:
    """A gate and the (inclusive) line span of the code it guards."""

    gate: VersionGate
    start: int
    end: int


@dataclass(frozen=True)
class Refusal:
    """A statement that refuses the upstream when ``when`` holds on its version."""

    path: str
    line: int
    condition: str  # the test under which it refuses, as written ('not (...) and not (...)')
    raises: str  # 'ValueError(...)', 'AssertionError', 'sys.exit(1)'
    scope: str  # 'module' (the import fails) or the qualname of the function that fails
    when: Predicate

    def as_dict(self) -> dict[str, str]:
        return {
            "at": f"{self.path}:{self.line}",
            "condition": self.condition,
            "raises": self.raises,
            "scope": self.scope,
        }


# --- the index of one file ---------------------------------------------------------------


@dataclass
class DownstreamFunction:
    """One def of a downstream file (nested defs included: lowerings inside functions)."""

    path: str
    qualname: str
    line: int
    end_line: int
    signature: str
    body_hash: str
    fingerprint: Fingerprint
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
    end_line: int = 0  # its last line (0: not known)


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
    lines_fingerprint: LinesFingerprint | None = None
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
    # the module's own torch version helpers, read from their bodies (name -> spec), and
    # its functions that never read the torch version: for ``if helper(X):`` elsewhere
    version_helpers: dict[str, VersionHelperSpec] = field(default_factory=dict)
    not_version_helpers: frozenset[str] = frozenset()
    # undecorated module-level defs named outside themselves: name -> (first line, last
    # line, lines naming it), and the sorted CRC-32s of the file's identifiers
    # (``install_gates``: a def used only under one version gate runs only under it)
    def_mentions: dict[str, tuple[int, int, tuple[int, ...]]] = field(default_factory=dict)
    name_hashes: array = field(default_factory=lambda: array("I"))
