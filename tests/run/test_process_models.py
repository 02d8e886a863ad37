"""Process models: a device runtime that cannot be used after a fork, as CUDA and NPU.

``fakedev`` behaves like ``torch.cuda``: a process that initialised it and then forks
leaves the child in a "bad fork", where using the device raises "Cannot re-initialize
… in forked subprocess". The test module touches the device at import, as upstream test
modules do (``SM80OrLater``). Runs are real: real hosts, real forks and spawns.
"""

from __future__ import annotations

import sys

import pytest
from tests.run.cases import by_case, show, write

FAKEDEV = '''
import os

_initialized = False
_bad_fork = False


def init():
    global _initialized
    if _bad_fork:
        raise RuntimeError(
            "Cannot re-initialize FAKEDEV in forked subprocess. To use FAKEDEV with"
            " multiprocessing, you must use the 'spawn' start method"
        )
    _initialized = True


def is_initialized():
    return _initialized


def _after_fork_in_child():
    global _initialized, _bad_fork
    if _initialized:
        _initialized = False
        _bad_fork = True


os.register_at_fork(after_in_child=_after_fork_in_child)


def launch():
    """A kernel launch: initialises lazily, like torch.cuda."""
    if not _initialized:
        init()
    return os.getpid()
'''

FAKEDEV_AUTOINIT = "import fakedev\nfakedev.init()\n"

DEVICE_TESTS = """
import os
import unittest

import fakedev

fakedev.init()  # a capability read at import, like SM80OrLater
PIDS = os.path.join(os.path.dirname(__file__), "pids.txt")


def _note():
    with open(PIDS, "a") as fh:
        fh.write(f"{os.getpid()}\\n")


class TestKernelsFAKEDEV(unittest.TestCase):
    device_type = "fakedev"

    def test_add_fakedev(self):
        _note()
        self.assertTrue(fakedev.launch())

    def test_mul_fakedev(self):
        _note()
        self.assertTrue(fakedev.launch())


class TestKernelsCPU(unittest.TestCase):
    device_type = "cpu"

    def test_add_cpu_not_fakedev(self):
        _note()


def test_plain_function_uses_the_device():
    _note()
    assert fakedev.launch()
"""

PROFILE = """
[profiles.fakedev]
extends = "cpu"
device_type = "fakedev"
default_isolation = "case"

[profiles.fakedev.runtime]
fork = "before_init"
initialized = "fakedev.is_initialized"
"""


#: installed helpers a test module imports: one device-free (a worker host may import it
#: once), one that reads a capability at import (only case processes may import it)
HELPERS = """
import os
import threading

LOCAL = threading.local()  # as torch.testing's precision: set in the importing thread
LOCAL.precision = 0
with open(os.environ["IMPORT_LOG"], "a") as fh:
    fh.write(f"{__name__} {os.getpid()}\\n")
"""
CAPS = HELPERS + "import fakedev\nfakedev.init()\n"

WARM_TESTS = """
import devhelpers
import devcaps
import fakedev


def test_one():
    assert fakedev.launch() and devhelpers.LOCAL.precision == 0


def test_two():
    assert fakedev.launch() and devhelpers.LOCAL.precision == 0


def test_three():
    assert fakedev.launch() and devhelpers.LOCAL.precision == 0
"""


@pytest.fixture
def device_suite(tmp_path, monkeypatch):
    site = tmp_path.parent / f"{tmp_path.name}-site"  # outside the test tree, like a package
    write(site, "fakedev.py", FAKEDEV)
    write(site, "fakedev_autoinit.py", FAKEDEV_AUTOINIT)
    write(site, "devhelpers.py", HELPERS)
    write(site, "devcaps.py", CAPS)
    write(tmp_path, "test_device.py", DEVICE_TESTS)
    write(tmp_path, "instep.toml", PROFILE)
    monkeypatch.setenv("PYTHONPATH", str(site))  # the hosts may preimport fakedev
    monkeypatch.setenv("IMPORT_LOG", str(tmp_path / "imports.txt"))
    monkeypatch.syspath_prepend(str(site))  # and the runner checks that they can
    return tmp_path


def _pids(root) -> list[int]:
    return [int(x) for x in (root / "pids.txt").read_text().split()]


def _run(instep, *args: str) -> dict[str, dict]:
    result = instep("run", "test_device.py", "--run", "r", *args)
    outcomes = by_case(show(instep, "r"))
    assert len(outcomes) == 4, (result.err, outcomes)
    return outcomes


@pytest.mark.parametrize("isolate", ["case", "worker"])
def test_device_profile_imports_test_modules_where_their_cases_run(instep, device_suite, isolate):
    outcomes = _run(
        instep, "--profile", "fakedev", "--preimport", "none", "-n", "2", "--isolate", isolate
    )
    assert {name: o["status"] for name, o in outcomes.items()} == dict.fromkeys(outcomes, "passed")
    pids = _pids(device_suite)
    if isolate == "case":
        assert len(set(pids)) == 4  # a fresh process per case
    else:
        assert len(set(pids)) <= 2  # one process per worker imports the module once


def test_a_device_used_after_a_fork_is_filed_under_env_with_the_fix(instep, device_suite):
    # the shared model (what a CPU profile uses) imports the module in the forking host
    outcomes = _run(
        instep, "--profile", "fakedev", "--preimport", "none", "--process-model", "shared"
    )
    broken = {n for n, o in outcomes.items() if o["status"] == "failed"}
    assert broken == {"test_add_fakedev", "test_mul_fakedev", "test_plain_function_uses_the_device"}
    assert outcomes["test_add_cpu_not_fakedev"]["status"] == "passed"
    for name in broken:
        out = outcomes[name]
        assert (out["layer"], out["category"]) == ("env", "env.device_used_after_fork")
        assert "Cannot re-initialize FAKEDEV" in out["message"]
    triage = instep("triage", "r")
    assert triage.code == 0, triage.err
    assert 'fork = "before_init"' in triage.out and "--process-model" in triage.out


