"""A ``try`` import whose ``except ImportError`` fallback asks the new upstream for a
name it lacks too is not a guard: on the new torch the handler raises, so the removal is
``removed.breaks`` (Shim) at the import and at every use, with the fallback quoted.
torch-npu 2.14.0's flex attention falls back to ``torch._inductor.kernel.flex_attention``,
a module torch 2.15.0 no longer has. A fallback that still resolves, or one outside the
upstream package, keeps the guard (``removed.guarded``, Test)."""

from __future__ import annotations

import pytest
from tests.impact.gitrepo import impact_of_commit

FLEX = "torch/_inductor/kernel/flex/flex_attention.py"
COMMON = "torch/_inductor/kernel/flex/common.py"

FLEX_V1 = """\
def get_float32_precision():
    return "ieee"


def process_joint_outputs(graph):
    return graph
"""

FLEX_V2 = """\
def process_joint_outputs(graph):
    return graph
"""

COMMON_V1 = """\
def get_float32_precision():
    return "ieee"
"""


def _downstream(fallback: str) -> str:
    return f"""\
try:
    from torch._inductor.kernel.flex.flex_attention import get_float32_precision
except ImportError:
    {fallback}


def options(kernel_options):
    kernel_options.setdefault("FLOAT32_PRECISION", get_float32_precision())
    return kernel_options
"""


FALLBACKS = {
    # the module the fallback names exists in neither version
    "gone_module.py": "from torch._inductor.kernel.flex_attention import get_float32_precision",
    # the module exists, the name does not
    "gone_name.py": (
        "from torch._inductor.kernel.flex.flex_attention"
        " import get_fp32_precision as get_float32_precision"
    ),
    # the fallback resolves on the new upstream
    "resolves.py": "from torch._inductor.kernel.flex.common import get_float32_precision",
    # the fallback is the downstream's own code
    "own_code.py": "from torch_npu._compat import get_float32_precision",
}


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    downstream = {f"torch_npu/{name}": _downstream(fb) for name, fb in FALLBACKS.items()}
    downstream["torch_npu/_compat.py"] = 'def get_float32_precision():\n    return "ieee"\n'
    doc = impact_of_commit(
        tmp_path_factory.mktemp("fallbacks"),
        {FLEX: FLEX_V1, COMMON: COMMON_V1},
        {FLEX: FLEX_V2},
        "[inductor] move get_float32_precision (#9)",
        downstream,
    )
    got = {}
    for unit in doc["units"]:
        for c in unit["couplings"]:
            if c["upstream"] == f"{FLEX}::get_float32_precision":
                got[c["downstream"].split("/")[-1]] = (c["action"], c["rule"], c["evidence"])
    return got


@pytest.mark.parametrize("name", ["gone_module.py", "gone_name.py"])
def test_a_fallback_the_new_upstream_lacks_too_leaves_the_import_and_its_use_a_shim(rows, name):
    for line in (2, 8):
        action, rule, evidence = rows[f"{name}:{line}"]
        assert (action, rule) == ("Shim", "removed.breaks")
        assert f"fallback of the import at torch_npu/{name}:1" in evidence


def test_the_quoted_name_is_the_one_the_fallback_lacks(rows):
    assert (
        "`torch._inductor.kernel.flex_attention.get_float32_precision`"
        in (rows["gone_module.py:2"][2])
    )


@pytest.mark.parametrize("name", ["resolves.py", "own_code.py"])
def test_a_fallback_that_resolves_or_is_downstream_code_keeps_the_guard(rows, name):
    for line in (2, 8):
        assert rows[f"{name}:{line}"][:2] == ("Test", "removed.guarded")
