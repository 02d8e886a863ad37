"""The impact report as the engines exchange it: typed records of the JSON document that
``instep impact --format json`` writes and ``instep run --impact`` / ``instep triage
--impact`` read, the vocabularies it carries, and its one writer and one reader.

The impact engine builds an :class:`ImpactDocument` from its in-memory report
(``impact/export/json_doc.py``) and writes it with :meth:`ImpactDocument.to_json`; the
consumers read it with :func:`read_report` (or take the records straight from an
in-process analysis) and never import the impact engine. The vocabularies (action, risk,
coupling kind, stage, change kind) live here, below both engines: the impact engine decides
with them (``instep.impact.model`` re-exports them), the consumers read them.

Versioning rule. The document names its version in ``schema``: ``instep.impact/N`` with
one integer ``N`` (:data:`SCHEMA_VERSION`). Any change to what a record holds bumps N: a
field added, removed, renamed or retyped, a member added to or removed from a vocabulary
(a new coupling kind too). A reader accepts exactly the version it was built with: a report
of an older or newer version is a one-line error naming the file and both versions
(``--impact i.json: impact report schema 3, this instep reads schema 4; re-run instep
impact with this instep``, exit 2). Within a version every record has exactly its fields
(an unknown or missing field is an error, as is a value outside its vocabulary or of
another type), except ``stats``: timings and counters for people, read by no engine,
whose keys may change within a version. N was 1 while fields were only added, and read by
string keys; 2 is the first typed version (the same fields as the last 1); 3 adds the C++
half of a backend (the coupling kinds ``registered_kernel`` and ``linked_symbol``, a
coupling's ``role``, the ``library`` unit, the native symbol kinds, the report's ``scope``);
4 adds what a team reads first and the tests it runs: ``definitions`` (what Shim, Test and
Check mean, how things are counted), ``summary.places`` and ``summary.counts`` (units,
couplings and places per action, counted one way), per unit ``tests`` (each suggested test
with the rule that chose it, :class:`SuggestedTest`, and the vocabulary
:class:`SuggestionKind`) and per change ``deprecation`` (a rename that keeps the old name).

Not here: deciding anything (the impact engine's), rendering for people (``impact/export``),
selecting tests (``suites/impact_selection.py``), attribution (``triage/culprits.py``).
Reading validates with pydantic (already instep's validator of ``instep.toml``): its
``validate_json`` builds these frozen dataclasses straight from the bytes, type-checked, in
the time ``json.loads`` takes to build plain dicts (0.27 s for the 12.8 MB release report).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import ConfigDict, TypeAdapter, ValidationError

from instep.errors import BadInput, MissingInput
from instep.pyindex.model import SymbolKind, Vocab

SCHEMA_VERSION = 4
SCHEMA = f"instep.impact/{SCHEMA_VERSION}"
_SCHEMA_PREFIX = "instep.impact/"

# ---------------------------------------------------------------------------------------
# vocabularies (as the JSON carries them: each member's value)


class ChangeKind(Vocab):
    ADDED = "added"
    REMOVED = "removed"
    RENAMED = "renamed"  # same normalised body under another name (moved)
    SIGNATURE = "signature"  # parameters changed (old -> new in `detail`)
    BODY = "body"  # code changed, ignoring formatting, comments and docstrings
    DECORATOR = "decorator"  # decorators / registrations changed
    VALUE = "value"  # an assignment's value or a parameter default changed
    ANNOTATION = "annotation"  # parameter or return annotations changed: calls bind as before


class Stage(Vocab):
    DYNAMO = "Dynamo"
    AOT = "AOTAutograd"
    INDUCTOR = "Inductor"
    FX = "FX"
    DECOMPOSITION = "Decomposition"
    DISTRIBUTED = "Distributed"
    RUNTIME = "Runtime"
    OTHER = "Other"


class CouplingKind(Vocab):
    IMPORT_USE = "import_use"  # import of, or attribute use of, an upstream symbol
    SUBCLASS_OVERRIDE = "subclass_override"  # downstream class overrides an upstream method
    MONKEYPATCH = "monkeypatch"  # assignment / setattr onto an upstream module or class
    FORK = "fork"  # a downstream file or function is a modified copy of upstream's
    REGISTRATION = "registration"  # same op / key registered downstream (lowering, decomp, ...)
    CONFIG = "config"  # an upstream config key read or written downstream
    INHERITED_PATH = "inherited_path"  # reached through an upstream symbol the downstream uses
    C_SHIM = "c_shim"  # C/C++ shim name generated or loaded downstream (best effort)
    OP_SCHEMA = "op_schema"  # an ATen overload named downstream x native_functions.yaml
    HIGHER_ORDER_OP = "higher_order_op"  # torch.ops.higher_order.X named downstream
    HOOK_NAME = "hook_name"  # a member upstream newly reads from a class the backend subclasses
    # a downstream subclass reads self.<attr> that an upstream base __init__ no longer sets
    INHERITED_ATTRIBUTE = "inherited_attribute"
    # a downstream shared object takes a dynamic symbol from an upstream library
    # (impact/join/linked_symbols.py): gone, signature changed or moved on the new upstream
    LINKED_SYMBOL = "linked_symbol"
    # an ATen overload the backend's C++ half registers (torchgen backend yaml, m.impl,
    # autocast KERNEL_* lists, AOTI C shim headers) x native_functions.yaml
    REGISTERED_KERNEL = "registered_kernel"


class KernelRole(Vocab):
    """What a REGISTERED_KERNEL place does with the overload it names."""

    KERNEL = "kernel"  # a kernel for it: an entry of a torchgen backend yaml, or m.impl(...)
    CUSTOM = "custom"  # the backend defines its own op of that name (backend yaml `custom:`)
    AUTOCAST = "autocast"  # an autocast policy: KERNEL_PRIVATEUSEONE(op, [overload,] policy)
    C_SHIM = "c_shim"  # an AOTI C shim the backend declares for it (c_shim_<device>.h)
    OP_LIST = "op_list"  # named by a C++ string "aten::x.y" (a fallback or allow list)


class _Ranked(Vocab):
    """A vocabulary whose members are ordered by declaration (least severe first)."""

    @property
    def rank(self) -> int:
        return _RANKS[self]  # a lookup: hotspots ask it twice per coupling


class Action(_Ranked):
    CHECK = "Check"
    TEST = "Test"
    SHIM = "Shim"


class Risk(_Ranked):
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"


_RANKS: dict[_Ranked, int] = {m: i for v in (Action, Risk) for i, m in enumerate(v)}


class Tristate(Vocab):
    YES = "yes"
    NO = "no"
    UNSURE = "unsure"


class UnitKind(Vocab):
    COMMIT = "commit"  # one commit of a git range (``--upstream-git``)
    PATCH = "patch"  # one patch file (``--patches``)
    FILE = "file"  # one changed file of a release diff
    CLASS = "class"  # one changed class of a large file of a release diff
    LIBRARY = "library"  # a downstream shared object that loses linked upstream symbols


class SuggestionKind(Vocab):
    """Where a suggested test comes from (``impact/join/test_suggestions.py``)."""

    OPINFO = "opinfo"  # OpInfo cases of an operator, through instep's L5 suite
    BUILTIN = "builtin"  # a case of instep's own suites (L1 smoke)
    UPSTREAM = "upstream"  # an upstream test file, or a test function a commit touched
    DOWNSTREAM = "downstream"  # a downstream test file importing a coupled module


class UpstreamMode(Vocab):
    RELEASE = "release"  # two trees, wheels or pip specs
    GIT = "git"  # a commit range
    PATCHES = "patches"  # a tree and a directory of patches


class NativeCheck(Vocab):
    """Whether the downstream's linked upstream symbols were checked, and if not, why."""

    CHECKED = "checked"
    NO_SHARED_OBJECTS = "no_shared_objects"  # the downstream holds none (Python only)
    NEEDS_RELEASES = "needs_releases"  # a git range or patches: no built libraries
    UPSTREAM_NOT_BUILT = "upstream_not_built"  # an upstream side has no shared libraries


