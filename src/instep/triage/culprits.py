"""Which upstream change most likely broke a failing case: stored failures joined with an
impact report.

Reads the report ``instep impact --format json`` writes, as the impact contract's typed
records (``instep.impact_contract``: never the impact engine itself, so triage stays free
of it), and a stored failure: its exception chain (files, functions, lines), its messages
and the layer triage filed it under. Each unit of the report that the failure can be tied
to gets a score from evidence, strongest first:

- a downstream place the report coupled (file and line, or the function that holds it)
  is a frame of the failure;
- the error names what the report names: the downstream function whose signature no
  longer fits (``X.f() got an unexpected keyword argument 'k'``), the parameter the
  report says is not accepted, the name an import could not find in the module the
  report says lost it;
- a changed upstream function is a frame of the failure;
- a shared object failed to load with ``undefined symbol: <mangled>`` (an ``ImportError``
  or ``OSError``) and the report's native unit says that object loses that symbol (the
  loader's message is its ``linked_symbol`` couplings' evidence), or names that object;
- and, only for a unit already tied to the failure by one of those: the kind of change
  fits the kind of failure (a signature change and a ``TypeError`` about arguments, a
  removed or renamed name and an ``ImportError``/``AttributeError``, a registration or
  value change and a missing lowering), the unit's stage fits the layer, and the
  coupling that matched is a Shim.

Not here: reading code, running anything, or guessing without a tie (a unit that only
shares a stage with the failure is never named).
"""

from __future__ import annotations

import hashlib
import os
import pickle
import re
import sqlite3
import time
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from instep import impact_contract
from instep.impact_contract import (
    Action,
    ChangeKind,
    Coupling,
    CouplingKind,
    ImpactDocument,
    Stage,
    Unit,
    read_report,
)
from instep.layers import Layer
from instep.pyindex.model import module_of

#: Weights of the evidence, strongest first (see the module docstring).
PLACE_LINE = 6.0  # the coupled downstream line is a frame
PLACE_FUNCTION = 4.0  # the coupled downstream function is a frame
IMPORT_NAME = 6.0  # "cannot import name 'n' from 'm'" and the unit removed/renamed m.n
OWNER_NAMED = 5.0  # the error names the coupled downstream function (Class.method)
PROBLEM_NAMED = 4.0  # the error quotes the parameter the report says is not accepted
UPSTREAM_FRAME = 3.0  # a changed upstream function is a frame
UNDEFINED_SYMBOL = 6.0  # "lib.so: undefined symbol: X" and the report says lib.so loses X
FAILED_LIBRARY = 3.0  # the shared object that failed to load is one the report names
KIND_FITS = 2.0
SHIM = 2.0
STAGE_FITS = 1.0

HIGH, MEDIUM = 9.0, 6.0  # confidence thresholds on the score

#: the index's tables: frame file name, (file name, function), (module, name), owner,
#: called name, quoted parameter -> what the report says; each unit's own fields; and
#: under "files" the file names a frame must have to be tied at all
_TABLES = ("places", "changed", "changed_in", "owners", "called", "problems", "units", "files")
_TABLES += ("symbols", "libraries")  # linked symbols (mangled) and their shared objects
#: a report modified this recently may be rewritten within the same mtime tick
_RACY_S = 2.0
#: a cached index is only reused by the code that built it, for the schema it read
_CODE_DIGEST = hashlib.blake2b(
    Path(__file__).read_bytes() + Path(impact_contract.__file__).read_bytes(), digest_size=8
).digest()

#: Impact stages that a failure filed under a triage layer can come from.
STAGES_OF_LAYER: dict[Layer, frozenset[Stage]] = {
    Layer.ENV: frozenset({Stage.OTHER, Stage.RUNTIME, Stage.INDUCTOR, Stage.DYNAMO}),
    Layer.EAGER: frozenset({Stage.RUNTIME, Stage.OTHER}),
    Layer.REGISTRATION: frozenset({Stage.INDUCTOR, Stage.DYNAMO, Stage.RUNTIME, Stage.OTHER}),
    Layer.DYNAMO: frozenset({Stage.DYNAMO, Stage.FX}),
    Layer.AOT: frozenset({Stage.AOT, Stage.FX, Stage.DECOMPOSITION}),
    Layer.DECOMPOSITION: frozenset({Stage.DECOMPOSITION, Stage.AOT}),
    Layer.LOWERING: frozenset({Stage.INDUCTOR, Stage.DECOMPOSITION}),
    Layer.SCHEDULER: frozenset({Stage.INDUCTOR}),
    Layer.CODEGEN: frozenset({Stage.INDUCTOR}),
    Layer.KERNEL_COMPILE: frozenset({Stage.INDUCTOR}),
    Layer.RUNTIME: frozenset({Stage.RUNTIME, Stage.INDUCTOR}),
    Layer.NUMERICS: frozenset({Stage.INDUCTOR, Stage.DECOMPOSITION}),
}

