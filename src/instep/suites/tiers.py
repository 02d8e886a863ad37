"""Tiers: named lists of suites/paths/-k with their own timeout and isolation (L0..L6).

A tier comes, in this order of precedence, from the config's ``[tiers.NAME]``, from a
tier file written by ``instep tier L2 --from-run RUN`` (``.instep/tiers/NAME.toml`` next
to the config; its cases are the run's failing batches, :func:`batch_regression`), or from
the built-in defaults in ``data/tiers.toml``. Paths starting with
``instep:`` name suites shipped with instep; a tier running them passes the profile's
device and backend to them (:meth:`Tier.pytest_args`). This module resolves tiers and
writes tier files; running them is ``instep run --tier NAME``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from instep.errors import BadInput
from instep.outcome import OutcomeRecord
from instep.suites.expected_failures import builtin_lists
from instep.tomlfile import load_toml
from instep.triage.batches import Batch, group_batches, select_batches

if TYPE_CHECKING:
    from instep.config import InstepConfig
    from instep.profiles import Profile

SUITES_DIR = Path(__file__).resolve().parent
BUILTIN_PREFIX = "instep:"
TIER_FILES_DIR = ".instep/tiers"


@dataclass(frozen=True)
class Tier:
    name: str
    description: str = ""
    paths: tuple[str, ...] = ()
    k: str | None = None
    timeout: float | None = None
    isolate: str | None = None
    expected_failures: tuple[str, ...] = ()
    source: str = "built-in"  # "built-in", "config" or the tier file's path
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def runs_builtin_suites(self) -> bool:
        return any(_is_builtin(p) for p in self.paths)

    def pytest_args(self, profile: Profile) -> list[str]:
        """Options the built-in suites read: the profile's device, backend and name."""
        if not self.runs_builtin_suites:
            return []
        return builtin_suite_args(profile)


def builtin_suite_args(profile: Profile) -> list[str]:
    """The pytest options that give the built-in suites the profile's device, backend
    and name (what a run of shipped suites passes them)."""
    args = [
        f"--instep-device={profile.device_type}",
        f"--instep-backend={profile.dynamo_backend}",
        f"--instep-profile={profile.name}",
    ]
    if profile.backend_package:
        args.append(f"--instep-backend-package={profile.backend_package}")
    return args


def _is_builtin(path: str) -> bool:
    return path.startswith(str(SUITES_DIR))


def runs_builtin_suites(paths: list[str]) -> bool:
    """Whether any of ``paths`` (resolved) is a suite shipped with instep."""
    return any(_is_builtin(p) for p in paths)


def resolve_builtin(paths: list[str]) -> list[str]:
    """PATHS as given to ``instep run``, ``instep:`` ones resolved to the shipped suites."""
    return [builtin_path(p) if p.startswith(BUILTIN_PREFIX) else p for p in paths]


def builtin_path(entry: str) -> str:
    """``instep:smoke/test_l1_smoke.py::test_x`` -> the installed file's absolute node id."""
    rest = entry[len(BUILTIN_PREFIX) :]
    path, sep, node = rest.partition("::")
    return str(SUITES_DIR / path) + sep + node


def _resolve_path(config: InstepConfig | None, entry: str, base: Path | None = None) -> str:
    if entry.startswith(BUILTIN_PREFIX):
        return builtin_path(entry)
    path, sep, node = entry.partition("::")
    if base is not None and not Path(path).expanduser().is_absolute():
        return str(base / path) + sep + node
    resolved = config.resolve(path) if config is not None else Path(path).expanduser()
    return str(resolved) + sep + node


def builtin_tiers() -> dict[str, Tier]:
    """The default tiers L0..L6 from ``data/tiers.toml``, paths resolved."""
    raw = load_toml(SUITES_DIR / "data" / "tiers.toml")
    return {name: _tier(name, table, None, "built-in") for name, table in raw.items()}