#: ``Unit.test_needed``
YesNo = Literal["yes", "no"]

#: how each record is read: strict types, exactly its fields
_STRICT: ConfigDict = ConfigDict(strict=True, extra="forbid")

# ---------------------------------------------------------------------------------------
# records, fields in the order the JSON writes them


@dataclass(frozen=True)
class Gate:
    """A downstream version gate or probe that guards a coupled place."""

    __pydantic_config__: ClassVar[ConfigDict] = _STRICT

    at: str  # path:line
    condition: str  # source text of the condition or marker
    kind: str  # version_compare, version_flag, hasattr, try_import, compat_comment, ...
    min_version: str | None  # gated code runs when upstream >= this
    max_version: str | None  # gated code runs when upstream < this
    upstream_pr: int | None
    note: str


@dataclass(frozen=True)
class Coupling:
    """One downstream place's dependency on one changed upstream symbol, with its verdict."""

    __pydantic_config__: ClassVar[ConfigDict] = _STRICT

    kind: CouplingKind
    upstream: str  # path::qualname of the changed upstream symbol
    downstream: str  # path:line
    owner: str | None  # downstream qualname holding the place (None: module level)
    snippet: str
    action: Action
    risk: Risk
    code_change: Tristate
    rule: str  # the verdict rule that decided (docs/impact.md lists them)
    chain: tuple[str, ...]  # upstream change -> ... -> downstream
    detail: str
    already_adapted: bool
    gate: Gate | None
    best_effort: bool
    problems: tuple[str, ...]  # signature incompatibilities found
    evidence: str  # the breaking path found, or why none was
    role: KernelRole | None  # registered_kernel: what the place does (kernel, autocast, ...)


