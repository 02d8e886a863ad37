"""Which compile stage an upstream change takes effect in, from data (``data/stages.toml``).

A table of path prefixes -> :class:`~instep.impact.model.Stage`; the longest matching
prefix wins and an unmatched path is ``Other``. A configuration may add or override
prefixes (``extra``). A def registered for an operator takes effect where its registry
is consulted, whatever its file (:func:`registry_stage`: a decomposition in
Decomposition, a meta or fake impl in AOTAutograd, a lowering in Inductor). The table and
its calibration against seed 001 are documented in the data file. This module maps paths
and registrars; it does not read code.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache
from importlib import resources

from instep.errors import BadInput
from instep.impact.model import Stage
from instep.pyindex.registrations import role_of
from instep.tomlfile import parse_toml

_DATA = "instep/impact/data/stages.toml"


def _normalise(path: str) -> str:
    path = path.replace("\\", "/")
    while path.startswith("./"):
        path = path[2:]
    return path.lstrip("/")


def _stage(value: object, source: str, prefix: str) -> Stage:
    try:
        return Stage(value)
    except ValueError:
        names = ", ".join(s.value for s in Stage)
        raise BadInput(
            f"{source}: prefix {prefix!r} maps to unknown stage {value!r} (expected one of {names})"
        ) from None


@lru_cache(maxsize=1)
def _shipped() -> dict:
    text = (resources.files("instep.impact") / "data" / "stages.toml").read_text("utf-8")
    return parse_toml(text, _DATA)


def default_table() -> dict[str, Stage]:
    """The shipped prefix table."""
    raw = _shipped().get("prefixes", {})
    return {_normalise(p): _stage(v, _DATA, p) for p, v in raw.items()}


# the compile pipeline's order, earliest first: a def registered in several roles takes
# effect first in the earliest of their stages
PIPELINE = (
    Stage.DYNAMO,
    Stage.AOT,
    Stage.DECOMPOSITION,
    Stage.FX,
    Stage.INDUCTOR,
    Stage.RUNTIME,
    Stage.DISTRIBUTED,
    Stage.OTHER,
)


@lru_cache(maxsize=1)
def role_stages() -> dict[str, Stage]:
    """Registrar role -> the stage that consults the registry (``[roles]``)."""
    raw = _shipped().get("roles", {})
    return {role: _stage(v, _DATA, role) for role, v in raw.items()}


def registry_stage(registrars: Iterable[str]) -> Stage | None:
    """The stage a def registered through ``registrars`` (``register_decomposition``,
    ``register_op_impl``, ``table:lowerings``) takes effect in: the earliest of their
    roles' stages; None when no registrar has a role with a stage."""
    table = role_stages()
    found = {table[r] for r in map(role_of, registrars) if r in table}
    return min(found, key=PIPELINE.index) if found else None


def calibration_rows() -> frozenset[int]:
    """The seed 001 rows the shipped table was calibrated on (not evidence of its worth)."""
    return frozenset(int(r) for r in _shipped().get("calibration_rows", []))


def stage_table(extra: dict[str, str] | None = None) -> dict[str, Stage]:
    """The shipped table with ``extra`` prefixes (from configuration) added on top."""
    table = dict(default_table())
    for prefix, value in (extra or {}).items():
        table[_normalise(prefix)] = _stage(value, "stage configuration", prefix)
    return table


def stage_for(path: str, extra: dict[str, str] | None = None) -> Stage:
    """Stage of an upstream path such as 'torch/_inductor/lowering.py' (longest prefix)."""
    return _lookup(_normalise(path), stage_table(extra) if extra else default_table())


def _lookup(path: str, table: dict[str, Stage]) -> Stage:
    best, stage = -1, Stage.OTHER
    for prefix, value in table.items():
        if len(prefix) > best and path.startswith(prefix):
            best, stage = len(prefix), value
    return stage


class StageMap:
    """A reusable ``stage_of`` callable for
    :func:`~instep.impact.upstream.symbol_diff.diff_many`."""

    def __init__(self, extra: dict[str, str] | None = None) -> None:
        self.table = stage_table(extra)
        self._cache: dict[str, Stage] = {}

    def __call__(self, path: str) -> Stage:
        stage = self._cache.get(path)
        if stage is None:
            stage = self._cache[path] = _lookup(_normalise(path), self.table)
        return stage