def test_a_host_whose_imports_initialised_the_device_spawns_its_case_processes(
    instep, device_suite, caplog
):
    outcomes = _run(
        instep, "--profile", "fakedev", "--preimport", "fakedev_autoinit", "--isolate", "worker"
    )
    assert {o["status"] for o in outcomes.values()} == {"passed"}
    assert "case processes are spawned, not forked" in caplog.text


def test_spawn_model_runs_each_case_in_a_fresh_interpreter(instep, device_suite):
    outcomes = _run(
        instep, "--profile", "fakedev", "--preimport", "none", "--process-model", "spawn"
    )
    assert {o["status"] for o in outcomes.values()} == {"passed"}
    assert len(set(_pids(device_suite))) == 4


def test_device_class_selects_the_classes_made_for_that_device(instep, device_suite):
    # -k fakedev alone also matches the CPU class's test_add_cpu_not_fakedev
    result = instep(
        "run",
        "test_device.py",
        "--profile",
        "fakedev",
        "--collect-only",
        "-k",
        "fakedev",
        "--device-class",
        "fakedev",
    )
    assert result.code == 0, result.err
    assert sorted(line.rsplit("::", 1)[-1] for line in result.out.split()) == [
        "test_add_fakedev",
        "test_mul_fakedev",
    ]


def test_hosts_import_once_what_the_tests_import_without_touching_the_device(instep, device_suite):
    write(device_suite, "test_warm.py", WARM_TESTS)
    result = instep(
        "run",
        "test_warm.py",
        "--profile",
        "fakedev",
        "--preimport",
        "none",
        "-n",
        "2",
        "--isolate",
        "case",
        "--run",
        "w",
    )
    assert result.code == 0, result.err
    imports: dict[str, list[str]] = {}
    for line in (device_suite / "imports.txt").read_text().split("\n"):
        if line:
            name, pid = line.split()
            imports.setdefault(name, []).append(pid)
    touched, helpers = set(imports["devcaps"]), set(imports["devhelpers"])
    ran = {str(o["pid"]) for o in show(instep, "w")["outcomes"]}
    assert len(ran) == 3, ran  # a process per case
    # every process that ran a case imported the device-touching module itself, and so
    # did only case processes: no host ever imported it
    assert ran <= touched, imports
    # with 3 cases on 2 hosts some host forks again: it imported the device-free helper
    # first, and the case process it forked then did not import it again
    assert helpers - touched, imports
    assert ran - helpers, imports


def test_a_test_module_that_fails_to_import_in_its_case_process_says_why(instep, device_suite):
    # imports fine where the run is collected, fails in every later case process
    write(
        device_suite,
        "test_flaky_import.py",
        "import os\n"
        "marker = os.path.join(os.path.dirname(__file__), 'collected-once')\n"
        "if os.path.exists(marker):\n"
        "    raise RuntimeError('CUDA driver initialization failed')\n"
        "open(marker, 'w').close()\n\n"
        "def test_a():\n    pass\n\ndef test_b():\n    pass\n",
    )
    instep(
        "run",
        "test_flaky_import.py",
        "--profile",
        "fakedev",
        "--preimport",
        "none",
        "--isolate",
        "case",
        "--run",
        "fi",
    )
    out = by_case(show(instep, "fi"))
    assert out["test_a"]["status"] == "passed"
    broken = out["test_b"]
    assert broken["status"] == "error" and broken["stage"] == "collect", broken
    assert "CUDA driver initialization failed" in broken["message"], broken["message"]


def test_device_class_tells_torch_testing_which_classes_to_make(instep, device_suite):
    write(
        device_suite,
        "test_only_for.py",
        "import os\nimport unittest\n\n\nclass TestEnvFAKEDEV(unittest.TestCase):\n"
        "    device_type = 'fakedev'\n\n    def test_env(self):\n"
        "        assert os.environ['PYTORCH_TESTING_DEVICE_ONLY_FOR'] == 'fakedev'\n",
    )
    result = instep(
        "run",
        "test_only_for.py",
        "--profile",
        "fakedev",
        "--preimport",
        "none",
        "--device-class",
        "fakedev",
        "--run",
        "of",
    )
    assert result.code == 0, result.err
    assert by_case(show(instep, "of"))["test_env"]["status"] == "passed"


def test_the_cuda_driver_probe_never_loads_the_driver():
    from instep.run.device_probes import cuda_driver_initialised
    from instep.run.process_model import device_initialised

    def driver_mapped() -> bool:
        with open("/proc/self/maps") as fh:
            return "libcuda.so" in fh.read()

    if driver_mapped():
        pytest.skip("this process already loaded a CUDA driver")
    # no driver loaded in this process: nothing can have initialised it
    assert cuda_driver_initialised() is False
    assert not driver_mapped()  # asking did not load it (RTLD_NOLOAD)
    # the profile's probes: unknown or unimported modules say no, and import nothing
    assert device_initialised(["torch_npu_not_installed.npu.is_initialized"]) is False
    assert device_initialised(["instep.run.device_probes.cuda_driver_initialised"]) is False
    assert "torch_npu_not_installed" not in sys.modules