_ARGUMENTS = re.compile(
    r"unexpected keyword argument|required (?:positional|keyword-only) argument"
    r"|positional arguments? but \d+ (?:were|was) given|takes no arguments"
)
_CANNOT_IMPORT = re.compile(r"cannot import name '(\w+)' from '([\w.]+)'")
_NO_ATTRIBUTE = re.compile(r"module '([\w.]+)' has no attribute '(\w+)'")
_NO_MODULE = re.compile(r"No module named '([\w.]+)'")
# "<path>.so: undefined symbol: <mangled>", as the dynamic loader words it (ImportError,
# OSError), and the same text as a linked_symbol coupling's evidence
_UNDEFINED = re.compile(r"(?:([^\s:'\"]+\.so(?:\.[\w.]+)?): )?undefined symbol: ([\w.$@]+)")
_MISSING_LOWERING = re.compile(r"MissingOperator|missing lowering|No lowering", re.IGNORECASE)
_QUOTED = re.compile(r"'([A-Za-z_]\w*)'")
_CALL_KEYWORD = re.compile(r"([A-Za-z_][\w.]*)\(\) got an unexpected keyword argument '(\w+)'")
_CALLED = re.compile(r"([A-Za-z_][\w.]*)\(\)")  # "f() got an unexpected keyword argument"
#: what a patch's right-hand side calls its function through, not the function itself
_WRAPPERS = frozenset({"classmethod", "staticmethod", "property", "partial", "functools", "wraps"})
#: changes after which the old name is gone (an import or lookup of it fails)
_LOST = frozenset({ChangeKind.REMOVED, ChangeKind.RENAMED})
#: changes after which a linked symbol's mangled name is gone
_SYMBOL_GONE = frozenset({ChangeKind.REMOVED, ChangeKind.RENAMED, ChangeKind.SIGNATURE})
#: changes that can leave an op without its lowering
_REREGISTERED = frozenset({ChangeKind.DECORATOR, ChangeKind.VALUE, ChangeKind.SIGNATURE})
_LONGREPR_FRAME = re.compile(r"^(\S+\.py):(\d+): in (\S+)", re.MULTILINE)
_DOTTED = re.compile(r"[A-Za-z_][\w.]*")


@dataclass(frozen=True)
class Evidence:
    kind: str  # place, named, import, upstream_frame, kind_fits, stage_fits, shim
    detail: str
    weight: float

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "detail": self.detail, "weight": self.weight}


@dataclass(frozen=True)
class TiedCoupling:
    """What attribution reads of a coupling of the report (the index keeps only these)."""

    kind: CouplingKind
    upstream: str
    downstream: str
    owner: str | None
    snippet: str
    action: Action
    rule: str
    problems: tuple[str, ...]

    @classmethod
    def of(cls, c: Coupling) -> TiedCoupling:
        return cls(
            c.kind, c.upstream, c.downstream, c.owner, c.snippet, c.action, c.rule, c.problems
        )

    def ref(self) -> CouplingRef:
        return CouplingRef(str(self.kind), self.upstream, self.downstream, self.owner)


@dataclass(frozen=True)
class CouplingRef:
    """The coupling an attribution names, as triage stores it (``evidence.culprits``)."""

    kind: str  # a coupling kind's value, as it was when stored
    upstream: str  # path::qualname
    downstream: str  # path:line
    owner: str | None

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "upstream": self.upstream,
            "downstream": self.downstream,
            "owner": self.owner,
        }


@dataclass(frozen=True)
class UnitFacts:
    """What attribution reads of a unit of the report."""

    id: str
    title: str
    action: Action
    pr: int | None
    commit: str | None
    stage: Stage
    change_kinds: frozenset[ChangeKind]

    @classmethod
    def of(cls, u: Unit) -> UnitFacts:
        kinds = frozenset(c.change for c in u.changes)
        return cls(u.id, u.title, u.action, u.pr, u.commit, u.stage, kinds)