def _tier(
    name: str, table: dict[str, Any], config: InstepConfig | None, source: str, base=None
) -> Tier:
    return Tier(
        name=name,
        description=str(table.get("description") or ""),
        paths=tuple(_resolve_path(config, p, base) for p in table.get("paths") or []),
        k=table.get("k"),
        timeout=table.get("timeout"),
        isolate=table.get("isolate"),
        expected_failures=tuple(
            str(_resolve_path(config, p, base)) for p in table.get("expected_failures") or []
        ),
        source=source,
    )


def tier_file(config: InstepConfig, name: str) -> Path:
    return config.base_dir / TIER_FILES_DIR / f"{name}.toml"


def _tier_from_file(config: InstepConfig, name: str) -> Tier | None:
    path = tier_file(config, name)
    if not path.is_file():
        return None
    raw = load_toml(path)
    table = raw.get("tiers", {}).get(name)
    if not isinstance(table, dict):
        raise BadInput(f"tier file {path}: expected a [tiers.{name}] table")
    return _tier(name, table, config, str(path), base=path.parent)


def available_tiers(config: InstepConfig) -> dict[str, Tier]:
    """Every tier by name: built-in, then tier files, then the config's (which win)."""
    tiers = builtin_tiers()
    directory = config.base_dir / TIER_FILES_DIR
    if directory.is_dir():
        for path in sorted(directory.glob("*.toml")):
            tier = _tier_from_file(config, path.stem)
            if tier is not None:
                tiers[tier.name] = tier
    for name, cfg in config.tiers.items():
        tiers[name] = _tier(name, cfg.model_dump(), config, "config")
    return dict(sorted(tiers.items()))


def resolve_tier(config: InstepConfig, name: str) -> Tier:
    """The tier called ``name``; a clear error when unknown or when it has no paths."""
    tiers = available_tiers(config)
    if name not in tiers:
        raise BadInput(f"--tier {name}: unknown tier (tiers: {', '.join(tiers) or 'none'})")
    tier = tiers[name]
    if not tier.paths:
        raise BadInput(f"--tier {name} has no paths yet: {tier.description}")
    return tier


def expected_lists(config: InstepConfig, tier_name: str | None, profile: str) -> list[Path]:
    """The expected-failure lists of a run of ``tier_name``: the tier's own lists, then
    instep's built-in lists for the tier and ``profile`` (none for a run without a tier)."""
    if not tier_name:
        return []
    tier = available_tiers(config).get(tier_name)
    paths = [Path(p) for p in tier.expected_failures] if tier else []
    return paths + builtin_lists(profile, tier_name)


def batch_regression(
    outcomes: Iterable[OutcomeRecord], refs: Iterable[str], root: str
) -> tuple[list[Batch], list[str]]:
    """The L2 tier of a run: its failing batches (all, or those ``refs`` names by id or
    signature) and their cases as paths under ``root`` (the run's directory), batch by
    batch. Batches are triage's (:func:`~instep.triage.batches.group_batches`)."""
    batches = select_batches(group_batches(outcomes), refs)
    paths = [_absolute(root, case) for batch in batches for case in batch.cases]
    return batches, paths


def _absolute(root: str, nodeid: str) -> str:
    path, sep, rest = nodeid.partition("::")
    return (path if Path(path).is_absolute() else str(Path(root) / path)) + sep + rest


def write_tier_file(path: Path, name: str, paths: list[str], description: str) -> None:
    """Write ``[tiers.NAME]`` with ``paths`` (node ids) as a tier file ``instep run`` reads."""
    lines = [
        f"# written by instep: {description}",
        f"[tiers.{name}]",
        f"description = {_toml_str(description)}",
        "paths = [",
        *[f"    {_toml_str(p)}," for p in paths],
        "]",
        "",
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text("\n".join(lines), encoding="utf-8")
    tmp.replace(path)


def _toml_str(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)
