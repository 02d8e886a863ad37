"""Reading TOML files with the error policy applied (one line naming the file)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from instep.errors import BadInput, MissingInput

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib


def parse_toml(text: str, source: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise BadInput(f"{source}: not valid TOML: {exc}") from exc


def load_toml(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise MissingInput(f"{path}: no such file (expected a TOML file)")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise BadInput(f"{path}: not UTF-8 text (expected a TOML file)") from exc
    return parse_toml(text, str(path))


def describe_validation_error(exc: Any, source: str) -> str:
    """One line from a pydantic ValidationError: 'source: a.b: message; c: message'."""
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err.get("loc", ()) if p != "__root__")
        msg = err.get("msg", "invalid value").removeprefix("Value error, ")
        parts.append(f"{loc}: {msg}" if loc else msg)
    return f"{source}: " + "; ".join(parts)
