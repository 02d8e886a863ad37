"""Wheels named by a pip requirement (``torch==2.13.0``), downloaded once into a cache.

:func:`download_wheel` runs ``python -m pip download --no-deps --only-binary :all:`` into
``<cache_dir>/wheels/<key>/`` the first time a requirement is asked for and reuses the
wheel afterwards without running pip. The download lands in a temporary folder that is
renamed into place, so an interrupted download leaves no half-filled cache entry.
pip's index settings (``PIP_INDEX_URL``, pip.conf) apply. The wheel is never installed
or imported; reading it is ``wheel.WheelSnapshot``'s job.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from instep.errors import BadInput, MissingInput

# name[extras] OP version[, OP version ...]  (PEP 508 without markers or URLs)
_REQUIREMENT = re.compile(
    r"^(?P<name>[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)"
    r"(?:\[[A-Za-z0-9._,\s-]*\])?\s*"
    r"(?P<specs>(?:===|==|~=|!=|>=|<=|<|>)\s*[A-Za-z0-9.*+!_-]+"
    r"(?:\s*,\s*(?:===|==|~=|!=|>=|<=|<|>)\s*[A-Za-z0-9.*+!_-]+)*)$"
)


def is_pip_requirement(spec: str) -> bool:
    """``name==1.0``, ``name>=1,<2``, ``name[extra]==1.0``: a name with a version clause."""
    return bool(_REQUIREMENT.match(spec.strip()))


def cache_key(spec: str) -> str:
    """A readable, filesystem-safe folder name for ``spec`` (and this interpreter)."""
    spec = spec.strip()
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    slug = re.sub(r"[^A-Za-z0-9.+-]+", "-", spec).strip("-")[:80]
    digest = hashlib.sha256(f"{spec}|{tag}".encode()).hexdigest()[:10]
    return f"{slug}-{tag}-{digest}"


def _cached_wheel(folder: Path) -> Path | None:
    wheels = sorted(folder.glob("*.whl")) if folder.is_dir() else []
    return wheels[0] if len(wheels) == 1 else None


def download_wheel(
    spec: str,
    cache_dir: Path,
    *,
    pip: Sequence[str] | None = None,
    timeout_s: float = 1800,
    extra_args: Sequence[str] = (),
) -> Path:
    """The wheel for pip requirement ``spec``, downloaded into the cache on first use.

    ``pip`` is the command that runs pip (default: this interpreter's ``-m pip``).
    A download that fails is a one-line MissingInput naming ``spec`` with pip's last
    error line.
    """
    spec = spec.strip()
    if not is_pip_requirement(spec):
        raise BadInput(
            f"{spec!r} is not a pip requirement with a version (expected e.g. torch==2.13.0)"
        )
    folder = Path(cache_dir).expanduser() / "wheels" / cache_key(spec)
    found = _cached_wheel(folder)
    if found is not None:
        return found
    folder.parent.mkdir(parents=True, exist_ok=True)
    command = [*(pip or (sys.executable, "-m", "pip")), "download"]
    tmp = Path(tempfile.mkdtemp(prefix=".download-", dir=folder.parent))
    try:
        command += [
            "--no-deps", "--only-binary", ":all:", "--disable-pip-version-check",
            "--no-input", "--retries", "2", "--timeout", "20", *extra_args,
            "--dest", str(tmp), spec,
        ]  # fmt: skip
        try:
            proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise MissingInput(
                f"cannot download {spec}: pip did not finish within {timeout_s:.0f} s"
            ) from None
        except OSError as exc:
            raise MissingInput(f"cannot download {spec}: cannot run pip ({exc})") from None
        wheels = sorted(tmp.glob("*.whl"))
        if proc.returncode != 0 or len(wheels) != 1:
            reason = _pip_reason(proc.stderr + "\n" + proc.stdout)
            if proc.returncode == 0:
                reason = f"pip wrote {len(wheels)} wheels instead of one"
            raise MissingInput(f"cannot download {spec} with pip: {reason}")
        found = _cached_wheel(folder)
        if found is not None:  # another process finished first; keep theirs
            return found
        shutil.rmtree(folder, ignore_errors=True)
        tmp.chmod(0o755)  # mkdtemp made it private; a cache entry is an ordinary folder
        tmp.rename(folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    found = _cached_wheel(folder)
    assert found is not None
    return found


def _pip_reason(output: str) -> str:
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("ERROR")]
    return (errors or lines or ["pip exited with an error and said nothing"])[-1]
