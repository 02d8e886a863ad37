"""Environment checks before anything is compiled (seed 000 5.1, 6.1, 6.2, 11).

:func:`run_env_checks` runs one plain multi-line probe script in a subprocess of the
user's Python, in the user's working directory and with the profile's ``env`` applied,
and returns :class:`EnvCheck` results for:

- ``shadowing``: the backend package found from the working directory is not a source
  checkout that hides the installed build (seed 000 6.1: a local ``torch_npu/``);
- ``autoload``: ``TORCH_DEVICE_BACKEND_AUTOLOAD`` and the ``torch.backends`` entry points
  that torch would load on ``import torch`` (the circular import of seed 000 6.1);
- ``import torch`` and ``import <backend>`` (with ``__file__``);
- ``dynamo_backend``: the profile's backend is registered with Dynamo;
- ``device_interface`` and ``device_op_overrides`` (and Inductor scheduling) for ``cpu``
  and the profile's device, looked up the way a compile does (seed 000 6.2).

instep's own process never imports torch here. Nothing is rendered or fixed.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from instep.errors import MissingDependency
from instep.profiles import Profile
from instep.user_python import ANSWER_MARK, run_script

CHECK_TIMEOUT_S = 300

_CHECK_SCRIPT = r"""
import importlib
import importlib.metadata
import importlib.util
import json
import os
import sys
import time

args = json.loads(sys.argv[1])
pkg = args["backend_package"]
device = args["device_type"]
cwd = os.path.realpath(os.getcwd())
checks = []


def add(name, status, detail, **data):
    checks.append({"name": name, "status": status, "detail": detail, "data": data})


def describe(exc):
    text = " ".join(str(exc).split())
    return type(exc).__name__ + (": " + text[:400] if text else "")


def origin_of(spec):
    if spec is None:
        return None
    if spec.origin and spec.origin not in ("namespace", "built-in", "frozen"):
        return os.path.realpath(spec.origin)
    locations = list(spec.submodule_search_locations or [])
    return os.path.realpath(locations[0]) if locations else spec.origin


def under_cwd(path):
    return path is not None and (path == cwd or path.startswith(cwd + os.sep))


# 1. shadowing: where the backend is found from here, and where without the cwd on sys.path
if pkg:
    here = origin_of(importlib.util.find_spec(pkg))
    saved = list(sys.path)
    sys.path[:] = [p for p in sys.path if os.path.realpath(p or ".") != cwd]
    importlib.invalidate_caches()
    try:
        installed = origin_of(importlib.util.find_spec(pkg))
    finally:
        sys.path[:] = saved
        importlib.invalidate_caches()
    data = {"found": here, "installed": installed, "cwd": cwd}
    if here is None:
        add("shadowing", "fail", pkg + " is not importable from " + cwd, **data)
    elif under_cwd(here) and installed is not None and installed != here:
        add(
            "shadowing",
            "fail",
            "the source directory " + os.path.join(cwd, pkg) + " shadows the installed "
            + pkg + " (" + installed + "): run from another directory",
            **data,
        )
    elif under_cwd(here) and installed is None:
        add(
            "shadowing",
            "warn",
            pkg + " is only importable from the working directory (" + here
            + "), not installed",
            **data,
        )
    else:
        add("shadowing", "ok", pkg + " resolves to " + str(here), **data)
else:
    add("shadowing", "skip", "the profile names no backend package")

# 2. device-backend autoload (read before torch is imported)
autoload = os.environ.get("TORCH_DEVICE_BACKEND_AUTOLOAD")
try:
    eps = [
        {"name": ep.name, "value": ep.value}
        for ep in importlib.metadata.entry_points(group="torch.backends")
    ]
except Exception as exc:
    eps = []
enabled = autoload is None or autoload.strip() not in ("0", "false", "False", "")
ours = [ep for ep in eps if pkg and ep["value"].split(":")[0].split(".")[0] == pkg]
data = {"TORCH_DEVICE_BACKEND_AUTOLOAD": autoload, "enabled": enabled, "entry_points": eps}
if ours and enabled:
    add(
        "autoload",
        "warn",
        "import torch will auto-load " + pkg + " (entry point '" + ours[0]["name"]
        + "'); set TORCH_DEVICE_BACKEND_AUTOLOAD=0 before torch is imported to avoid the"
        + " circular import of a backend that imports torch itself",
        **data,
    )
else:
    state = "enabled" if enabled else "disabled"
    names = ", ".join(ep["name"] for ep in eps) or "none"
    add("autoload", "ok", "device-backend autoload " + state + "; entry points: " + names, **data)

# 3. imports
torch = None
start = time.perf_counter()
try:
    import torch
    add(
        "import torch",
        "ok",
        "torch " + torch.__version__ + " from " + os.path.dirname(torch.__file__),
        seconds=round(time.perf_counter() - start, 3),
        file=torch.__file__,
    )
except BaseException as exc:
    add("import torch", "fail", describe(exc))

