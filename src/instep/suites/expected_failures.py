"""Expected-failure lists for any tier: data files, reconciliation with a run, and the
disabled-test formats teams already wire into CI.

A list is a TOML file of ``[[case]]`` tables (``case``, ``reason``, ``layer``, ``issue``,
optional ``category``/``npu_type``); ``case`` is a node id, a ``Class::test`` suffix of
one, or a pattern with ``*``/``?`` wildcards (brackets are literal: node ids have them).
:func:`reconcile` compares a run's final outcomes with the lists: a listed case that still
fails is *expected*, one that passes is *fixed -- remove it*, a failure not listed is
*unexpected*. Import and export cover PyTorch's
disabled-tests JSON (``"test_x (__main__.Class)": [issue_url, [platforms]]``, read by
``run_test.py`` through ``DISABLED_TESTS_FILE``) and torch_npu's typed
``disabled_tests_type.json`` (``{"test_x (__main__.Class)": {"DTYPE": "reason"}}``).
:func:`propose` gives, for each listed entry a run executed, a layer, category and reason
from the stored outcome. This module reads and writes lists; it runs nothing.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from instep.errors import BadInput, MissingInput
from instep.outcome import PASSING, OutcomeRecord, Status, records
from instep.tomlfile import load_toml

#: torch_npu's reason classes in ``disabled_tests_type.json``.
NPU_TYPES = ("DTYPE", "VALUE", "MEMORY", "NOT_SUPPORT", "HCCL", "ERROR_MSG_UNMATCH", "OTHER")
_UNITTEST_NAME = re.compile(r"^(?P<test>[^\s(]+)\s+\((?P<module>[^)]*?)\.?(?P<cls>[^.)]+)\)$")


@dataclass
class ExpectedFailure:
    case: str
    reason: str = ""
    layer: str | None = None
    issue: str | None = None
    category: str | None = None
    npu_type: str | None = None
    platforms: list[str] = field(default_factory=list)
    source: str = ""

    def matches(self, nodeid: str) -> bool:
        pattern = self.case
        if nodeid == pattern or nodeid.endswith("::" + pattern):
            return True
        if "*" in pattern or "?" in pattern:
            return _wildcard(pattern).fullmatch(nodeid) is not None
        return False

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v not in (None, "", []) and k != "source"}


@functools.lru_cache(maxsize=1024)
def _wildcard(pattern: str) -> re.Pattern[str]:
    """``*`` and ``?`` as wildcards; ``[``/``]`` literal (they appear in node ids)."""
    body = re.escape(pattern).replace(r"\*", ".*").replace(r"\?", ".")
    return re.compile(rf"(?:.*::)?{body}")


# -- reading and writing instep's own lists ------------------------------------------------


def load_list(path: Path) -> list[ExpectedFailure]:
    """A list from a TOML file, or an imported PyTorch / torch_npu JSON file."""
    if not path.is_file():
        raise MissingInput(f"{path}: no such expected-failure list")
    if path.suffix == ".json":
        data = _read_json(path)
        if _looks_typed(data):
            return import_npu_typed(data, source=str(path))
        return import_pytorch_disabled(data, source=str(path))
    raw = load_toml(path)
    cases = raw.get("case", [])
    if not isinstance(cases, list):
        raise BadInput(f"{path}: expected [[case]] tables")
    entries = []
    for i, table in enumerate(cases):
        if not isinstance(table, dict) or not isinstance(table.get("case"), str):
            raise BadInput(f"{path}: [[case]] #{i + 1} needs a 'case' string (a node id)")
        known = {k: table.get(k) for k in ("reason", "layer", "issue", "category", "npu_type")}
        entries.append(
            ExpectedFailure(
                case=table["case"],
                platforms=list(table.get("platforms") or []),
                source=str(path),
                **{k: (str(v) if v is not None else None) for k, v in known.items()},
            )
        )
        if entries[-1].reason is None:
            entries[-1].reason = ""
    return entries


def load_lists(paths: Iterable[Path]) -> list[ExpectedFailure]:
    entries: list[ExpectedFailure] = []
    for path in paths:
        entries += load_list(path)
    return entries


def dump_toml(entries: Iterable[ExpectedFailure], header: str = "") -> str:
    """instep's TOML list format for ``entries``."""
    lines = [f"# {line}" for line in header.splitlines()] if header else []
    for entry in entries:
        lines.append("")
        lines.append("[[case]]")
        for key, value in entry.as_dict().items():
            lines.append(f"{key} = {json.dumps(value, ensure_ascii=False)}")
    return "\n".join(lines).lstrip("\n") + "\n"


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BadInput(f"{path}: not valid JSON ({exc})") from exc


