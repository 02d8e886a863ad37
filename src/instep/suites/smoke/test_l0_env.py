"""L0: the environment can run compiled code on the device at all.

Import of torch and the backend package, where they were imported from (not a source
tree shadowing the installed package), the backend registered with Dynamo, a device
interface and device op overrides for ``cpu`` and the device, and one trivial compile.
Every case is fast; a failure here makes every later tier meaningless (layer ``env`` or
``registration``).
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path

import pytest


def _shadowed_by_cwd(module_file: str, package: str) -> str | None:
    """Why the imported ``package`` is a source tree in the working directory, or None."""
    origin = Path(module_file).resolve().parent
    cwd = Path(os.getcwd()).resolve()
    if origin != cwd / package:
        return None
    built = any(origin.glob("_C*.so")) or any(origin.glob("_C*.pyd"))
    if package == "torch" and not built:
        return f"{package} imported from the source tree {origin} (no built _C extension)"
    return None


def test_import_torch() -> None:
    # imported in the test: without torch this test fails, not the collection
    import torch

    assert torch.__version__
    problem = _shadowed_by_cwd(torch.__file__, "torch")
    assert problem is None, problem


def test_import_backend_package(suite) -> None:
    package = suite.backend_package
    if not package:
        pytest.skip("the profile names no backend package")
    module = importlib.import_module(package)
    problem = _shadowed_by_cwd(module.__file__ or "", package)
    assert problem is None, problem


def test_backend_registered_with_dynamo(backend: str) -> None:
    # imported in the test: without torch this test fails, not the collection
    import torch._dynamo

    known = torch._dynamo.list_backends(exclude_tags=())
    assert backend in known, f"backend {backend!r} not registered with Dynamo ({len(known)} known)"


@pytest.mark.parametrize("which", ["cpu", "device"])
def test_device_interface(which: str, device: str) -> None:
    # imported in the test: without torch this test fails, not the collection
    from torch._dynamo.device_interface import get_interface_for_device

    name = "cpu" if which == "cpu" else device
    assert get_interface_for_device(name) is not None


@pytest.mark.parametrize("which", ["cpu", "device"])
def test_device_op_overrides(which: str, device: str) -> None:
    # imported in the test: without torch this test fails, not the collection
    from torch._inductor.codegen import common

    name = "cpu" if which == "cpu" else device
    common.init_backend_registration()
    assert common.get_scheduling_for_device(name) is not None, f"no Inductor scheduling for {name}"
    assert common.get_wrapper_codegen_for_device(name) is not None, f"no wrapper codegen for {name}"
    assert common.get_device_op_overrides(name) is not None


def test_device_available(device: str) -> None:
    # imported in the test: without torch this test fails, not the collection
    import torch

    torch.ones(2, device=device).sum().item()


def test_compile_trivial_function(device: str, backend: str) -> None:
    # imported in the test: without torch this test fails, not the collection
    import torch

    from instep.suites.triad import check_triad

    check_triad(lambda x: x + 1, [torch.arange(4.0)], device, backend)