@dataclass
class Attribution:
    """One upstream unit named as a likely cause of one failure."""

    unit: str
    title: str
    action: Action
    pr: int | None
    commit: str | None
    score: float
    evidence: list[Evidence] = field(default_factory=list)
    #: the coupling that tied the unit to the failure
    coupling: CouplingRef | None = None

    @property
    def confidence(self) -> str:
        return "high" if self.score >= HIGH else "medium" if self.score >= MEDIUM else "low"

    def as_dict(self) -> dict[str, Any]:
        return {
            "unit": self.unit,
            "title": self.title,
            "action": str(self.action),
            "pr": self.pr,
            "commit": self.commit,
            "score": round(self.score, 2),
            "confidence": self.confidence,
            "evidence": [e.as_dict() for e in self.evidence],
            "coupling": self.coupling.as_dict() if self.coupling else None,
        }

    @property
    def name(self) -> str:
        """``#PR title (unit)`` for a commit with a PR number, else the unit id."""
        if self.pr:
            title = self.title if len(self.title) <= 70 else self.title[:69] + "…"
            head = "" if f"#{self.pr}" in title else f"#{self.pr} "
            return f"{head}{title} ({self.unit})"
        return self.unit

    def one_line(self) -> str:
        why = "; ".join(e.detail for e in self.evidence[:2])
        return f"{self.name} [{self.action}, {self.confidence}]: {why}"


def _split_place(place: str) -> tuple[str, int | None]:
    path, _, line = place.rpartition(":")
    if path and line.isdigit():
        return path, int(line)
    return place, None


@dataclass(frozen=True)
class _Place:
    unit: int
    path: str
    line: int | None
    function: str | None  # the last part of the coupling's downstream owner
    coupling: TiedCoupling


@dataclass(frozen=True)
class _Changed:
    unit: int
    path: str
    module: str
    name: str  # last part of the qualname
    qualname: str
    change: ChangeKind


