"""What a person reads first about one failing case, from its stored outcome.

Pure functions over an outcome dict (``Store.outcome_rows``) and the run's dict: the
first line of the error that says something (:func:`headline`, skipping wrapper lines
such as ``backend='inductor' raised:``), the user's own ``file:line``
(:func:`user_frame`), a command that reproduces the case with the run's directory and
environment (:func:`reproduce_command`), the triad's legs with the reason a leg did not
run (:func:`triad_legs`), the stored evidence as named fields (:func:`evidence_fields`)
and the likely upstream culprits that ``instep triage --impact`` stored
(:func:`culprits_of`). Nothing here reads the store, classifies or renders HTML.
"""

from __future__ import annotations

import re
import shlex
import sys
import sysconfig
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from instep.errors import InstepError
from instep.impact_contract import Action
from instep.outcome import FAILING, MANIFESTATIONS
from instep.profiles import load_profile
from instep.suites.case_record import LEGS, read_case_figures
from instep.triage.culprits import Attribution, CouplingRef, Evidence
from instep.triage.culprits import batch_culprit as rank_batch

LEG_LABELS = {
    "eager_cpu": "eager CPU",
    "eager_device": "eager device",
    "compiled_device": "compiled device",
}
#: Lines that wrap an error without saying what went wrong (torch's and pytest's).
_WRAPPERS = re.compile(
    r"^(backend=['\"][^'\"]*['\"] raised:?"
    r"|Traceback \(most recent call last\):?"
    r"|While executing .*"
    r"|Original traceback:?"
    r"|from user code:?"
    r"|Set TORCH_LOGS=.*"
    r"|You can suppress this exception.*"
    r"|(The above exception was|During handling of the above exception).*"
    r"|[-=_ ]*)$"
)
#: Top-level modules whose frames are never the user's: instep, its test runner, torch.
_NOT_USER = frozenset({"instep", "torch", "pytest", "_pytest", "pluggy", "functorch", "triton"})
_STDLIB = frozenset(sys.stdlib_module_names) | {"__main__"}
_STDLIB_DIRS = tuple(
    {str(Path(sysconfig.get_paths()[k]).resolve()) for k in ("stdlib", "platstdlib")}
    | {str(Path(sysconfig.get_paths(vars={"base": sys.base_prefix})["stdlib"]).resolve())}
)
_MAX_LINE = 240


def _cut(line: str, limit: int = _MAX_LINE) -> str:
    return line if len(line) <= limit else line[: limit - 1] + "…"


def meaningful_lines(text: str | None) -> Iterator[str]:
    """The non-empty lines of ``text`` that are not wrappers around the real error."""
    for line in (text or "").splitlines():
        line = line.strip()
        if line and not _WRAPPERS.match(line):
            yield line


def headline(outcome: dict[str, Any]) -> str:
    """The first line of the case's error that says what went wrong (cut at 240 chars).

    The stored message first; when it is only wrapper lines, the chain's messages from the
    root cause outwards, as ``Type: message``; a skip's reason for a skipped case.
    """
    for line in meaningful_lines(outcome.get("message")):
        return _cut(line)
    for exc in reversed(outcome.get("exception_chain") or []):
        for line in meaningful_lines(exc.get("message")):
            name = str(exc.get("type") or "").rpartition(".")[2]
            return _cut(line if not name or line.startswith(name) else f"{name}: {line}")
    for line in meaningful_lines(outcome.get("skip_reason")):
        return _cut(line)
    return _cut(str(outcome.get("exception_type") or ""))


def is_user_frame(frame: dict[str, Any]) -> bool:
    """Whether a stored frame is the user's code: not instep, pytest, torch or the stdlib."""
    module = str(frame.get("module") or "")
    file = str(frame.get("file") or "")
    if not file or file.startswith("<"):
        return False
    if module:
        return module.partition(".")[0] not in _NOT_USER | _STDLIB
    parts = Path(file).parts
    if any(p in ("site-packages", "dist-packages") or p in _NOT_USER for p in parts):
        return False
    return not any(file.startswith(d + "/") for d in _STDLIB_DIRS)


