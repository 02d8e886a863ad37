"""A downstream helper is a torch version gate because of what its body compares, not its
name (issue #31).

``def newer(v): return Version(torch.__version__) >= Version(v)`` in one module gates
``if newer("2.15"):`` / ``if not vu.newer("2.9"):`` in another (the tree index reads the
definition): code under ``not newer("2.9")``, false on both torches, is dead
(``adapted.old_branch``), not a Shim (code under ``newer("2.15")`` will run on a later
torch: the join keeps it a Shim). A helper named like a torch one whose body compares a
driver version gates nothing; a helper imported from a package not in the tree keeps the
name reading.
"""

from __future__ import annotations

import ast

import pytest

from instep.impact.downstream.version_conditions import Conditions, version_helpers

from .gitrepo import impact_of_commit
from .test_version_helpers import IR_V1, IR_V2, _by_owner

HELPERS = """\
import importlib.metadata

import torch
from packaging.version import Version

from torch_npu.utils.driver import get_driver_version


def newer(v):
    return Version(torch.__version__) >= Version(v)


def not_older(target):
    return not older(target)


def older(target):
    current = Version(str(torch.__version__))
    return current < Version(target)


def is_torch_version_ge(v):
    return Version(get_driver_version()) >= Version(v)


def _is_torch_equal(target):
    assert target.count(".") == 2
    torch_version = Version(str(torch.__version__))
    return torch_version >= Version(target) and Version(target + ".1") > torch_version


def is_torch_equal(target):
    try:
        return _is_torch_equal(target)
    except Exception:
        return Version(importlib.metadata.version("torch")) == Version(target)


def installed_newer(v):
    return Version(importlib.metadata.version("torch")) >= Version(v)
"""

DRIVER = "def get_driver_version():\n    return '25.0'\n"

PATCHES = """\
import torch
import torch_npu.utils.vu as vu
from torch._inductor import ir
from torch_npu.utils.vu import installed_newer, is_torch_version_ge, newer, not_older
from vendor_lib.compat import is_torch_equal


def patch_future():
    if newer("2.15"):
        return ir.Conditional


def patch_ancient():
    if not vu.newer("2.9"):
        return ir.Conditional


def patch_through_another_helper():
    if not not_older("2.9"):
        return ir.Conditional


def patch_driver():
    if is_torch_version_ge("2.15"):
        return ir.Conditional


def patch_installed_helper():
    if is_torch_equal("2.9.0"):
        return ir.Conditional


def patch_local():
    if before("2.9"):
        return ir.Conditional


def before(v):
    return torch.__version__ < v


def patch_elif(flag):
    if flag:
        return None
    elif not vu.newer("2.9"):
        return ir.Conditional


def patch_and(flag):
    if not newer("2.9") and flag:
        return ir.Conditional


def patch_assigned():
    new = vu.newer("2.9")
    if not new:
        return ir.Conditional


def patch_or(flag):
    if not newer("2.9") or flag:
        return ir.Conditional


def patch_not_and(flag):
    if not (newer("2.9") and flag):
        return ir.Conditional


def patch_delegated_equal():
    if vu.is_torch_equal("2.9.0"):
        return ir.Conditional


def patch_metadata_future():
    if installed_newer("2.15"):
        return ir.Conditional


def patch_rebound(flag):
    new = newer("2.9")
    if flag:
        new = False
    if not new:
        return ir.Conditional
"""


@pytest.fixture(scope="module")
def doc(tmp_path_factory):
    version = '__version__ = "{}"\n'
    return impact_of_commit(
        tmp_path_factory.mktemp("bodies"),
        {"torch/version.py": version.format("2.13.0"), "torch/_inductor/ir.py": IR_V1},
        {"torch/version.py": version.format("2.14.1"), "torch/_inductor/ir.py": IR_V2},
        "[inductor] drop Conditional (#4)",
        {
            "torch_npu/utils/__init__.py": "",
            "torch_npu/utils/vu.py": HELPERS,
            "torch_npu/utils/driver.py": DRIVER,
            "torch_npu/patches.py": PATCHES,
        },
    )


@pytest.mark.parametrize("owner", ["patch_ancient", "patch_through_another_helper", "patch_local"])
def test_code_under_a_neutrally_named_helper_false_on_both_torches_is_dead(doc, owner):
    assert _by_owner(doc)[owner] == ("adapted.old_branch", "Check")


