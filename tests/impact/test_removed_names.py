"""A removed or renamed upstream name is Shim only where the downstream *reads* it and
nothing keeps the read working: an assignment cannot fail, a name the new module still
imports (from a Python module or an extension such as ``torch._C``) is still there, and a
downstream re-export behind a version gate for the new torch is already adapted.

One real upstream git commit removes names in three files; the downstream reads, assigns,
re-exports behind a gate, and uses them through a module that now imports them.
"""

from __future__ import annotations

import pytest

from .gitrepo import impact_of_commit

TRITON_V1 = """\
def _supports_tma(device):
    return True


def _supports_pinned(device):
    return False


class Probe:
    def check(self):
        return True
"""

TRITON_V2 = """\
def _supports_descriptor(device):
    return True
"""

FAKE_PG_V1 = """\
class FakeStore:
    pass


class FakeGroup:
    pass
"""

# FakeStore moves to C++ and is re-exported; FakeGroup goes away
FAKE_PG_V2 = """\
from torch._C._c10d import FakeStore

__all__ = ["FakeStore"]
"""

MATRIX_V1 = """\
def _mm_like(op):
    return op


def _bmm_like(op):
    return op
"""

MATRIX_V2 = """\
def _einsum(op):
    return op
"""

DOWN_PATCHES = """\
from torch._inductor import triton_utils


def patch_tma():
    triton_utils._supports_tma = lambda device: True


_orig = triton_utils._supports_pinned


def patch_probe():
    triton_utils.Probe.check = lambda self: False
"""

DOWN_FAKE = """\
from torch._inductor import fake_pg


def store():
    return fake_pg.FakeStore()


def group():
    return fake_pg.FakeGroup()
"""

DOWN_COMPAT = """\
import torch

CURRENT_VERSION = tuple(int(p) for p in torch.__version__.split(".")[:2])

if CURRENT_VERSION >= (2, 14):
    def _mm_like(op):
        return op
else:
    from torch._inductor.matrix import _mm_like

from torch._inductor.matrix import _bmm_like
"""

DOWN_USER = """\
from torch_npu._compat.matrix import _bmm_like, _mm_like


def strategies():
    return _mm_like(1), _bmm_like(2)
"""


@pytest.fixture(scope="module")
def couplings(tmp_path_factory) -> dict[str, list[dict]]:
    files_v1 = {
        "torch/version.py": '__version__ = "2.13.0"\n',
        "torch/_inductor/triton_utils.py": TRITON_V1,
        "torch/_inductor/fake_pg.py": FAKE_PG_V1,
        "torch/_inductor/matrix.py": MATRIX_V1,
    }
    files_v2 = {
        "torch/version.py": '__version__ = "2.14.0"\n',
        "torch/_inductor/triton_utils.py": TRITON_V2,
        "torch/_inductor/fake_pg.py": FAKE_PG_V2,
        "torch/_inductor/matrix.py": MATRIX_V2,
    }
    doc = impact_of_commit(
        tmp_path_factory.mktemp("removed"),
        files_v1,
        files_v2,
        "remove names",
        {
            "torch_npu/_inductor/patches.py": DOWN_PATCHES,
            "torch_npu/_inductor/fake.py": DOWN_FAKE,
            "torch_npu/_compat/__init__.py": "",
            "torch_npu/_compat/matrix.py": DOWN_COMPAT,
            "torch_npu/_inductor/user.py": DOWN_USER,
        },
    )
    out: dict[str, list[dict]] = {}
    for unit in doc["units"]:
        for c in unit["couplings"]:
            out.setdefault(c["upstream"].split("::")[1], []).append(c)
    return out


def _at(cs: list[dict], where: str) -> dict:
    return next(c for c in cs if c["downstream"] == where)


def test_an_assignment_to_a_removed_name_is_a_dead_patch_not_a_break(couplings):
    c = _at(couplings["_supports_tma"], "torch_npu/_inductor/patches.py:5")
    assert (c["kind"], c["action"], c["rule"]) == ("monkeypatch", "Test", "removed.patch_dead")


def test_reading_a_removed_name_is_still_shim(couplings):
    c = _at(couplings["_supports_pinned"], "torch_npu/_inductor/patches.py:8")
    assert (c["action"], c["rule"]) == ("Shim", "removed.breaks")
    assert c["evidence"].startswith("at torch_npu/_inductor/patches.py:8 (`")
    assert (
        "the new upstream no longer has `" in c["evidence"]
        and "nothing guards it" in (c["evidence"])
    )


def test_a_patch_on_a_removed_class_reads_the_class_and_breaks(couplings):
    cs = [c for c in couplings["Probe.check"] if c["kind"] == "monkeypatch"]
    assert cs and all((c["action"], c["rule"]) == ("Shim", "removed.breaks") for c in cs)


def test_a_class_the_new_module_imports_from_an_extension_is_not_removed(couplings):
    assert not [c for c in couplings.get("FakeStore", []) if c["action"] == "Shim"]
    # the sibling that really went away still breaks its downstream use
    c = _at(couplings["FakeGroup"], "torch_npu/_inductor/fake.py:9")
    assert (c["action"], c["rule"]) == ("Shim", "removed.breaks")


def test_a_use_through_a_gated_reexport_carries_the_gate(couplings):
    c = _at(couplings["_mm_like"], "torch_npu/_inductor/user.py:1")
    assert (c["action"], c["rule"]) == ("Check", "adapted.old_branch")
    assert c["gate"]["at"] == "torch_npu/_compat/matrix.py:5"
    # an ungated re-export of a removed name is still a break at its user
    c = next(
        c
        for c in couplings["_bmm_like"]
        if c["downstream"].startswith("torch_npu/_inductor/user.py")
    )
    assert (c["action"], c["rule"]) == ("Shim", "removed.breaks") and c["gate"] is None