backend = None
if pkg and torch is not None:
    try:
        backend = importlib.import_module(pkg)
        add(
            "import " + pkg,
            "ok",
            pkg + " " + str(getattr(backend, "__version__", "?")) + " from "
            + str(getattr(backend, "__file__", None)),
            file=getattr(backend, "__file__", None),
        )
    except BaseException as exc:
        add("import " + pkg, "fail", describe(exc))

# 4. Dynamo backends
if torch is not None:
    try:
        from torch._dynamo import list_backends

        names = sorted(set(list_backends(exclude_tags=())))
        wanted = args["dynamo_backend"]
        status = "ok" if wanted in names else "fail"
        verdict = "registered" if status == "ok" else "NOT registered"
        add("dynamo_backend", status, wanted + " is " + verdict, backends=names)
    except BaseException as exc:
        add("dynamo_backend", "fail", describe(exc))

# 5. device interface, device op overrides and Inductor scheduling, cpu and the device
if torch is not None:
    devices = ["cpu"] if device == "cpu" else ["cpu", device]
    for dev in devices:
        try:
            from torch._dynamo.device_interface import get_interface_for_device

            iface = get_interface_for_device(dev)
            add("device_interface[" + dev + "]", "ok", iface.__module__ + "." + iface.__name__)
        except BaseException as exc:
            add("device_interface[" + dev + "]", "fail", describe(exc))
    try:
        from torch._inductor.codegen import common as codegen_common

        codegen_common.init_backend_registration()
        for dev in devices:
            try:
                overrides = codegen_common.get_device_op_overrides(dev)
                kind = type(overrides)
                add("device_op_overrides[" + dev + "]", "ok", kind.__module__ + "." + kind.__name__)
            except KeyError as exc:
                add(
                    "device_op_overrides[" + dev + "]",
                    "fail",
                    "KeyError: " + str(exc) + ": no DeviceOpOverrides registered for '" + dev
                    + "' (seed 000 6.2: registration order)",
                    registered=sorted(codegen_common.device_op_overrides_dict),
                )
            except BaseException as exc:
                add("device_op_overrides[" + dev + "]", "fail", describe(exc))
            sched = codegen_common.get_scheduling_for_device(dev)
            if sched is None:
                add(
                    "inductor_scheduling[" + dev + "]",
                    "fail",
                    "no Inductor scheduling registered for '" + dev + "'",
                    registered=sorted(codegen_common.device_codegens),
                )
            else:
                name = getattr(sched, "__qualname__", type(sched).__name__)
                add("inductor_scheduling[" + dev + "]", "ok", str(name))
    except BaseException as exc:
        add("device_op_overrides", "fail", describe(exc))

sys.stdout.write(ANSWER_MARK + json.dumps(checks))
""".replace("ANSWER_MARK", repr(ANSWER_MARK))


class CheckStatus(str, Enum):
    OK = "ok"
    WARN = "warn"
    FAIL = "fail"
    SKIP = "skip"


@dataclass
class EnvCheck:
    name: str
    status: CheckStatus
    detail: str
    data: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "status": self.status.value,
            "detail": self.detail,
            "data": self.data,
        }


def is_this_python(python: str | None) -> bool:
    """Whether ``python`` is instep's own interpreter (a venv's symlink is another one)."""
    if python is None:
        return True
    return os.path.abspath(shutil.which(python) or python) == os.path.abspath(sys.executable)


def user_python_has_torch(python: str | None = None) -> bool:
    """Whether ``python`` (default: this interpreter) can find torch, without importing it."""
    if is_this_python(python):
        return importlib.util.find_spec("torch") is not None
    proc = subprocess.run(
        [
            python,
            "-c",
            "import importlib.util, sys; sys.exit(not importlib.util.find_spec('torch'))",
        ],
        capture_output=True,
        timeout=60,
    )
    return proc.returncode == 0


def require_torch(python: str | None = None, needed_for: str = "instep doctor") -> None:
    """Raise :class:`MissingDependency` (one line, exit 2) when torch is not installed."""
    try:
        found = user_python_has_torch(python)
    except (OSError, subprocess.SubprocessError) as exc:
        raise MissingDependency(
            "torch", needed_for, f"cannot run {python}: {' '.join(str(exc).split())}"
        ) from None
    if not found:
        where = f" in {python}" if python else ""
        raise MissingDependency("torch", needed_for, f"install torch{where} first")


def run_env_checks(
    profile: Profile,
    python: str | None = None,
    cwd: str | None = None,
    env: Mapping[str, str] | None = None,
) -> list[EnvCheck]:
    """Run the checks in a subprocess of ``python`` in ``cwd``; the profile env applies."""
    python = python or sys.executable
    payload = {
        "backend_package": profile.backend_package,
        "device_type": profile.device_type,
        "dynamo_backend": profile.dynamo_backend,
    }
    child_env = {**os.environ, **profile.env, **(env or {})}
    raw, error = run_script(
        _CHECK_SCRIPT, payload, python=python, env=child_env, cwd=cwd, timeout=CHECK_TIMEOUT_S
    )
    if error is not None:
        return [EnvCheck("checks", CheckStatus.FAIL, f"the check process failed: {error}")]
    return [
        EnvCheck(c["name"], CheckStatus(c["status"]), c["detail"], c.get("data") or {}) for c in raw
    ]
