"""Which upstream change most likely broke a failing case: stored failures joined with an
impact report.

Reads the JSON that ``instep impact --format json`` writes (never the impact engine
itself, so triage stays free of it) and a stored failure: its exception chain (files,
functions, lines), its messages and the layer triage filed it under. Each unit of the
report that the failure can be tied to gets a score from evidence, strongest first:

- a downstream place the report coupled (file and line, or the function that holds it)
  is a frame of the failure;
- the error names what the report names: the downstream function whose signature no
  longer fits (``X.f() got an unexpected keyword argument 'k'``), the parameter the
  report says is not accepted, the name an import could not find in the module the
  report says lost it;
- a changed upstream function is a frame of the failure;
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
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from instep.errors import BadInput
from instep.impact_json import load_impact_json
from instep.pyindex.model import module_of

#: Weights of the evidence, strongest first (see the module docstring).
PLACE_LINE = 6.0  # the coupled downstream line is a frame
PLACE_FUNCTION = 4.0  # the coupled downstream function is a frame
IMPORT_NAME = 6.0  # "cannot import name 'n' from 'm'" and the unit removed/renamed m.n
OWNER_NAMED = 5.0  # the error names the coupled downstream function (Class.method)
PROBLEM_NAMED = 4.0  # the error quotes the parameter the report says is not accepted
UPSTREAM_FRAME = 3.0  # a changed upstream function is a frame
KIND_FITS = 2.0
SHIM = 2.0
STAGE_FITS = 1.0

HIGH, MEDIUM = 9.0, 6.0  # confidence thresholds on the score

_UNIT_FIELDS = ("id", "title", "action", "pr", "commit", "stage")
_COUPLING_FIELDS = ("kind", "upstream", "downstream", "owner", "snippet", "action", "rule")
_COUPLING_FIELDS += ("problems",)
#: a cached index is only reused by the code that built it
_CODE_DIGEST = hashlib.blake2b(Path(__file__).read_bytes(), digest_size=8).digest()

#: Impact stages that a failure filed under a triage layer can come from.
STAGES_OF_LAYER: dict[str, frozenset[str]] = {
    "env": frozenset({"Other", "Runtime", "Inductor", "Dynamo"}),
    "eager": frozenset({"Runtime", "Other"}),
    "registration": frozenset({"Inductor", "Dynamo", "Runtime", "Other"}),
    "dynamo": frozenset({"Dynamo", "FX"}),
    "aot": frozenset({"AOTAutograd", "FX", "Decomposition"}),
    "decomposition": frozenset({"Decomposition", "AOTAutograd"}),
    "lowering": frozenset({"Inductor", "Decomposition"}),
    "scheduler": frozenset({"Inductor"}),
    "codegen": frozenset({"Inductor"}),
    "kernel_compile": frozenset({"Inductor"}),
    "runtime": frozenset({"Runtime", "Inductor"}),
    "numerics": frozenset({"Inductor", "Decomposition"}),
}

_ARGUMENTS = re.compile(
    r"unexpected keyword argument|required (?:positional|keyword-only) argument"
    r"|positional arguments? but \d+ (?:were|was) given|takes no arguments"
)
_CANNOT_IMPORT = re.compile(r"cannot import name '(\w+)' from '([\w.]+)'")
_NO_ATTRIBUTE = re.compile(r"module '([\w.]+)' has no attribute '(\w+)'")
_NO_MODULE = re.compile(r"No module named '([\w.]+)'")
_MISSING_LOWERING = re.compile(r"MissingOperator|missing lowering|No lowering", re.IGNORECASE)
_QUOTED = re.compile(r"'([A-Za-z_]\w*)'")
_CALL_KEYWORD = re.compile(r"([A-Za-z_][\w.]*)\(\) got an unexpected keyword argument '(\w+)'")
_CALLED = re.compile(r"([A-Za-z_][\w.]*)\(\)")  # "f() got an unexpected keyword argument"
#: what a patch's right-hand side calls its function through, not the function itself
_WRAPPERS = frozenset({"classmethod", "staticmethod", "property", "partial", "functools", "wraps"})
_LONGREPR_FRAME = re.compile(r"^(\S+\.py):(\d+): in (\S+)", re.MULTILINE)
_DOTTED = re.compile(r"[A-Za-z_][\w.]*")


@dataclass(frozen=True)
class Evidence:
    kind: str  # place, named, import, upstream_frame, kind_fits, stage_fits, shim
    detail: str
    weight: float

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "detail": self.detail, "weight": self.weight}


@dataclass
class Attribution:
    """One upstream unit named as a likely cause of one failure."""

    unit: str
    title: str
    action: str
    pr: int | None
    commit: str | None
    score: float
    evidence: list[Evidence] = field(default_factory=list)
    #: the coupling that tied the unit to the failure, as the report gives it
    coupling: dict[str, Any] | None = None

    @property
    def confidence(self) -> str:
        return "high" if self.score >= HIGH else "medium" if self.score >= MEDIUM else "low"

    def as_dict(self) -> dict[str, Any]:
        c = self.coupling or {}
        return {
            "unit": self.unit,
            "title": self.title,
            "action": self.action,
            "pr": self.pr,
            "commit": self.commit,
            "score": round(self.score, 2),
            "confidence": self.confidence,
            "evidence": [e.as_dict() for e in self.evidence],
            "coupling": {k: c.get(k) for k in ("kind", "upstream", "downstream", "owner")}
            if c
            else None,
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
    coupling: dict[str, Any]


@dataclass(frozen=True)
class _Changed:
    unit: int
    path: str
    module: str
    name: str  # last part of the qualname
    qualname: str
    change: str


class ImpactReport:
    """An ``instep impact`` JSON report, indexed for joining with failures."""

    def __init__(self, doc: dict[str, Any], source: str = "<report>") -> None:
        units = doc.get("units")
        if not isinstance(units, list):
            raise BadInput(f"{source}: not an instep impact JSON report (no 'units' list)")
        self.source = source
        #: what attribution reads of each unit (the rest of the report stays on disk)
        self.units: list[dict[str, Any]] = [
            {
                **{k: u.get(k) for k in _UNIT_FIELDS},
                "change_kinds": sorted({str(c.get("change")) for c in u.get("changes") or []}),
            }
            for u in units
        ]
        #: by file name, then path: a frame's file is compared once per downstream path
        self._places: dict[str, dict[str, list[_Place]]] = defaultdict(lambda: defaultdict(list))
        #: by (file name, function name): a frame finds its candidates in one lookup
        self._changed: dict[tuple[str, str], list[_Changed]] = defaultdict(list)
        self._changed_in: dict[tuple[str, str], list[_Changed]] = defaultdict(list)
        self._owners: dict[str, list[tuple[int, dict[str, Any]]]] = defaultdict(list)
        self._called: dict[str, list[tuple[int, dict[str, Any]]]] = defaultdict(list)
        self._problems: dict[str, list[tuple[int, dict[str, Any]]]] = defaultdict(list)
        for i, unit in enumerate(units):
            self._index_unit(i, unit)
        self._places = {name: dict(paths) for name, paths in self._places.items()}  # picklable

    @classmethod
    def load(cls, path: str | Path, cache_dir: Path | None = None) -> ImpactReport:
        """The report at ``path``, indexed; with ``cache_dir``, the index is kept there by
        the report's digest, so a report read again is not parsed again (14 MB of JSON for
        a release take 0.2 s)."""
        if cache_dir is None:
            return cls(load_impact_json(path), str(path))
        try:
            digest = hashlib.blake2b(Path(path).read_bytes(), digest_size=16)
        except OSError:
            return cls(load_impact_json(path), str(path))  # the loader's one-line error
        digest.update(_CODE_DIGEST)
        cached = cache_dir / f"{digest.hexdigest()}.pickle"
        try:
            with cached.open("rb") as fh:
                report = pickle.load(fh)
            if isinstance(report, cls):
                report.source = str(path)
                return report
        except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ValueError):
            pass  # absent or stale: build it again
        report = cls(load_impact_json(path), str(path))
        try:
            cache_dir.mkdir(parents=True, exist_ok=True)
            tmp = cached.with_suffix(f".{os.getpid()}.tmp")
            with tmp.open("wb") as fh:
                pickle.dump(report, fh, protocol=pickle.HIGHEST_PROTOCOL)
            tmp.replace(cached)
        except OSError:
            pass  # a read-only cache only costs the next call its parse
        return report

    def _index_unit(self, i: int, unit: dict[str, Any]) -> None:
        for change in unit.get("changes") or []:
            path, _, qualname = str(change.get("symbol", "")).partition("::")
            if not qualname:
                continue
            places = [(path, qualname)]
            if change.get("renamed_from"):  # also where it was: old imports fail there
                old_path, _, old_name = str(change["renamed_from"]).rpartition("::")
                places.append((old_path or path, old_name or qualname))
            kind = str(change.get("change"))
            for where, qn in places:
                c = _Changed(i, where, module_of(where), qn.rsplit(".", 1)[-1], qn, kind)
                self._changed[(_file_name(where), c.name)].append(c)
                self._changed_in[(c.module, c.name)].append(c)
        for full in unit.get("couplings") or []:
            coupling = {k: full.get(k) for k in _COUPLING_FIELDS}
            path, line = _split_place(str(coupling.get("downstream", "")))
            owner = coupling.get("owner") or None
            function = owner.rsplit(".", 1)[-1] if owner else None
            self._places[_file_name(path)][path].append(_Place(i, path, line, function, coupling))
            if owner and "." in owner:  # Class.method: the form Python's messages use
                self._owners[owner].append((i, coupling))
            if owner:  # what a TypeError calls it: "Class.method()" or "function()"
                self._called[owner].append((i, coupling))
            if coupling.get("kind") == "monkeypatch":  # the functions patched in
                for name in _patched_in(str(coupling.get("snippet") or "")):
                    self._called[name].append((i, coupling))
            for problem in coupling.get("problems") or []:
                for name in _QUOTED.findall(str(problem)):
                    self._problems[name].append((i, coupling))

    def attribute(self, outcome: dict[str, Any], top: int = 3) -> list[Attribution]:
        """The units most likely to have caused ``outcome`` (a stored failure), best first."""
        found: dict[int, _Found] = {}

        def add(unit: int, evidence: Evidence, coupling: dict[str, Any] | None) -> None:
            found.setdefault(unit, _Found()).add(evidence, coupling)

        seen: set[tuple[Any, Any, Any]] = set()
        for frame in _frames(outcome):
            key = (frame.get("file"), frame.get("function"), frame.get("line"))
            if key not in seen:  # recursion and re-raised chains repeat frames
                seen.add(key)
                self._tie_frame(frame, add)
        text = _messages(outcome)
        self._tie_text(text, add)
        if not found:
            return []
        arguments = bool(_ARGUMENTS.search(text))
        missing_name = bool(
            _CANNOT_IMPORT.search(text) or _NO_ATTRIBUTE.search(text) or _NO_MODULE.search(text)
        )
        lowering = bool(_MISSING_LOWERING.search(text))
        stages = STAGES_OF_LAYER.get(str(outcome.get("layer") or ""), frozenset())
        out = []
        for i, f in found.items():
            unit = self.units[i]
            kinds = set(unit["change_kinds"])
            if arguments and "signature" in kinds:
                f.add(
                    Evidence(
                        "kind_fits", "a signature changed; the error is about arguments", KIND_FITS
                    ),
                    None,
                )
            elif missing_name and kinds & {"removed", "renamed"}:
                f.add(
                    Evidence(
                        "kind_fits",
                        "a name was removed or renamed; the error is a missing name",
                        KIND_FITS,
                    ),
                    None,
                )
            elif lowering and kinds & {"decorator", "value", "signature"}:
                f.add(
                    Evidence(
                        "kind_fits",
                        "a registration changed; the error is a missing lowering",
                        KIND_FITS,
                    ),
                    None,
                )
            if unit.get("stage") in stages:
                f.add(
                    Evidence(
                        "stage_fits",
                        f"stage {unit.get('stage')} fits layer {outcome.get('layer')}",
                        STAGE_FITS,
                    ),
                    None,
                )
            if f.coupling is not None and f.coupling.get("action") == "Shim":
                f.add(
                    Evidence(
                        "shim",
                        f"the report rated this coupling Shim ({f.coupling.get('rule')})",
                        SHIM,
                    ),
                    None,
                )
            out.append(
                Attribution(
                    unit=str(unit.get("id")),
                    title=str(unit.get("title") or unit.get("id")),
                    action=str(unit.get("action")),
                    pr=unit.get("pr"),
                    commit=unit.get("commit"),
                    score=f.score,
                    evidence=sorted(f.evidence, key=lambda e: -e.weight),
                    coupling=f.coupling,
                )
            )
        out.sort(key=lambda a: (-a.score, a.unit))
        return out[:top]

    def _tie_frame(self, frame: dict[str, Any], add: Any) -> None:
        file = str(frame.get("file") or "").replace("\\", "/")
        name = file.rsplit("/", 1)[-1]
        function, line = frame.get("function"), frame.get("line")
        by_path = self._places.get(name) or {}
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
        for changed in self._changed.get((name, str(function)), ()):
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

    def _tie_text(self, text: str, add: Any) -> None:
        for name, module in _CANNOT_IMPORT.findall(text):
            self._tie_missing(module, name, f"cannot import {name} from {module}", add)
        for module, name in _NO_ATTRIBUTE.findall(text):
            self._tie_missing(module, name, f"{module} has no attribute {name}", add)
        for module in _NO_MODULE.findall(text):
            parent, _, last = module.rpartition(".")
            self._tie_missing(parent, last, f"no module {module}", add)
        for token in set(_DOTTED.findall(text)):
            for unit, coupling in self._owners.get(token.rstrip("."), ()):
                add(
                    unit,
                    Evidence(
                        "named",
                        f"the error names {token} ({coupling.get('downstream')})",
                        OWNER_NAMED,
                    ),
                    coupling,
                )
        for called in set(_CALLED.findall(text)):
            for unit, coupling in self._called.get(called, ()):
                detail = f"the error calls {called}() ({coupling.get('downstream')})"
                add(unit, Evidence("named", detail, OWNER_NAMED), coupling)
        bound = _CALL_KEYWORD.findall(text)  # "f() got an unexpected keyword argument 'k'"
        for called, keyword in bound:
            for unit, coupling in self._called.get(called, ()):
                if any(f"'{keyword}'" in str(p) for p in coupling.get("problems") or []):
                    detail = f"{called}() rejects '{keyword}', as the report says"
                    add(unit, Evidence("problem", detail, PROBLEM_NAMED), coupling)
        # a quoted name the error binds to another function is not this coupling's problem
        for name in set(_QUOTED.findall(text)) - {keyword for _, keyword in bound}:
            for unit, coupling in self._problems.get(name, ()):
                add(
                    unit,
                    Evidence(
                        "problem",
                        f"the error quotes '{name}', which the report says"
                        f" {coupling.get('owner') or coupling.get('downstream')} does not accept",
                        PROBLEM_NAMED,
                    ),
                    coupling,
                )

    def _tie_missing(self, module: str, name: str, what: str, add: Any) -> None:
        for changed in self._changed_in.get((module, name), ()):
            if changed.change in ("removed", "renamed"):
                add(
                    changed.unit,
                    Evidence(
                        "import",
                        f"{what}: {changed.path}::{changed.qualname} {changed.change}",
                        IMPORT_NAME,
                    ),
                    None,
                )


class _Found:
    """Evidence gathered for one unit; each kind counts once, at its strongest."""

    def __init__(self) -> None:
        self.by_kind: dict[str, Evidence] = {}
        self.coupling: dict[str, Any] | None = None
        self._coupling_weight = -1.0

    def add(self, evidence: Evidence, coupling: dict[str, Any] | None) -> None:
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


def _messages(outcome: dict[str, Any]) -> str:
    parts: list[str] = [str(outcome.get("message") or "")]
    for exc in outcome.get("exception_chain") or []:
        parts.append(f"{exc.get('type')}: {exc.get('message') or ''}")
    return "\n".join(parts)


def attribute_all(
    report: ImpactReport, outcomes: Iterable[dict[str, Any]], top: int = 3
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


def store_culprits(store: Any, run_id: int, by_case: dict[str, list[Attribution]]) -> int:
    """Each attributed final outcome's ``evidence.culprits`` (best first); others cleared."""
    values = {case: [a.as_dict() for a in ranked] for case, ranked in by_case.items()}
    return store.set_evidence(run_id, "culprits", values)
