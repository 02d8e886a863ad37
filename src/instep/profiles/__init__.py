"""Backend profiles: built-in data files (``cpu``, ``cuda``, ``npu``) and user profiles.

``load_profile(name)`` resolves ``extends`` chains and validates the result. User
profiles come from the configuration (inline ``[profiles.NAME]`` tables or
``profile_files``); a user profile may extend or replace a built-in one.
Nothing here runs probes or classifies messages: that is run/, triage/ and doctor/.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from instep.errors import BadInput, MissingInput
from instep.profiles.schema import MessageRule, Profile, VersionProbe
from instep.tomlfile import describe_validation_error, load_toml, parse_toml

__all__ = [
    "MessageRule",
    "Profile",
    "VersionProbe",
    "builtin_profile_names",
    "load_profile",
]

_DATA = resources.files("instep.profiles") / "data"


def builtin_profile_names() -> list[str]:
    return sorted(p.name[: -len(".toml")] for p in _DATA.iterdir() if p.name.endswith(".toml"))


def _builtin_raw(name: str) -> dict[str, Any] | None:
    entry = _DATA / f"{name}.toml"
    if not entry.is_file():
        return None
    return parse_toml(entry.read_text(encoding="utf-8"), f"built-in profile '{name}'")


def _merge(parent: dict[str, Any], child: dict[str, Any]) -> dict[str, Any]:
    """Child over parent: scalars replace, tables merge, keyed lists put the child first."""
    out = dict(parent)
    for key, value in child.items():
        if key in ("rules", "version_probes") and key in parent:
            ident = "category" if key == "rules" else "name"
            mine = {item.get(ident) for item in value}
            out[key] = list(value) + [i for i in parent[key] if i.get(ident) not in mine]
        elif isinstance(value, dict) and isinstance(parent.get(key), dict):
            out[key] = {**parent[key], **value}
        else:
            out[key] = value
    return out


def load_profile(
    name: str,
    user_profiles: dict[str, dict[str, Any]] | None = None,
) -> Profile:
    """The profile ``name``: a user profile of that name first (from config), else built-in.

    A user profile whose ``extends`` names itself extends the built-in of that name, so
    ``[profiles.npu] extends = "npu"`` adjusts the shipped NPU profile.
    """
    user_profiles = user_profiles or {}
    layers: list[dict[str, Any]] = []
    seen: list[str] = []
    current: str | None = name
    prefer_user = True
    while current is not None:
        from_user = prefer_user and current in user_profiles
        tag = f"{current}{'' if from_user else ' (built-in)'}"
        if tag in seen:
            raise BadInput(
                f"profile '{name}': 'extends' forms a cycle: {' -> '.join([*seen, tag])}"
            )
        seen.append(tag)
        found = user_profiles[current] if from_user else _builtin_raw(current)
        if found is None:
            known = sorted({*builtin_profile_names(), *user_profiles})
            raise MissingInput(
                f"profile '{current}' not found (known profiles: {', '.join(known)})"
            )
        layers.append(found)
        parent = found.get("extends")
        prefer_user = parent != current
        current = parent
    raw: dict[str, Any] = {}
    for layer in reversed(layers):
        raw = _merge(raw, layer)
    raw["name"] = name
    raw["extends"] = layers[0].get("extends")
    try:
        return Profile.model_validate(raw)
    except ValidationError as exc:
        raise BadInput(describe_validation_error(exc, f"profile '{name}'")) from exc


def load_profile_file(path: Path) -> tuple[str, dict[str, Any]]:
    """A user profile file: its name (``name`` key or the file stem) and raw table."""
    raw = load_toml(path)
    return str(raw.get("name", path.stem)), raw
