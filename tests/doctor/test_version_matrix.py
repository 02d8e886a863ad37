"""Version probes as the runner records them: static versions, subprocess probes, failures."""

from __future__ import annotations

import importlib.metadata
import sys

import pytest

from instep.doctor.version_matrix import read_version_matrix
from instep.profiles import Profile, VersionProbe


def _profile(*probes: VersionProbe) -> Profile:
    return Profile(name="t", device_type="cpu", version_probes=list(probes))


def test_probes_of_every_kind(monkeypatch, tmp_path):
    monkeypatch.setenv("INSTEP_TEST_DRIVER", "driver 535.1")
    release = tmp_path / "release"
    release.write_text("CANN version=8.0.RC3\n")
    matrix = read_version_matrix(
        _profile(
            VersionProbe(name="pytest", module="pytest"),
            VersionProbe(name="py", python="import sys; print(sys.version_info[0])"),
            VersionProbe(name="echo", command=[sys.executable, "-c", "print('v 1.2')"]),
            VersionProbe(
                name="per_device",
                command=[sys.executable, "-c", "print('535.1\\n535.1\\n\\n550.2')"],
            ),
            VersionProbe(name="cann", file=str(release), regex=r"version=(\S+)"),
            VersionProbe(name="driver", env="INSTEP_TEST_DRIVER", regex=r"\d+\.\d+"),
            VersionProbe(name="absent", module="no_such_module_anywhere"),
        )
    ).flat()
    assert matrix == {
        "pytest": importlib.metadata.version("pytest"),
        "py": "3",
        "echo": "v 1.2",
        "per_device": "535.1, 550.2",
        "cann": "8.0.RC3",
        "driver": "535.1",
        "absent": None,
    }


def test_required_probe_failure_is_reported_not_raised():
    matrix = read_version_matrix(
        _profile(VersionProbe(name="boom", python="raise SystemExit('nope')", optional=False))
    ).flat()
    assert matrix["boom"] is None
    assert "boom" in matrix["errors"]


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch not installed")
def test_torch_versions_are_read_without_importing_torch():
    from instep.profiles import load_profile

    before = set(sys.modules)
    matrix = read_version_matrix(load_profile("cpu")).flat()
    assert matrix["torch"] == importlib.metadata.version("torch")
    assert len(matrix["torch_git"]) == 40
    assert "torch" not in set(sys.modules) - before
