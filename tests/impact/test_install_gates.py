"""A module-level def used only under one version gate runs only under it (issue #31).

vllm 0.34.0's ``env_override.py`` defines a patch (``should_partition_patched``) that it
installs from another def, itself installed only under ``if is_torch_equal("2.9.0"):``:
the patch's ``isinstance(node, ir.Conditional)`` was a false Shim on torch 2.13 → 2.14,
where that gate is false on both torches. The def now carries the gate of its uses (to a
fixpoint through the def that installs it), and is dead like code written under the gate.
A def also used outside the gate, imported by name or named in another downstream file,
or decorated (the decorator runs at import) keeps no gate and stays a Shim.
"""

from __future__ import annotations

import pytest

from .test_version_helpers import conditional_removed

OVERRIDE = """\
import functools

from torch._inductor import ir
from torch_npu.utils.torch_utils import is_torch_equal, is_torch_equal_or_newer


def should_partition_patched(self, node):
    if isinstance(node, ir.Conditional):
        return True
    return False


def _update_scheduler_patched(self):
    ir.Buffer.should_partition = should_partition_patched


def live_patched(node):
    return isinstance(node, ir.Conditional)


def exported_patched(node):
    return isinstance(node, ir.Conditional)


def named_elsewhere_patched(node):
    return isinstance(node, ir.Conditional)


@functools.lru_cache
def decorated_patched(node):
    return isinstance(node, ir.Conditional)


def future_patched(node):
    return isinstance(node, ir.Conditional)


if is_torch_equal("2.9.0"):
    ir.Buffer.update_scheduler = _update_scheduler_patched
    ir.Buffer.live = live_patched
    ir.Buffer.exported = exported_patched
    ir.Buffer.named = named_elsewhere_patched
    ir.Buffer.decorated = decorated_patched

if is_torch_equal_or_newer("2.15"):
    ir.Buffer.future = future_patched

ir.Buffer.always = live_patched
"""

OTHER = """\
import torch_npu.env_override as eo
from torch_npu.env_override import exported_patched


def use(node):
    return exported_patched(node) or eo.named_elsewhere_patched(node)
"""


@pytest.fixture(scope="module")
def couplings(tmp_path_factory) -> dict[str, dict]:
    downstream = {"torch_npu/env_override.py": OVERRIDE, "torch_npu/other.py": OTHER}
    doc = conditional_removed(tmp_path_factory.mktemp("installs"), downstream)
    return {
        c["owner"]: c
        for u in doc["units"]
        for c in u["couplings"]
        if c["upstream"].endswith("::Conditional") and c["downstream"].startswith("torch_npu/env")
    }


def test_a_patch_installed_only_from_a_def_under_a_dead_gate_is_dead(couplings):
    c = couplings["should_partition_patched"]
    assert (c["rule"], c["action"]) == ("adapted.old_branch", "Check")
    assert c["gate"]["at"] == "torch_npu/env_override.py:38"  # the gate of its installer
    assert "`should_partition_patched` runs only from code under it" in c["gate"]["condition"]


@pytest.mark.parametrize(
    "owner", ["live_patched", "exported_patched", "named_elsewhere_patched", "decorated_patched"]
)
def test_a_def_used_elsewhere_too_keeps_no_gate(couplings, owner):
    # used at module level, imported by name, named as `eo.f` in another file, decorated
    c = couplings[owner]
    assert (c["rule"], c["action"]) == ("removed.breaks", "Shim")
    assert c["gate"] is None


def test_a_def_used_only_under_a_future_gate_carries_it_and_stays_shim(couplings):
    c = couplings["future_patched"]
    assert (c["rule"], c["action"]) == ("removed.breaks", "Shim")
    assert (c["gate"]["min_version"], c["gate"]["max_version"]) == ("2.15", None)
