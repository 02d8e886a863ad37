"""Command-line options and settings shared by the built-in suites (device, backend, L5).

Each suite directory's ``conftest.py`` calls :func:`add_options`; registering the same
option twice (two suite directories in one session) is harmless. Every option falls back
to an environment variable, so the suites also run under plain ``pytest``. The tiers pass
the profile's device and backend as ``--instep-device``/``--instep-backend`` (see
``tiers.py``), which ``instep run`` stores in the run's settings, so ``--resume`` keeps them.
This module only reads settings; it runs nothing.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

#: option name -> (environment variable, default, help)
OPTIONS: dict[str, tuple[str, str, str]] = {
    "--instep-device": ("INSTEP_DEVICE", "cpu", "torch device type under test"),
    "--instep-backend": ("INSTEP_BACKEND", "inductor", "torch.compile backend under test"),
    "--instep-opinfo-limit": ("INSTEP_OPINFO_LIMIT", "0", "L5: at most N ops (0: all)"),
    "--instep-opinfo-ops": (
        "INSTEP_OPINFO_OPS",
        "",
        "L5: only these ops (comma list; name:grad: with its gradients)",
    ),
    "--instep-opinfo-dtypes": ("INSTEP_OPINFO_DTYPES", "float32", "L5: dtypes (comma list)"),
    "--instep-all-samples": ("INSTEP_ALL_SAMPLES", "0", "L5: every sample, not the first"),
    "--instep-grad": ("INSTEP_GRAD", "0", "L5: check backward too"),
    "--instep-backend-package": ("INSTEP_BACKEND_PACKAGE", "", "backend package to import"),
    "--instep-profile": ("INSTEP_PROFILE", "", "profile name (expected-failure lists)"),
}


def add_options(parser: Any) -> None:
    """Register the suites' options on a pytest parser (idempotent)."""
    group = parser.getgroup("instep", "instep built-in suites")
    for name, (env, default, text) in OPTIONS.items():
        try:
            group.addoption(name, default=None, help=f"{text} [${env} or {default!r}]")
        except ValueError:  # already added by another suite directory's conftest
            return


@dataclass(frozen=True)
class SuiteSettings:
    device: str = "cpu"
    backend: str = "inductor"
    opinfo_limit: int = 0
    opinfo_ops: tuple[str, ...] = ()
    opinfo_dtypes: tuple[str, ...] = ("float32",)
    all_samples: bool = False
    grad: bool = False
    backend_package: str = ""
    profile: str = ""


def _value(config: Any, name: str) -> str:
    env, default, _ = OPTIONS[name]
    value = None
    if config is not None:
        try:
            value = config.getoption(name.lstrip("-").replace("-", "_"))
        except ValueError:
            value = None
    if value is None:
        value = os.environ.get(env, default)
    return str(value)


def _flag(text: str) -> bool:
    return text.strip().lower() in ("1", "true", "yes", "on")


def _items(text: str) -> tuple[str, ...]:
    return tuple(v.strip() for v in text.split(",") if v.strip())


def settings(config: Any = None) -> SuiteSettings:
    """The settings in force for a pytest ``config`` (or from the environment alone)."""
    limit = _value(config, "--instep-opinfo-limit")
    try:
        opinfo_limit = max(0, int(limit))
    except ValueError:
        opinfo_limit = 0
    return SuiteSettings(
        device=_value(config, "--instep-device"),
        backend=_value(config, "--instep-backend"),
        opinfo_limit=opinfo_limit,
        opinfo_ops=_items(_value(config, "--instep-opinfo-ops")),
        opinfo_dtypes=_items(_value(config, "--instep-opinfo-dtypes")) or ("float32",),
        all_samples=_flag(_value(config, "--instep-all-samples")),
        grad=_flag(_value(config, "--instep-grad")),
        backend_package=_value(config, "--instep-backend-package"),
        profile=_value(config, "--instep-profile") or _value(config, "--instep-device"),
    )
