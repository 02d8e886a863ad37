"""``or`` of version tests (issue #31): a gate is one range of versions, so an ``or``
whose parts cover one range together is a gate (vllm 0.34.0's ``if
is_torch_equal("2.9.0") or is_torch_equal("2.9.1"):``, 2.9.0 up to 2.9.2), and the code
after ``if not newer("2.10") or newer("2.11"): return`` runs from 2.10 up to 2.11 (De
Morgan: the test is false there). Both are dead on torch 2.13 and 2.14. Parts that leave
a gap (``< 2.5 or >= 2.14``) or a part that is not about the version (``or flag``) make
no gate: the code stays a Shim.
"""

from __future__ import annotations

import pytest

from .test_version_helpers import _by_owner, conditional_removed

PATCHES = """\
from torch._inductor import ir
from torch_npu.utils.torch_utils import is_torch_equal, is_torch_equal_or_newer


def patch_either_old():
    if is_torch_equal("2.9.0") or is_torch_equal("2.9.1"):
        return ir.Conditional


def patch_between():
    if not is_torch_equal_or_newer("2.10.0") or is_torch_equal_or_newer("2.11.0"):
        return None
    return ir.Conditional


def patch_gap():
    if not is_torch_equal_or_newer("2.5") or is_torch_equal_or_newer("2.14"):
        return ir.Conditional


def patch_flag(flag):
    if is_torch_equal("2.9.0") or flag:
        return ir.Conditional
"""


@pytest.fixture(scope="module")
def got(tmp_path_factory) -> dict[str, tuple[str, str]]:
    root = tmp_path_factory.mktemp("orgates")
    return _by_owner(conditional_removed(root, {"torch_npu/patches.py": PATCHES}))


@pytest.mark.parametrize("owner", ["patch_either_old", "patch_between"])
def test_an_or_that_covers_one_dead_range_is_a_dead_gate(got, owner):
    assert got[owner] == ("adapted.old_branch", "Check")


@pytest.mark.parametrize("owner", ["patch_gap", "patch_flag"])
def test_an_or_with_a_gap_or_another_test_gates_nothing(got, owner):
    assert got[owner] == ("removed.breaks", "Shim")
