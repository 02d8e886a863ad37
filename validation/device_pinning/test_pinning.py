"""Device-pinning validation suite (issue 8), run by `instep run` on a GPU machine.

Each case records how many devices its process sees and the UUID of the device it ran
on, as a warning line the runner stores with the outcome; one case kills its own process
with a device-side assert. Not part of CI (no GPU there): see docs/validation/.
"""

import os

import pytest
import torch

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


def _report() -> str:
    props = torch.cuda.get_device_properties(0)
    line = (
        f"INSTEP-DEVICE pid={os.getpid()} count={torch.cuda.device_count()} "
        f"uuid={props.uuid} visible={os.environ.get('CUDA_VISIBLE_DEVICES')}"
    )
    print(line)
    log = os.environ.get("INSTEP_PIN_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as fh:
            fh.write(line + "\n")
    return line


@pytest.mark.parametrize("i", range(8))
def test_sees_exactly_one_device(i):
    x = torch.ones(1024, device="cuda") * i
    torch.cuda.synchronize()
    line = _report()
    assert torch.cuda.device_count() == 1, line
    assert float(x.sum()) == 1024.0 * i


def test_device_side_assert_kills_only_itself():
    """A sticky CUDA error, then the process dies the way device runtimes abort on one."""
    _report()
    idx = torch.tensor([5], device="cuda")
    x = torch.zeros(2, device="cuda")
    try:
        x[idx] = 1.0  # out of range: a device-side assert
        torch.cuda.synchronize()
    except RuntimeError as exc:
        print(f"INSTEP-CUDA-ERROR {exc}")
        os.abort()  # SIGABRT: the case's process is gone, its context with it
