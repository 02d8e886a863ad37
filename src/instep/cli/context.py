"""What every command receives from the root options (the config, lazily loaded) and the
options and store opening that the commands reading a store share (``--db``, ``--format``).

Nothing here parses a command's own options or renders its output."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import click

from instep.config import InstepConfig, load_config
from instep.errors import MissingInput
from instep.profiles import Profile, load_profile

if TYPE_CHECKING:  # the store (SQLAlchemy) is imported only by commands that open one
    from instep.store import Store

F = TypeVar("F", bound=Callable[..., object])

DB_HELP = "Result store: a SQLite path or a postgresql:// URL (default: the config's 'db')."

# Set by the console-script entry point (``instep.cli.main``): the process ends when the
# command does, so a command may leave what it no longer needs to the operating system.
# Tests run commands through ``instep.cli.run`` in their own long-lived process: unset.
PROCESS_ENDS_WITH_COMMAND = False


@dataclass
class AppContext:
    config_path: Path | None = None
    _config: InstepConfig | None = field(default=None, repr=False)

    @property
    def config(self) -> InstepConfig:
        if self._config is None:
            self._config = load_config(self.config_path)
        return self._config

    def profile(self, name: str | None = None) -> Profile:
        """The profile named on the command line, else the config's default."""
        cfg = self.config
        return load_profile(name or cfg.profile, cfg.user_profiles())


def db_option(func: F) -> F:
    """``--db PATH|URL`` of the commands that read or write a store."""
    return click.option("--db", "db", metavar="PATH|URL", help=DB_HELP)(func)


def format_option(func: F) -> F:
    """``--format table|json`` of the commands that print a store's contents."""
    return click.option(
        "--format",
        "fmt",
        type=click.Choice(["table", "json"]),
        default="table",
        show_default=True,
        help="Output format.",
    )(func)


def store_target(app: AppContext, db: str | None) -> str:
    """The store ``--db`` names, else the config's ``db`` (a path resolved from the config)."""
    if db:
        return db
    value = app.config.db
    return value if "://" in value else str(app.config.resolve(value))


def open_store(app: AppContext, db: str | None, must_exist: bool = False) -> Store:
    """The store of ``--db`` (or the config's), opened; use it as ``with open_store(...)``."""
    from instep.store import Store  # SQLAlchemy only for the commands that open a store

    target = store_target(app, db)
    if must_exist and "://" not in target and not Path(target).exists():
        raise MissingInput(f"store {target} does not exist (run 'instep run' first, or pass --db)")
    return Store(target)