@dataclass(frozen=True)
class Change:
    """How one upstream symbol changed."""

    __pydantic_config__: ClassVar[ConfigDict] = _STRICT

    symbol: str  # path::qualname
    change: ChangeKind
    also: tuple[ChangeKind, ...]  # further aspects of the same change
    symbol_kind: SymbolKind
    stage: Stage
    detail: str
    renamed_from: str | None
    # a rename that keeps the old name (an alias ``Old = New``, or a def that warns and
    # calls the new one): "renamed to `New`, old name kept with a warning (until 2.16)"
    deprecation: str
    old_line: int | None
    new_line: int | None
    registrations: tuple[str, ...]  # registration keys (op:aten.expand, ...)


@dataclass(frozen=True)
class SuggestedTest:
    """A test to run for some changed upstream symbols, with the rule that chose it.

    ``test`` is what ``instep run`` selects: ``opinfo:sum`` (the L5 OpInfo cases of the
    operator, ``opinfo:cdist:grad`` with gradients), ``instep:smoke/test_l1_smoke.py::
    test_smoke[pointwise]`` (a shipped case), ``test/inductor/test_x.py::TestX::test_y`` or
    a test file (upstream or downstream, relative to its tree).
    """

    __pydantic_config__: ClassVar[ConfigDict] = _STRICT

    test: str
    kind: SuggestionKind
    rule: str  # 'op.registered', 'op.schema', 'op.reaches', 'stage.case', 'commit.touched', ...
    symbols: tuple[str, ...]  # the changed upstream symbols (path::qualname) it exercises
    why: str  # the evidence: the call chain, the schema line, the case's reason