class CulpritIndex:
    """An ``instep impact`` report, indexed for joining with failures.

    The index is a set of tables (a frame's file name, a changed name, a downstream owner
    ... -> what the report says about it). Built from the JSON it lives in memory; loaded
    from the cache (:meth:`load`) it stays in an SQLite file and each key is read when a
    failure first asks for it, so a run pays for the keys its failures touch, not for the
    report's 10,000 couplings.
    """

    def __init__(self, doc: ImpactDocument, source: str = "<report>") -> None:
        self.source = source
        self._db: sqlite3.Connection | None = None
        self._tables: dict[str, dict[str, Any]] = {t: {} for t in _TABLES}
        self._frames: dict[tuple[Any, Any, Any], list[_Tie]] = {}
        self._texts: dict[str, _TextFacts] = {}
        self._file_named: dict[str, bool] = {}
        self._said: dict[_TextFacts, _TextFacts] = {}
        self._attributed: dict[tuple[Any, ...], list[Attribution]] = {}
        for i, unit in enumerate(doc.units):
            self._index_unit(i, unit)
        changed_files = {key.partition("\0")[0] for key in self._tables["changed"]}
        self._files = self._tables["files"][""] = frozenset(self._tables["places"]) | changed_files

    @classmethod
    def _backed(cls, db: sqlite3.Connection, source: str) -> CulpritIndex:
        report = cls.__new__(cls)
        report.source = source
        report._db = db
        report._tables = {t: {} for t in _TABLES}  # the keys read so far
        report._frames = {}
        report._texts = {}
        report._file_named = {}
        report._said = {}
        report._attributed = {}
        report._files = report._get("files", "") or frozenset()
        return report

    @classmethod
    def load(cls, path: str | Path, cache_dir: Path | None = None) -> CulpritIndex:
        """The report at ``path``, indexed; with ``cache_dir``, the index is kept there as
        an SQLite file named by the report's content digest, so a report read again is not
        parsed again (14 MB of JSON for a release take 0.2 s).

        The digest is found from the report's path, size and modification time (an alias
        file holding it, as git's index trusts a file's stat); only when those changed is
        the report read and hashed, and a report that was merely touched or copied finds
        its index by the digest. A report modified less than two seconds before it was
        indexed gets no alias (its time may not tell a rewrite in the same tick), so it is
        hashed on each call until it is older."""
        if cache_dir is None:
            return cls(read_report(path), str(path))
        try:
            st = Path(path).stat()
        except OSError:
            return cls(read_report(path), str(path))  # the loader's one-line error
        stat_key = hashlib.blake2b(digest_size=16)
        stat_key.update(f"{Path(path).resolve()}\0{st.st_size}\0{st.st_mtime_ns}".encode())
        stat_key.update(_CODE_DIGEST)
        alias = cache_dir / f"{stat_key.hexdigest()}.alias"
        try:
            digest = alias.read_text(encoding="ascii").strip()
        except OSError:
            digest = None
        if digest:
            found = cls._open(cache_dir / f"{digest}.sqlite", digest, str(path))
            if found is not None:
                return found
        try:
            content = hashlib.blake2b(Path(path).read_bytes(), digest_size=16)
        except OSError:
            return cls(read_report(path), str(path))
        content.update(_CODE_DIGEST)
        digest = content.hexdigest()
        cached = cache_dir / f"{digest}.sqlite"
        report = cls._open(cached, digest, str(path))
        if report is None:
            report = cls(read_report(path), str(path))
            report._save(cached, digest)
        if time.time() - st.st_mtime > _RACY_S:
            _write_atomically(alias, digest.encode("ascii"))
        return report

    @classmethod
    def _open(cls, cached: Path, digest: str, source: str) -> CulpritIndex | None:
        """The index in ``cached`` when it is there, whole and holds ``digest``."""
        if not cached.is_file():
            return None
        try:
            db = sqlite3.connect(f"{cached.as_uri()}?mode=ro&immutable=1", uri=True)
            row = db.execute("SELECT value FROM meta WHERE key = 'digest'").fetchone()
        except sqlite3.Error:
            return None  # stale or broken: built again
        if row is None or row[0] != digest:
            db.close()
            return None
        return cls._backed(db, source)

    def _save(self, cached: Path, digest: str) -> None:
        """Write the in-memory index to ``cached`` (atomically; a read-only cache only
        costs the next call its parse)."""
        tmp = cached.with_name(f"{cached.stem}.{os.getpid()}.tmp")
        try:
            cached.parent.mkdir(parents=True, exist_ok=True)
            tmp.unlink(missing_ok=True)
            db = sqlite3.connect(tmp)
            with db:
                db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
                db.execute(
                    "CREATE TABLE entry (tbl TEXT, key TEXT, value BLOB,"
                    " PRIMARY KEY (tbl, key)) WITHOUT ROWID"
                )
                db.executemany(
                    "INSERT INTO entry VALUES (?, ?, ?)",
                    (
                        (table, key, pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
                        for table, values in self._tables.items()
                        for key, value in values.items()
                    ),
                )
                db.execute("INSERT INTO meta VALUES ('digest', ?)", (digest,))
            db.close()
            tmp.replace(cached)
        except (OSError, sqlite3.Error):
            tmp.unlink(missing_ok=True)

    def _get(self, table: str, key: str) -> Any:
        """What the index holds under ``key`` in ``table`` (None when nothing)."""
        values = self._tables[table]
        if key in values or self._db is None:
            return values.get(key)
        row = self._db.execute(
            "SELECT value FROM entry WHERE tbl = ? AND key = ?", (table, key)
        ).fetchone()
        value = values[key] = pickle.loads(row[0]) if row is not None else None
        return value

    def _add(self, table: str, key: str, item: Any) -> None:
        self._tables[table].setdefault(key, []).append(item)

    def unit(self, i: int) -> UnitFacts:
        """What attribution reads of the report's ``i``-th unit."""
        found = self._get("units", str(i))
        if found is None:
            raise KeyError(f"{self.source}: no unit {i}")
        return found

    def _index_unit(self, i: int, unit: Unit) -> None:
        self._tables["units"][str(i)] = UnitFacts.of(unit)
        for change in unit.changes:
            path, _, qualname = change.symbol.partition("::")
            if not qualname:
                continue
            places = [(path, qualname)]
            if change.renamed_from:  # also where it was: old imports fail there
                old_path, _, old_name = change.renamed_from.rpartition("::")
                places.append((old_path or path, old_name or qualname))
            kind = change.change
            for where, qn in places:
                c = _Changed(i, where, module_of(where), qn.rsplit(".", 1)[-1], qn, kind)
                self._add("changed", _key(_file_name(where), c.name), c)
                self._add("changed_in", _key(c.module, c.name), c)
        places = self._tables["places"]
        for full in unit.couplings:
            coupling = TiedCoupling.of(full)
            path, line = _split_place(coupling.downstream)
            owner = coupling.owner or None
            function = owner.rsplit(".", 1)[-1] if owner else None
            by_path = places.setdefault(_file_name(path), {})
            by_path.setdefault(path, []).append(_Place(i, path, line, function, coupling))
            if owner and "." in owner:  # Class.method: the form Python's messages use
                self._add("owners", owner, (i, coupling))
            if owner:  # what a TypeError calls it: "Class.method()" or "function()"
                self._add("called", owner, (i, coupling))
            if coupling.kind is CouplingKind.MONKEYPATCH:  # the functions patched in
                for name in _patched_in(coupling.snippet):
                    self._add("called", name, (i, coupling))
            for problem in coupling.problems:
                for name in _QUOTED.findall(problem):
                    self._add("problems", name, (i, coupling))
            if coupling.kind is CouplingKind.LINKED_SYMBOL:  # what its loader would say
                for library, symbol in _UNDEFINED.findall(full.evidence):
                    self._add("symbols", symbol, (i, library, coupling))
                    self._add("libraries", _file_name(library), (i, library, coupling))

    def attribute(self, outcome: dict[str, Any], top: int = 3) -> list[Attribution]:
        """The units most likely to have caused ``outcome`` (a stored failure), best first.

        Failures whose chains tie the same frames, whose messages say the same facts and
        that sit in the same layer get the same attributions (the same objects: read them,
        do not change them), so a batch of like failures is attributed once."""
        tied: list[list[_Tie]] = []  # what each frame on the chain ties, frames once each
        seen: set[tuple[Any, Any, Any]] = set()
        for frame in _frames(outcome):
            file = str(frame.get("file") or "")
            named = self._file_named.get(file)
            if named is None:
                named = self._file_named[file] = _file_name(file.replace("\\", "/")) in self._files
            if not named:
                continue  # most frames (pytest, the test itself) are in no file the report names
            key = (file, frame.get("function"), frame.get("line"))
            if key not in seen:  # recursion and re-raised chains repeat frames
                seen.add(key)
                ties = self._frames.get(key)
                if ties is None:  # the same frame in many failures is joined once
                    ties = self._frames[key] = []
                    self._tie_frame(frame, lambda *tie, into=ties: into.append(tie))
                if ties:
                    tied.append(ties)
        parts = [self._facts_of(part) for part in _messages(outcome)]
        layer = str(outcome.get("layer") or "")
        # ids of objects the report keeps for its life (its frame and message memos)
        memo = (tuple(map(id, tied)), tuple(map(id, parts)), layer, top)
        ranked = self._attributed.get(memo)
        if ranked is None:
            ranked = self._attributed[memo] = self._rank(tied, _TextFacts.merge(parts), layer, top)
        return list(ranked)

    def _rank(
        self, tied: list[list[_Tie]], facts: _TextFacts, layer: str, top: int
    ) -> list[Attribution]:
        found: dict[int, _Found] = {}

        def add(unit: int, evidence: Evidence, coupling: TiedCoupling | None) -> None:
            found.setdefault(unit, _Found()).add(evidence, coupling)

        for ties in tied:
            for tie in ties:
                add(*tie)
        self._tie_text(facts, add)
        self._tie_native(facts, add)
        if not found:
            return []
        arguments, missing_name, lowering = facts.arguments, facts.missing_name, facts.lowering
        stages = STAGES_OF_LAYER.get(layer, frozenset())
        out = []
        for i, f in found.items():
            unit = self.unit(i)
            kinds = unit.change_kinds
            if arguments and ChangeKind.SIGNATURE in kinds:
                f.add(
                    Evidence(
                        "kind_fits", "a signature changed; the error is about arguments", KIND_FITS
                    ),
                    None,
                )
            elif missing_name and kinds & _LOST:
                f.add(
                    Evidence(
                        "kind_fits",
                        "a name was removed or renamed; the error is a missing name",
                        KIND_FITS,
                    ),
                    None,
                )
            elif facts.undefined and kinds & _SYMBOL_GONE:
                f.add(
                    Evidence(
                        "kind_fits",
                        "a linked symbol is gone; the error is an undefined symbol",
                        KIND_FITS,
                    ),
                    None,
                )
            elif lowering and kinds & _REREGISTERED:
                f.add(
                    Evidence(
                        "kind_fits",
                        "a registration changed; the error is a missing lowering",
                        KIND_FITS,
                    ),
                    None,
                )
            if unit.stage in stages:
                f.add(
                    Evidence(
                        "stage_fits",
                        f"stage {unit.stage} fits layer {layer}",
                        STAGE_FITS,
                    ),
                    None,
                )
            if f.coupling is not None and f.coupling.action is Action.SHIM:
                f.add(
                    Evidence(
                        "shim",
                        f"the report rated this coupling Shim ({f.coupling.rule})",
                        SHIM,
                    ),
                    None,
                )
            out.append(
                Attribution(
                    unit=unit.id,
                    title=unit.title or unit.id,
                    action=unit.action,
                    pr=unit.pr,
                    commit=unit.commit,
                    score=f.score,
                    evidence=sorted(f.evidence, key=lambda e: -e.weight),
                    coupling=f.coupling.ref() if f.coupling else None,
                )
            )
        out.sort(key=lambda a: (-a.score, a.unit))
        return out[:top]

    def _tie_frame(self, frame: dict[str, Any], add: Any) -> None:
        file = str(frame.get("file") or "").replace("\\", "/")
        name = file.rsplit("/", 1)[-1]
        function, line = frame.get("function"), frame.get("line")
        by_path = self._get("places", name) or {}
        places = [p for path, ps in by_path.items() if _same_file(file, path) for p in ps]
        for place in places:
            where = f"{place.path}:{line}"
            if place.line is not None and place.line == line:
                add(
                    place.unit,
                    Evidence("place", f"coupled line {where} is on the chain", PLACE_LINE),
                    place.coupling,
                )
            elif place.function and place.function == function:
                add(
                    place.unit,
                    Evidence(
                        "place",
                        f"coupled function {function} ({where}) is on the chain",
                        PLACE_FUNCTION,
                    ),
                    place.coupling,
                )
        for changed in self._get("changed", _key(name, str(function))) or ():
            if _same_file(file, changed.path):
                add(
                    changed.unit,
                    Evidence(
                        "upstream_frame",
                        f"changed {changed.qualname} ({changed.change}) is on the chain"
                        f" at {changed.path}:{line}",
                        UPSTREAM_FRAME,
                    ),
                    None,
                )

    def _facts_of(self, part: str) -> _TextFacts:
        """What one message says, read once per distinct message in a run."""
        facts = self._texts.get(part)
        if facts is None:  # messages that say the same facts share one object
            said = _TextFacts.of(part)
            facts = self._texts[part] = self._said.setdefault(said, said)
        return facts

    def _tie_text(self, facts: _TextFacts, add: Any) -> None:
        for name, module in facts.cannot_import:
            self._tie_missing(module, name, f"cannot import {name} from {module}", add)
        for module, name in facts.no_attribute:
            self._tie_missing(module, name, f"{module} has no attribute {name}", add)
        for module in facts.no_module:
            parent, _, last = module.rpartition(".")
            self._tie_missing(parent, last, f"no module {module}", add)
        for token in facts.dotted:
            for unit, coupling in self._get("owners", token.rstrip(".")) or ():
                add(
                    unit,
                    Evidence(
                        "named",
                        f"the error names {token} ({coupling.downstream})",
                        OWNER_NAMED,
                    ),
                    coupling,
                )
        for called in facts.called:
            for unit, coupling in self._get("called", called) or ():
                detail = f"the error calls {called}() ({coupling.downstream})"
                add(unit, Evidence("named", detail, OWNER_NAMED), coupling)
        bound = facts.bound  # "f() got an unexpected keyword argument 'k'"
        for called, keyword in bound:
            for unit, coupling in self._get("called", called) or ():
                if any(f"'{keyword}'" in p for p in coupling.problems):
                    detail = f"{called}() rejects '{keyword}', as the report says"
                    add(unit, Evidence("problem", detail, PROBLEM_NAMED), coupling)
        # a quoted name the error binds to another function is not this coupling's problem
        keywords = {keyword for _, keyword in bound}
        for name in (n for n in facts.quoted if n not in keywords):
            for unit, coupling in self._get("problems", name) or ():
                add(
                    unit,
                    Evidence(
                        "problem",
                        f"the error quotes '{name}', which the report says"
                        f" {coupling.owner or coupling.downstream} does not accept",
                        PROBLEM_NAMED,
                    ),
                    coupling,
                )

    def _tie_native(self, facts: _TextFacts, add: Any) -> None:
        """A shared object that failed to load on a symbol the report says it loses."""
        for failed, symbol in facts.undefined:
            tied = set()
            for unit, library, coupling in self._get("symbols", symbol) or ():
                if failed and not _same_file(failed.replace("\\", "/"), library):
                    continue
                tied.add(unit)
                detail = f"undefined symbol {symbol}: the report says {library} loses it"
                add(unit, Evidence("native", detail, UNDEFINED_SYMBOL), coupling)
            if not failed:
                continue
            for unit, library, coupling in self._get("libraries", _file_name(failed)) or ():
                if unit not in tied and _same_file(failed.replace("\\", "/"), library):
                    tied.add(unit)
                    detail = f"{library} failed to load, and the report says it loses symbols"
                    add(unit, Evidence("library", detail, FAILED_LIBRARY), coupling)

    def _tie_missing(self, module: str, name: str, what: str, add: Any) -> None:
        for changed in self._get("changed_in", _key(module, name)) or ():
            if changed.change in _LOST:
                add(
                    changed.unit,
                    Evidence(
                        "import",
                        f"{what}: {changed.path}::{changed.qualname} {changed.change}",
                        IMPORT_NAME,
                    ),
                    None,
                )


#: one piece of evidence a frame gives: (unit, evidence, the coupling it came through)
_Tie = tuple[int, "Evidence", "TiedCoupling | None"]


class _Found:
    """Evidence gathered for one unit; each kind counts once, at its strongest."""

    def __init__(self) -> None:
        self.by_kind: dict[str, Evidence] = {}
        self.coupling: TiedCoupling | None = None
        self._coupling_weight = -1.0

    def add(self, evidence: Evidence, coupling: TiedCoupling | None) -> None:
        held = self.by_kind.get(evidence.kind)
        if held is None or evidence.weight > held.weight:
            self.by_kind[evidence.kind] = evidence
        if coupling is not None and evidence.weight > self._coupling_weight:
            self.coupling, self._coupling_weight = coupling, evidence.weight

    @property
    def evidence(self) -> list[Evidence]:
        return list(self.by_kind.values())

    @property
    def score(self) -> float:
        return sum(e.weight for e in self.by_kind.values())


def _patched_in(snippet: str) -> list[str]:
    """The names a monkey-patch installs: ``a.b = f``, ``= classmethod(f)``,
    ``setattr(a, "b", f)`` give ``f``."""
    if "setattr(" in snippet:
        value = snippet.rsplit(",", 1)[-1]
    elif "=" in snippet:
        value = snippet.split("=", 1)[1]
    else:
        return []
    names = [n.rsplit(".", 1)[-1] for n in _DOTTED.findall(value)]
    return [n for n in names if n not in _WRAPPERS]


def _key(*parts: str) -> str:
    return "\0".join(parts)


def _write_atomically(path: Path, data: bytes) -> None:
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(data)
        tmp.replace(path)
    except OSError:
        tmp.unlink(missing_ok=True)  # a read-only cache: the next call hashes again


def _file_name(path: str) -> str:
    return path.rsplit("/", 1)[-1]  # a report's paths are POSIX (Path() is slow here)


def _same_file(file: str, relative: str) -> bool:
    rel = relative.replace("\\", "/").lstrip("./")
    return file == rel or file.endswith("/" + rel)


def _frames(outcome: dict[str, Any]) -> Iterator[dict[str, Any]]:
    chain = outcome.get("exception_chain") or []
    for exc in chain:
        for frame in exc.get("frames") or []:
            if "file" in frame:
                yield frame
    if not chain:  # a collection error keeps pytest's text only: "path.py:2: in <module>"
        for file, line, function in _LONGREPR_FRAME.findall(str(outcome.get("longrepr") or "")):
            yield {"file": file, "line": int(line), "function": function}


def _messages(outcome: dict[str, Any]) -> list[str]:
    """The failure's message and each chained exception's ``Type: message``: the parts of
    the text attribution reads (no pattern it reads matches across two parts)."""
    parts: list[str] = [str(outcome.get("message") or "")]
    for exc in outcome.get("exception_chain") or []:
        parts.append(f"{exc.get('type')}: {exc.get('message') or ''}")
    return parts


@dataclass(frozen=True)
class _TextFacts:
    """What an error's text says that attribution can use, in the order the text says it
    (so ties between equal evidence resolve the same way in every process)."""

    cannot_import: tuple[tuple[str, str], ...]  # (name, module)
    no_attribute: tuple[tuple[str, str], ...]  # (module, name)
    no_module: tuple[str, ...]
    dotted: tuple[str, ...]  # names, once each
    called: tuple[str, ...]  # "f()" -> f, once each
    bound: tuple[tuple[str, str], ...]  # "f() got an unexpected keyword argument 'k'"
    quoted: tuple[str, ...]  # 'n', once each
    arguments: bool  # the error is about a call's arguments
    missing_name: bool  # an import or attribute lookup found nothing
    lowering: bool  # a lowering is missing
    undefined: tuple[tuple[str, str], ...] = ()  # (shared object or "", mangled symbol)

    @classmethod
    def of(cls, text: str) -> _TextFacts:
        cannot_import = tuple(_CANNOT_IMPORT.findall(text))
        no_attribute = tuple(_NO_ATTRIBUTE.findall(text))
        no_module = tuple(_NO_MODULE.findall(text))
        return cls(
            cannot_import=cannot_import,
            no_attribute=no_attribute,
            no_module=no_module,
            dotted=tuple(dict.fromkeys(_DOTTED.findall(text))),
            called=tuple(dict.fromkeys(_CALLED.findall(text))),
            bound=tuple(_CALL_KEYWORD.findall(text)),
            quoted=tuple(dict.fromkeys(_QUOTED.findall(text))),
            arguments=bool(_ARGUMENTS.search(text)),
            missing_name=bool(cannot_import or no_attribute or no_module),
            lowering=bool(_MISSING_LOWERING.search(text)),
            undefined=tuple(_UNDEFINED.findall(text)),
        )

    @classmethod
    def merge(cls, parts: list[_TextFacts]) -> _TextFacts:
        """The facts of the parts' text together (each part's, in order)."""
        if len(parts) == 1:
            return parts[0]

        def cat(name: str) -> tuple[Any, ...]:
            return tuple(item for p in parts for item in getattr(p, name))

        def once(name: str) -> tuple[Any, ...]:
            return tuple(dict.fromkeys(cat(name)))

        return cls(
            cannot_import=cat("cannot_import"),
            no_attribute=cat("no_attribute"),
            no_module=cat("no_module"),
            dotted=once("dotted"),
            called=once("called"),
            bound=cat("bound"),
            quoted=once("quoted"),
            arguments=any(p.arguments for p in parts),
            missing_name=any(p.missing_name for p in parts),
            lowering=any(p.lowering for p in parts),
            undefined=cat("undefined"),
        )


def attribute_all(
    report: CulpritIndex, outcomes: Iterable[dict[str, Any]], top: int = 3
) -> dict[str, list[Attribution]]:
    """Attributions per node id, for the failing outcomes given (cases without any
    attribution are left out)."""
    found = {str(o.get("case")): report.attribute(o, top) for o in outcomes}
    return {case: ranked for case, ranked in found.items() if ranked}


@dataclass
class BatchCulprit:
    """The unit most likely behind a batch: the best summed score over its members."""

    attribution: Attribution  # the strongest member attribution of that unit
    cases: int  # members attributed to the unit
    size: int  # members of the batch

    def as_dict(self) -> dict[str, Any]:
        return {**self.attribution.as_dict(), "cases": self.cases, "of": self.size}

    def one_line(self) -> str:
        return f"{self.attribution.one_line()} ({self.cases} of {self.size} cases)"


def batch_culprit(
    cases: Iterable[str], by_case: dict[str, list[Attribution]]
) -> BatchCulprit | None:
    members = list(cases)
    total: dict[str, float] = defaultdict(float)
    count: dict[str, int] = defaultdict(int)
    best: dict[str, Attribution] = {}
    for case in members:
        for a in by_case.get(case, ()):
            total[a.unit] += a.score
            count[a.unit] += 1
            if a.unit not in best or a.score > best[a.unit].score:
                best[a.unit] = a
    if not total:
        return None
    unit = min(total, key=lambda u: (-total[u], u))
    return BatchCulprit(best[unit], count[unit], len(members))


def culprit_evidence(by_case: dict[str, list[Attribution]]) -> dict[str, list[dict[str, Any]]]:
    """What each attributed outcome stores as ``evidence.culprits`` (best first)."""
    done: dict[int, dict[str, Any]] = {}  # like failures share their attributions
    out = {}
    for case, ranked in by_case.items():
        out[case] = []
        for a in ranked:
            as_dict = done.get(id(a))
            if as_dict is None:
                as_dict = done[id(a)] = a.as_dict()
            out[case].append(as_dict)
    return out
