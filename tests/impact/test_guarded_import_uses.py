"""A use of a name bound by ``try: from a import x / except ImportError: from b import x``
carries the ``try`` import's gate: the name exists whichever import worked, so a removal
of ``a.x`` is ``removed.guarded`` (Test) at the use as at the import, not a Shim.
torch-npu 2.11.0's torchair binds ``hint_int`` this way (``optimization_hint`` on torch
2.12); a plain import, or a handler that sets the name to ``None``, stays a Shim."""

from __future__ import annotations

import pytest
from tests.impact.gitrepo import impact_of_one_commit

SHAPES_V1 = """\
def hint_int(a, fallback=None):
    return int(a)


def optimization_hint(a, fallback=None):
    return int(a)
"""

SHAPES_V2 = """\
def optimization_hint(a, fallback=None):
    return int(a)
"""

GUARDED = """\
try:
    from torch.fx.experimental.symbolic_shapes import hint_int
except ImportError:
    from torch.fx.experimental.symbolic_shapes import optimization_hint as hint_int


def contiguous(stride):
    return hint_int(stride[0]) == 1
"""

PLAIN = """\
from torch.fx.experimental.symbolic_shapes import hint_int


def contiguous(stride):
    return hint_int(stride[0]) == 1
"""

NONE_FALLBACK = """\
try:
    from torch.fx.experimental.symbolic_shapes import hint_int
except ImportError:
    hint_int = None


def contiguous(stride):
    return hint_int(stride[0]) == 1
"""


@pytest.fixture(scope="module")
def uses(tmp_path_factory):
    doc = impact_of_one_commit(
        tmp_path_factory.mktemp("guarded"),
        "torch/fx/experimental/symbolic_shapes.py",
        SHAPES_V1,
        SHAPES_V2,
        "[fx] remove hint_int (#7)",
        {
            "torch_npu/guarded.py": GUARDED,
            "torch_npu/plain.py": PLAIN,
            "torch_npu/none_fallback.py": NONE_FALLBACK,
        },
    )
    got = {}
    for unit in doc["units"]:
        for c in unit["couplings"]:
            if c["upstream"].endswith("::hint_int") and c["snippet"].startswith("return"):
                got[c["downstream"].split("/")[-1]] = (c["action"], c["rule"])
    return got


def test_a_use_through_a_guarded_import_with_a_fallback_is_not_a_shim(uses):
    assert uses["guarded.py:8"] == ("Test", "removed.guarded")


def test_a_use_through_a_plain_import_is_a_shim(uses):
    assert uses["plain.py:5"] == ("Shim", "removed.breaks")


def test_a_use_whose_fallback_is_none_is_a_shim(uses):
    assert uses["none_fallback.py:8"] == ("Shim", "removed.breaks")