def _looks_typed(data: Any) -> bool:
    return isinstance(data, dict) and bool(data) and all(isinstance(v, dict) for v in data.values())


# -- node ids and unittest names -----------------------------------------------------------


def unittest_name(nodeid: str) -> str:
    """``test/x.py::Class::test_y`` -> ``test_y (__main__.Class)`` (PyTorch's key format)."""
    parts = nodeid.split("::")
    test = parts[-1]
    cls = parts[-2] if len(parts) >= 3 else Path(parts[0]).stem
    return f"{test} (__main__.{cls})"


def case_pattern(name: str) -> str:
    """``test_y (__main__.Class)`` -> ``Class::test_y`` (matched as a node id suffix)."""
    match = _UNITTEST_NAME.match(name.strip())
    if match:
        return f"{match['cls']}::{match['test']}"
    if "." in name and " " not in name:  # Class.test_y
        cls, _, test = name.rpartition(".")
        return f"{cls.rpartition('.')[2]}::{test}"
    return name.strip()


# -- PyTorch disabled-tests JSON -----------------------------------------------------------


def import_pytorch_disabled(data: Any, source: str = "") -> list[ExpectedFailure]:
    if not isinstance(data, dict):
        raise BadInput(f"{source or 'disabled tests'}: expected a JSON object of test names")
    entries = []
    for name, value in data.items():
        issue, platforms = None, []
        if isinstance(value, list) and value:
            issue = str(value[0]) if value[0] else None
            if len(value) > 1 and isinstance(value[1], list):
                platforms = [str(p) for p in value[1]]
        entries.append(
            ExpectedFailure(
                case=case_pattern(name),
                reason=f"disabled upstream ({issue})" if issue else "disabled upstream",
                issue=issue,
                platforms=platforms,
                source=source,
            )
        )
    return entries


def export_pytorch_disabled(
    entries: Iterable[ExpectedFailure], platforms: list[str] | None = None
) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for entry in entries:
        out[unittest_name(entry.case)] = [entry.issue or "", list(platforms or entry.platforms)]
    return out


# -- torch_npu typed disabled tests --------------------------------------------------------


def import_npu_typed(data: Any, source: str = "") -> list[ExpectedFailure]:
    if not isinstance(data, dict):
        raise BadInput(f"{source or 'disabled_tests_type.json'}: expected a JSON object")
    entries = []
    for name, typed in data.items():
        if not isinstance(typed, dict):
            raise BadInput(f"{source}: {name!r}: expected {{TYPE: reason}}")
        npu_type, reason = next(iter(typed.items()), ("OTHER", ""))
        if npu_type not in NPU_TYPES:
            raise BadInput(f"{source}: {name!r}: type {npu_type!r} not one of {NPU_TYPES}")
        entries.append(
            ExpectedFailure(
                case=case_pattern(name), reason=str(reason), npu_type=npu_type, source=source
            )
        )
    return entries


def npu_type_for(layer: str | None, category: str | None, message: str | None) -> str:
    """torch_npu's reason class for a failure of ``layer``/``category`` with ``message``."""
    text = f"{category or ''} {message or ''}".lower()
    if "hccl" in text:
        return "HCCL"
    if "out of memory" in text or "oom" in text.split() or "memory" in (category or ""):
        return "MEMORY"
    if "dtype" in text or "data type" in text:
        return "DTYPE"
    if "does not match" in text and ("regex" in text or "pattern" in text):
        return "ERROR_MSG_UNMATCH"
    if layer == "numerics" or "not close" in text or "mismatch" in text:
        return "VALUE"
    if "not support" in text or "not implemented" in text or "notimplemented" in text:
        return "NOT_SUPPORT"
    return "OTHER"


def export_npu_typed(entries: Iterable[ExpectedFailure]) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for entry in entries:
        kind = entry.npu_type or npu_type_for(entry.layer, entry.category, entry.reason)
        out[unittest_name(entry.case)] = {kind: entry.reason or entry.issue or ""}
    return out


# -- a run against the lists ---------------------------------------------------------------