@dataclass(frozen=True)
class Unit:
    """One unit of upstream change (a commit, patch, file or class) and its verdict."""

    __pydantic_config__: ClassVar[ConfigDict] = _STRICT

    id: str  # commit sha[:12], patch name, or upstream path[::Class]
    title: str
    unit_kind: UnitKind
    commit: str | None
    pr: int | None
    reverted_by: str | None
    reverts: str | None
    files: tuple[str, ...]
    upstream: tuple[str, ...]  # 'path::qualname (change)' per change
    changes: tuple[Change, ...]
    action: Action
    risk: Risk
    code_change: Tristate
    test_needed: YesNo
    stage: Stage
    coupling_kinds: tuple[CouplingKind, ...]
    couplings: tuple[Coupling, ...]
    # the distinct ``test`` of :attr:`tests`, most specific first (at most 20)
    suggested_tests: tuple[str, ...]
    tests: tuple[SuggestedTest, ...]  # every suggestion with its rule, symbols and evidence
    rationale: str


@dataclass(frozen=True)
class Refusal:
    """A downstream version check that lets the old upstream through and refuses the new."""

    __pydantic_config__: ClassVar[ConfigDict] = _STRICT

    at: str
    condition: str
    raises: str  # 'ValueError(...)', 'sys.exit(1)'
    scope: str  # 'module' (fails at import) or the qualname of the function that fails


@dataclass(frozen=True)
class Hotspot:
    """A downstream symbol that several upstream units reach (Test or Shim)."""

    __pydantic_config__: ClassVar[ConfigDict] = _STRICT

    symbol: str  # path::qualname
    at: str  # path:line of its first coupled place
    units: int
    upstream_symbols: int
    couplings: int
    action: Action
    risk: Risk
    kinds: tuple[CouplingKind, ...]
    unit_ids: tuple[str, ...]


@dataclass(frozen=True)
class CompatDebt:
    """A downstream gate that no supported upstream version needs any more."""

    __pydantic_config__: ClassVar[ConfigDict] = _STRICT

    at: str
    condition: str
    kind: str
    reason: str


@dataclass(frozen=True)
class Upstream:
    """What was compared upstream."""

    __pydantic_config__: ClassVar[ConfigDict] = _STRICT
    #: fields the JSON leaves out when they hold None
    omitted_when_none: ClassVar[frozenset[str]] = frozenset({"range"})

    mode: UpstreamMode
    old: str  # the labels as given: a pip spec, a path, a revision
    new: str
    range: str | None = None  # git mode: the revision range
    old_version: str | None = None  # the versions read from the two sides
    new_version: str | None = None


@dataclass(frozen=True)
class Downstream:
    """What was read downstream."""

    __pydantic_config__: ClassVar[ConfigDict] = _STRICT

    source: str  # as given: a tree, repo@rev, wheel or pip spec
    files: int | None
    references: int | None


@dataclass(frozen=True)
class UnreadObject:
    """A downstream shared object that could not be read, and why."""

    __pydantic_config__: ClassVar[ConfigDict] = _STRICT

    path: str
    reason: str  # 'not an ELF file', 'truncated: ...', 'another architecture (EM_AARCH64 ...)'


@dataclass(frozen=True)
class Scope:
    """What an analysis read and what it did not: every report opens with it, so that
    "no Shim" is never said of a part that was not read."""

    __pydantic_config__: ClassVar[ConfigDict] = _STRICT

    python_files: int  # downstream Python files indexed
    native: NativeCheck  # whether the linked symbols were checked, or why not
    shared_objects: int  # downstream shared objects read
    unreadable: tuple[UnreadObject, ...]  # downstream shared objects not read (listed first)
    linked_symbols: int  # (object, symbol) pairs taken from the old upstream's libraries
    missing_symbols: int  # of those, the ones the new upstream no longer resolves
    moved_symbols: int  # of those, resolved from another library the object still loads
    upstream_libraries: tuple[str, ...]  # the old upstream's libraries read
    registered_kernels: int | None  # overloads the C++ half registers; None: not read
    detail: str  # why the symbol check did not run (names the side); '' when it ran


@dataclass(frozen=True)
class Counts:
    """Units, couplings and downstream places of one action, each counted once: a unit and
    a place under the strongest action of their couplings, a coupling under its own; an
    import line is no place (docs/impact.md, "Counting")."""

    __pydantic_config__: ClassVar[ConfigDict] = _STRICT

    units: int
    couplings: int
    places: int


