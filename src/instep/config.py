"""instep's configuration: ``instep.toml`` or ``[tool.instep]`` in ``pyproject.toml``.

Looked up in the working directory unless ``--config PATH`` names a file (either kind).
Every key is validated; an unknown key or a wrong type is a one-line error naming the
file and the key. Relative paths in the file are relative to the file's directory.
This module only reads and validates; commands decide what to do with the values.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError

from instep.errors import BadInput
from instep.profiles import load_profile_file
from instep.tomlfile import describe_validation_error, load_toml

CONFIG_FILE = "instep.toml"
PYPROJECT = "pyproject.toml"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ImpactConfig(_Strict):
    """Defaults for ``instep impact`` (command-line options win)."""

    downstream: str | None = None
    upstream_old: str | None = None
    upstream_new: str | None = None
    upstream_git: str | None = None
    stage_map: dict[str, str] = Field(
        default_factory=dict, description="extra upstream path prefix -> compile stage"
    )
    exclude: list[str] = Field(default_factory=list, description="glob patterns left out")


class TierConfig(_Strict):
    """A named list of suites/paths with its own timeout and isolation."""

    description: str = ""
    paths: list[str] = Field(default_factory=list)
    k: str | None = None
    timeout: float | None = Field(None, gt=0)
    isolate: Literal["case", "worker"] | None = None
    expected_failures: list[str] = Field(default_factory=list)


class InstepConfig(_Strict):
    profile: str = "cpu"
    db: str = ".instep/instep.db"
    cache_dir: str | None = None
    lang: Literal["en", "zh"] = "en"
    profiles: dict[str, dict[str, Any]] = Field(default_factory=dict)
    profile_files: list[str] = Field(default_factory=list)
    impact: ImpactConfig = Field(default_factory=ImpactConfig)
    tiers: dict[str, TierConfig] = Field(default_factory=dict)
    #: who handles failures of a layer or a category (``[owners]``: ``lowering = "..."``)
    owners: dict[str, str] = Field(default_factory=dict)

    # Where the values came from; not a key of the file.
    _source: Path | None = PrivateAttr(None)

    @property
    def source(self) -> Path | None:
        return self._source

    @property
    def base_dir(self) -> Path:
        return self.source.parent if self.source else Path.cwd()

    def resolve(self, value: str) -> Path:
        """A path from the file, made absolute against the file's directory."""
        path = Path(os.path.expanduser(value))
        return path if path.is_absolute() else self.base_dir / path

    def cache_path(self) -> Path:
        if self.cache_dir:
            return self.resolve(self.cache_dir)
        env = os.environ.get("INSTEP_CACHE_DIR")
        if env:
            return Path(env)
        xdg = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
        return Path(xdg) / "instep"

    def user_profiles(self) -> dict[str, dict[str, Any]]:
        """Inline ``[profiles.NAME]`` tables plus ``profile_files``."""
        table = dict(self.profiles)
        for entry in self.profile_files:
            name, raw = load_profile_file(self.resolve(entry))
            table[name] = raw
        return table


def _from_table(table: dict[str, Any], source: Path, where: str) -> InstepConfig:
    try:
        config = InstepConfig.model_validate(table)
    except ValidationError as exc:
        raise BadInput(describe_validation_error(exc, where)) from exc
    config._source = source
    return config


def load_config(explicit: Path | None = None, cwd: Path | None = None) -> InstepConfig:
    """The configuration in force: ``explicit``, else the working directory's, else defaults."""
    cwd = cwd or Path.cwd()
    if explicit is not None:
        raw = load_toml(explicit)
        if explicit.name == PYPROJECT:
            table = raw.get("tool", {}).get("instep")
            if table is None:
                raise BadInput(f"{explicit}: has no [tool.instep] table")
            return _from_table(table, explicit, f"{explicit} [tool.instep]")
        return _from_table(raw, explicit, str(explicit))
    own = cwd / CONFIG_FILE
    if own.is_file():
        return _from_table(load_toml(own), own, str(own))
    pyproject = cwd / PYPROJECT
    if pyproject.is_file():
        table = load_toml(pyproject).get("tool", {}).get("instep")
        if table is not None:
            return _from_table(table, pyproject, f"{pyproject} [tool.instep]")
    return InstepConfig()