def _frames(outcome: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every stored frame, the root cause's first, innermost first within an exception."""
    for exc in reversed(outcome.get("exception_chain") or []):
        yield from reversed([f for f in exc.get("frames") or [] if "file" in f])


def user_frame(outcome: dict[str, Any], root: str | None = None) -> str | None:
    """``file:line`` of the innermost user frame nearest the root cause, or ``None``;
    relative to ``root`` (the run's directory) when the file is under it."""
    for frame in _frames(outcome):
        if is_user_frame(frame):
            file = Path(str(frame["file"]))
            if root and file.is_relative_to(root):
                file = file.relative_to(root)
            return f"{file.as_posix()}:{frame.get('line')}"
    return None


def frames_user_first(frames: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """``frames`` with the user's own first (innermost first), then the rest in order."""
    kept = [f for f in frames if "file" in f]
    mine = [dict(f, user=True) for f in reversed(kept) if is_user_frame(f)]
    return mine + [dict(f, user=False) for f in kept if not is_user_frame(f)]


def run_environment(run: dict[str, Any]) -> dict[str, str]:
    """The environment the run's profile sets for every test process (empty if unknown)."""
    # an unknown user profile gives none
    try:
        return dict(load_profile(str(run.get("profile") or "cpu")).env)
    except (InstepError, ValueError, OSError):
        return {}


def is_pytest_node(case: str) -> bool:
    return ".py::" in case or case.endswith(".py")


def run_directory(run: dict[str, Any]) -> str | None:
    """The directory the run's node ids are relative to (pytest's rootdir, else its cwd)."""
    settings = run.get("settings") or {}
    where = settings.get("rootdir") or settings.get("cwd")
    return str(where) if where else None


def reproduce_command(
    case: str, run: dict[str, Any], env: dict[str, str] | None = None, *, in_dir: bool = True
) -> str:
    """A shell command that runs ``case`` again as the run did: its directory (left out
    with ``in_dir=False``, for a page that names it once), its profile's environment,
    ``python -m pytest NODE``; a generated case (not a pytest node) gets ``instep bundle
    CASE --run RUN``, which re-runs it with its evidence."""
    where = run_directory(run) if in_dir else None
    head = f"cd {shlex.quote(where)} && " if where else ""
    if not is_pytest_node(case):
        return f"{head}instep bundle {shlex.quote(case)} --run {shlex.quote(str(run['name']))}"
    variables = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted((env or {}).items()))
    return f"{head}{variables + ' ' if variables else ''}python -m pytest {shlex.quote(case)}"


def bundle_command(batch: str, run: dict[str, Any]) -> str:
    return f"instep bundle {batch} --run {shlex.quote(str(run['name']))}"


def triad_legs(outcome: dict[str, Any]) -> list[dict[str, str | None]]:
    """Each leg as ``{leg, label, state, why}``; ``state`` is None when the leg did not run
    and ``why`` then says why, from what the outcome holds (legs run in order: a leg that
    failed stops the next ones; a crash or time-out stops the case)."""
    found = read_case_figures(outcome.get("metrics"))["triad"]
    stored = (outcome.get("evidence") or {}).get("triad") or {}
    states = {leg: found.get(leg) or stored.get(leg) for leg in LEGS}
    status = str(outcome.get("status") or "")
    legs: list[dict[str, str | None]] = []
    stopped: str | None = None
    for leg in LEGS:
        state = states[leg]
        why = None
        if state is None:
            if not any(states.values()):
                why = (
                    "this test does not run the triad (only instep's built-in suites "
                    "record the three legs)"
                    if status not in MANIFESTATIONS and outcome.get("layer") != "env"
                    else f"the case ended ({status}, layer {outcome.get('layer') or 'untriaged'})"
                    " before any leg was recorded"
                )
            elif stopped is not None:
                why = stopped
            elif status in MANIFESTATIONS:
                why = f"the case {status} before this leg ended"
            elif status in FAILING:
                why = f"the case failed before this leg: {headline(outcome) or status}"
            else:
                why = "not recorded"
        elif state in ("fail", "mismatch") and stopped is None:
            verb = "failed" if state == "fail" else "differed from eager CPU"
            stopped = f"{LEG_LABELS[leg]} {verb} first"
        legs.append({"leg": leg, "label": LEG_LABELS[leg], "state": state, "why": why})
    return legs


#: Stored fields a reader is not shown: a profile rule's ``reference`` cites the section
#: of instep's design documents the rule implements, which is for instep's maintainers.
HIDDEN_FIELDS = frozenset({"triage.rule.reference"})


def evidence_fields(value: Any, skip: Iterable[str] = ()) -> list[dict[str, Any]]:
    """A nested evidence dict as ``{name, value, block}`` rows: dotted names, scalars as
    text, lists of scalars joined, multi-line text flagged as a block (shown in <pre>).
    ``skip`` names top-level keys shown elsewhere; :data:`HIDDEN_FIELDS` are left out."""
    rows: list[dict[str, Any]] = []
    skipped = set(skip)

    def visit(name: str, item: Any) -> None:
        if name in HIDDEN_FIELDS:
            return
        if isinstance(item, dict):
            for key, inner in item.items():
                if not name and key in skipped:
                    continue
                visit(f"{name}.{key}" if name else str(key), inner)
        elif isinstance(item, (list, tuple)) and all(
            not isinstance(i, (dict, list, tuple)) for i in item
        ):
            text = ", ".join(map(str, item)) or "(none)"
            rows.append({"name": name, "value": text, "block": False})
        elif isinstance(item, (list, tuple)):
            for i, inner in enumerate(item):
                visit(f"{name}[{i}]", inner)
        elif item is not None:
            text = f"{item:g}" if isinstance(item, float) else str(item)
            rows.append({"name": name, "value": text, "block": "\n" in text})

    visit("", value)
    return rows


def culprits_of(outcome: dict[str, Any]) -> list[dict[str, Any]]:
    """The attributions ``instep triage --impact`` stored (``evidence.culprits``), best first."""
    return [c for c in (outcome.get("evidence") or {}).get("culprits") or [] if c.get("unit")]


def _attribution(stored: dict[str, Any]) -> Attribution:
    return Attribution(
        unit=str(stored["unit"]),
        title=str(stored.get("title") or ""),
        action=Action(stored["action"]),  # triage stores a value of the vocabulary
        pr=stored.get("pr"),
        commit=stored.get("commit"),
        score=float(stored.get("score") or 0),
        evidence=[Evidence(**e) for e in stored.get("evidence") or []],
        coupling=CouplingRef(**stored["coupling"]) if stored.get("coupling") else None,
    )


def culprit_name(stored: dict[str, Any]) -> str:
    """``#PR title (unit)`` when the unit has a PR number, else the unit id."""
    return _attribution(stored).name


def batch_culprit(cases: Iterable[str], outcomes: dict[str, dict[str, Any]]) -> dict | None:
    """The batch's likely culprit from its members' stored culprits (triage's own rule,
    :func:`instep.triage.culprits.batch_culprit`), as a dict with ``name``, ``cases``, ``of``."""
    members = list(cases)
    by_case = {c: [_attribution(a) for a in culprits_of(outcomes.get(c) or {})] for c in members}
    found = rank_batch(members, by_case)
    return None if found is None else {**found.as_dict(), "name": found.attribution.name}


def selected_by(case: str, run: dict[str, Any]) -> list[str]:
    """The impact units that selected the case's test file (``instep run --impact``)."""
    units_of = ((run.get("settings") or {}).get("impact") or {}).get("units_of") or {}
    path = case.partition("::")[0]
    for file, units in units_of.items():
        if file == path or Path(file).as_posix().endswith("/" + path) or path.endswith(file):
            return [str(u) for u in units]
    return []