@dataclass(frozen=True)
class Summary:
    """The units and couplings counted (each count is over :attr:`ImpactDocument.units`)."""

    __pydantic_config__: ClassVar[ConfigDict] = _STRICT

    units: int
    coupled_units: int
    couplings: int
    places: int  # downstream places holding a coupling (an import line is none)
    counts: Mapping[Action, Counts]  # per action, Shim first: the reports' one way of counting
    by_action: Mapping[Action, int]
    by_risk: Mapping[Risk, int]
    by_stage_action: Mapping[Stage, Mapping[Action, int]]
    by_coupling_kind: Mapping[CouplingKind, int]
    already_adapted: int
    refusals: int
    module_refusals: int


@dataclass(frozen=True)
class Definitions:
    """What the three actions mean and how the report counts, one line each (in the
    report's language): the lines the Markdown and HTML reports open with."""

    __pydantic_config__: ClassVar[ConfigDict] = _STRICT

    actions: Mapping[Action, str]  # Shim, Test, Check -> what it asks of the team
    counting: str  # what a unit, a coupling and a place are, and under which action each counts


@dataclass(frozen=True)
class ImpactDocument:
    """The whole report, as written to and read from JSON."""

    __pydantic_config__: ClassVar[ConfigDict] = _STRICT

    schema: str  # instep.impact/N
    tool: str  # 'instep X.Y.Z'
    generated_at: str  # ISO-8601, UTC
    lang: str  # 'en' | 'zh'
    scope: Scope | None  # what was read (None only for a report not made by an analysis)
    definitions: Definitions
    upstream: Upstream
    downstream: Downstream
    summary: Summary
    refusals: tuple[Refusal, ...]  # module-level first
    hotspots: tuple[Hotspot, ...]
    units: tuple[Unit, ...]
    compat_debt: tuple[CompatDebt, ...]
    warnings: tuple[str, ...]  # skipped files and similar, one line each
    stats: Mapping[str, Any]  # timings and counters: for people, no engine reads them

    def to_json(self) -> str:
        """The document with one top-level key per line and one list item per line.

        Each value is written compactly by the C encoder: ``indent=`` makes Python's
        ``json`` fall back to its pure-Python encoder, which took 0.72 s against 0.27 s this
        way for the report of torch 2.13.0 -> 2.14.1 on torch-npu 2.13.0 (12.8 MB), on the
        critical path at the end of every cold run. A unit per line also keeps the file easy
        to ``grep`` and to diff. Records are encoded from their ``__dict__`` (fields in
        declaration order), so no intermediate dicts are built."""
        lines = []
        for key, value in self.__dict__.items():
            if isinstance(value, tuple) and value:
                items = ",\n  ".join(_compact(item) for item in value)
                text = f"[\n  {items}\n ]"
            else:
                text = _compact(value)
            lines.append(f" {_compact(key)}: {text}")
        return "{\n" + ",\n".join(lines) + "\n}\n"

    @classmethod
    def from_json(cls, data: str | bytes, source: str = "<report>") -> ImpactDocument:
        """The document in ``data``; :class:`BadInput` (one line, naming ``source``) when it
        is not JSON, not an impact report, of another schema version, or breaks the
        schema."""
        try:
            doc = _adapter().validate_json(data)
        except ValidationError as exc:
            raise _why_not(data, exc, source) from None
        if doc.schema != SCHEMA:
            raise _version_error(doc.schema, source)
        return doc


#: every record type (what the writer may meet inside a document)
RECORDS: tuple[type, ...] = (
    Gate,
    Coupling,
    Change,
    SuggestedTest,
    Unit,
    Refusal,
    Hotspot,
    CompatDebt,
    Upstream,
    Downstream,
    UnreadObject,
    Scope,
    Counts,
    Summary,
    Definitions,
    ImpactDocument,
)
#: records whose JSON object is their fields as they are (all but those omitting a field)
_AS_THEY_ARE = frozenset(r for r in RECORDS if not getattr(r, "omitted_when_none", None))