@dataclass
class Reconciliation:
    expected: list[tuple[str, ExpectedFailure]] = field(default_factory=list)
    fixed: list[tuple[str, ExpectedFailure]] = field(default_factory=list)
    unexpected: list[dict[str, Any]] = field(default_factory=list)
    not_run: list[ExpectedFailure] = field(default_factory=list)
    #: listed cases that still fail, but under another category than the list says
    changed: list[dict[str, Any]] = field(default_factory=list)
    #: cases whose own expected-failure mark (``unittest.expectedFailure``, ``xfail``,
    #: PyTorch's ``expectedFailure``) no longer holds: they passed
    stale_marks: list[dict[str, Any]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """No failure outside the lists (fixed entries are news, not failures)."""
        return not self.unexpected

    def as_dict(self) -> dict[str, Any]:
        return {
            "expected": [{"case": c, **e.as_dict()} for c, e in self.expected],
            "fixed": [
                {"case": c, "note": "fixed - remove it", **e.as_dict()} for c, e in self.fixed
            ],
            "unexpected": self.unexpected,
            "not_run": [e.as_dict() for e in self.not_run],
            "changed": self.changed,
            "stale_marks": self.stale_marks,
        }


def _first_line(text: str | None) -> str:
    lines = (text or "").strip().splitlines()
    return lines[0] if lines else ""


def _first_match(nodeid: str, entries: list[ExpectedFailure]) -> ExpectedFailure | None:
    return next((e for e in entries if e.matches(nodeid)), None)


def reconcile(
    outcomes: Iterable[OutcomeRecord | dict[str, Any]], entries: list[ExpectedFailure]
) -> Reconciliation:
    """Sort a run's final outcomes (records or store rows) against expected-failure ``entries``."""
    result = Reconciliation()
    used: set[int] = set()
    for o in records(outcomes):
        if not o.final:
            continue
        entry = _first_match(o.case, entries)
        if entry is not None:
            used.add(id(entry))
            if o.failing or o.status is Status.XFAILED:
                result.expected.append((o.case, entry))
                if entry.category and o.category and o.category != entry.category:
                    result.changed.append(
                        {
                            "case": o.case,
                            "listed": entry.category,
                            "now": o.category,
                            "message": _first_line(o.message),
                        }
                    )
            elif o.status in PASSING:
                result.fixed.append((o.case, entry))
        elif o.status is Status.XPASSED:
            result.stale_marks.append(
                {
                    "case": o.case,
                    "mark": o.skip_reason or "xfail",
                    "note": "passed despite its expected-failure mark - remove the mark",
                }
            )
        elif o.failing:
            result.unexpected.append(
                {
                    "case": o.case,
                    "status": o.status.value,
                    "layer": o.layer,
                    "message": (o.message or "").strip().splitlines()[:1],
                }
            )
    result.not_run = [e for e in entries if id(e) not in used]
    return result


@dataclass
class Proposal:
    case: str
    status: str
    layer: str | None
    category: str | None
    reason: str
    npu_type: str
    listed: ExpectedFailure

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["listed"] = self.listed.as_dict()
        return data


def propose(
    outcomes: Iterable[OutcomeRecord | dict[str, Any]], entries: list[ExpectedFailure]
) -> list[Proposal]:
    """For each listed entry the run executed: layer, category, reason from its outcome."""
    proposals = []
    for o in records(outcomes):
        if not o.final:
            continue
        entry = _first_match(o.case, entries)
        if entry is None:
            continue
        message = (o.message or o.skip_reason or "").strip().splitlines()
        if o.status in PASSING:
            reason = "passes now: remove it from the list"
        else:
            reason = message[0][:200] if message else o.status.value
        layer = o.layer or o.evidence.get("stack_layer")
        proposals.append(
            Proposal(
                case=o.case,
                status=o.status.value,
                layer=layer,
                category=o.category,
                reason=reason,
                npu_type=npu_type_for(layer, o.category, reason),
                listed=entry,
            )
        )
    return proposals


def builtin_lists(profile: str, suite: str) -> list[Path]:
    """The lists shipped with instep for ``suite``: any profile's, then ``profile``'s."""
    directory = Path(__file__).resolve().parent / "data" / "expected_failures"
    names = (f"{suite}.toml", f"{suite}-{profile}.toml")
    return [directory / name for name in names if (directory / name).is_file()]