def test_a_helper_that_delegates_or_reads_the_installed_metadata_reads_the_torch_version(doc):
    """vllm 0.34.0's ``is_torch_equal``: ``try: return _is_torch_equal(t)`` (which reads
    ``torch.__version__``) ``except: ... importlib.metadata.version("torch") ...``: not a
    shape the body reading decides, but no helper of another package either, so its name
    decides: code under ``is_torch_equal("2.9.0")`` is dead on both torches (it was a
    false Shim). ``importlib.metadata.version("torch")`` is the torch version."""
    assert _by_owner(doc)["patch_delegated_equal"] == ("adapted.old_branch", "Check")
    gates = {
        c["owner"]: c["gate"]
        for u in doc["units"]
        for c in u["couplings"]
        if c["upstream"].endswith("::Conditional")
    }
    gate = gates["patch_metadata_future"]
    assert (gate["min_version"], gate["max_version"]) == ("2.15", None)


@pytest.mark.parametrize("owner", ["patch_elif", "patch_and", "patch_assigned"])
def test_an_imported_helper_gates_elif_a_conjunction_and_a_local_bound_to_it(doc, owner):
    # `elif not newer("2.9")`, `not newer("2.9") and flag`, `new = newer("2.9")` … `if not
    # new`: the body needs torch < 2.9, false on both torches
    assert _by_owner(doc)[owner] == ("adapted.old_branch", "Check")


@pytest.mark.parametrize("owner", ["patch_or", "patch_not_and", "patch_rebound"])
def test_a_test_the_helper_does_not_decide_gates_nothing(doc, owner):
    # `... or flag` and `not (newer(...) and flag)` run whenever flag says so; a local
    # bound twice may hold something else
    assert _by_owner(doc)[owner][1] == "Shim"


def test_a_helper_in_another_module_gates_with_the_range_its_body_compares(doc):
    gates = {
        c["owner"]: c["gate"]
        for u in doc["units"]
        for c in u["couplings"]
        if c["upstream"].endswith("::Conditional")
    }
    assert (gates["patch_future"]["min_version"], gates["patch_future"]["max_version"]) == (
        "2.15",
        None,
    )
    assert gates["patch_driver"] is None


def test_a_helper_comparing_a_driver_version_is_no_gate(doc):
    assert _by_owner(doc)["patch_driver"][1] == "Shim"


def test_a_helper_of_a_package_not_in_the_tree_keeps_the_name_reading(doc):
    assert _by_owner(doc)["patch_installed_helper"] == ("adapted.old_branch", "Check")


def test_helpers_are_read_from_their_bodies():
    specs, other = version_helpers(ast.parse(HELPERS))
    assert set(specs) == {"newer", "older", "not_older", "installed_newer"}
    assert other == {"is_torch_version_ge"}  # is_torch_equal and its delegate read it too
    assert version_helpers(ast.parse(HELPERS), HELPERS) == (specs, other)
    conds = Conditions()
    conds.helpers, conds.not_helpers = specs, other

    def rng(expr: str):
        return conds.range_of(ast.parse(expr, mode="eval").body)

    assert rng('newer("2.10")') == ((2, 10), None)
    assert rng('newer(v="2.10")') == ((2, 10), None)
    assert rng('older("2.10")') == (None, (2, 10))
    assert rng('not_older("2.10")') == ((2, 10), None)
    assert rng('is_torch_version_ge("2.10")') is None
    assert rng('is_torch_version_gt("2.10")') == ((2, 11), None)  # not defined: the name


def test_a_module_flag_and_a_refusal_over_the_module_s_own_helper():
    from instep.impact.downstream.version_refusals import refusals_in, version_flags

    source = HELPERS + (
        '\n\nIS_NEW = newer("2.14")\nDRIVER_NEW = is_torch_version_ge("2.14")\n\n'
        'if older("2.9"):\n    raise RuntimeError("torch >= 2.9 needed")\n'
    )
    tree = ast.parse(source)
    flags = version_flags(tree, source)
    assert set(flags) == {"IS_NEW"}  # the driver helper's result is no torch flag
    assert [r.line for r in refusals_in(tree, "vu.py", source)] == [
        source.split("\n").index('    raise RuntimeError("torch >= 2.9 needed")') + 1
    ]  # the statement that refuses