def _fields(record: Any) -> dict[str, Any]:
    """A record as the JSON object the encoder writes: its fields, in order (the encoder
    calls this for every record it meets: a set lookup and the instance's ``__dict__``)."""
    kind = type(record)
    if kind in _AS_THEY_ARE:
        return record.__dict__
    omitted = getattr(kind, "omitted_when_none", None)
    if omitted is None:
        raise TypeError(f"not an impact record: {kind.__name__}")
    return {k: v for k, v in record.__dict__.items() if not (k in omitted and v is None)}


#: records are trees of frozen values: no cycle to look for
_ENCODER = json.JSONEncoder(ensure_ascii=False, check_circular=False, default=_fields)


def _compact(value: Any) -> str:
    return _ENCODER.encode(value)


@functools.cache
def _adapter() -> TypeAdapter[ImpactDocument]:
    return TypeAdapter(ImpactDocument)


# ---------------------------------------------------------------------------------------
# reading a report file


def read_report(path: str | Path, option: str = "--impact") -> ImpactDocument:
    """The report at ``path``; a one-line error naming ``option`` and ``path`` when it is
    missing, not an impact report, or of another schema version."""
    p = Path(path)
    if not p.is_file():
        raise MissingInput(f"{option} {path}: no such file (an instep impact JSON report)")
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise BadInput(f"{option} {path}: cannot be read ({exc.strerror})") from None
    return ImpactDocument.from_json(data, f"{option} {path}")


def _version_error(schema: str, source: str) -> BadInput:
    version = schema.removeprefix(_SCHEMA_PREFIX)
    return BadInput(
        f"{source}: impact report schema {version}, this instep reads schema"
        f" {SCHEMA_VERSION}; re-run instep impact with this instep"
    )


def _why_not(data: str | bytes, exc: ValidationError, source: str) -> BadInput:
    """The one-line reason a document did not validate: not JSON, no report, another
    version, or the first field that breaks the schema."""
    first = exc.errors()[0]
    if first["type"] == "json_invalid":
        return BadInput(f"{source}: not JSON ({first['msg']}); expected an instep impact report")
    try:
        raw = json.loads(data)
    except ValueError:  # validated as JSON above: not reached
        raw = None
    if not isinstance(raw, dict) or not isinstance(raw.get("units"), list):
        return BadInput(
            f"{source}: not an instep impact JSON report (no 'units' list);"
            " write one with instep impact ... --format json --out FILE"
        )
    schema = raw.get("schema")
    if not isinstance(schema, str) or not schema.startswith(_SCHEMA_PREFIX):
        return BadInput(
            f"{source}: not an instep impact JSON report (schema {schema!r}, expected"
            f" {SCHEMA!r}); write one with instep impact ... --format json --out FILE"
        )
    if schema != SCHEMA:
        return _version_error(schema, source)
    where = ".".join(str(part) for part in first["loc"]) or "the document"
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return BadInput(
        f"{source}: breaks impact report schema {SCHEMA_VERSION} at {where}: {first['msg']}{more}"
    )


# ---------------------------------------------------------------------------------------
# what the consumers ask of the vocabularies


def parse_actions(text: str, option: str = "--action") -> tuple[Action, ...]:
    """``Shim,Test`` -> (Action.SHIM, Action.TEST); a one-line error naming the actions."""
    known = {a.value: a for a in Action}
    wanted = tuple(a.strip().capitalize() for a in text.split(",") if a.strip())
    unknown = [a for a in wanted if a not in known]
    if unknown or not wanted:
        names = ", ".join(a.value for a in sorted(Action, key=lambda a: -a.rank))
        raise BadInput(f"{option} {text!r}: expected actions from {names}")
    return tuple(known[a] for a in wanted)


def unit_priority(unit: Unit) -> tuple[int, int, int, str]:
    """Sort key, most urgent first: action, risk, then more couplings, then id."""
    return (-unit.action.rank, -unit.risk.rank, -len(unit.couplings), unit.id)
