"""``--engine``/``--address`` on the command line: mistakes are one line, Ray stays optional.

Fast: no cluster is started (see test_ray_engine.py for the real one).
"""

from __future__ import annotations

import sys

from instep.run.ray_engine import task_resources

SUITE = "def test_ok():\n    pass\n"


def test_engine_ray_without_ray_installed_names_the_extra(instep, tmp_path, monkeypatch):
    (tmp_path / "test_x.py").write_text(SUITE)
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now raises ImportError
    result = instep("run", "test_x.py", "--engine", "ray", "--preimport", "none")
    assert result.code == 2
    assert "ray" in result.err and "pip install 'instep[ray]'" in result.err
    assert "Traceback" not in result.err
    assert not (tmp_path / ".instep" / "instep.db").exists()  # no run was created


def test_the_local_pool_stays_the_default_without_ray(instep, tmp_path, monkeypatch):
    (tmp_path / "test_x.py").write_text(SUITE)
    monkeypatch.setitem(sys.modules, "ray", None)
    result = instep("run", "test_x.py", "--preimport", "none", "--run", "plain")
    assert result.code == 0, result.err


def test_ray_options_without_the_ray_engine_are_refused(instep, tmp_path):
    (tmp_path / "test_x.py").write_text(SUITE)
    result = instep("run", "test_x.py", "--address", "auto", "--preimport", "none")
    assert result.code == 2 and "--engine ray" in result.err
    result = instep("run", "test_x.py", "--engine", "ray", "--devices", "0,1")
    assert result.code == 2 and "Ray grants" in result.err


def test_each_task_asks_for_one_unit_of_the_profile_resource():
    assert task_resources("NPU") == {"num_cpus": 0, "resources": {"NPU": 1}}
    assert task_resources("GPU") == {"num_cpus": 0, "num_gpus": 1}  # Ray's own GPU option
    assert task_resources("CPU") == {"num_cpus": 1}
