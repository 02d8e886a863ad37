"""What every command receives from the root options: the config, lazily loaded."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from instep.config import InstepConfig, load_config
from instep.profiles import Profile, load_profile


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
