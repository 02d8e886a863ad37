"""The downstream's own version helpers are gates; other versions are not (issue #31).

A serving engine keeps its torch patches under helpers it defines over
``torch.__version__`` (``is_torch_equal("2.9.0")``, ``is_torch_equal_or_newer("2.10")``):
code under a helper that is false on both torches is dead (``adapted.old_branch``, not a
Shim: a removed upstream name used only there breaks nothing), and the helper's gates are
compat debt. A model config's ``version == (2, 0)``, the downstream's own ``__version__``
and another package's version (``cann_version``) are not about torch: no gate, no debt.
When the oldest supported torch is only assumed (no ``--min-supported``), compat debt
does not say "remove" without saying what that needs.
"""

from __future__ import annotations

import pytest

from .gitrepo import impact_of_commit

IR_V1 = "class Conditional:\n    pass\n\n\nclass Buffer:\n    pass\n"
IR_V2 = "class Buffer:\n    pass\n"

HELPERS = """\
import torch
from packaging import version


def is_torch_equal(target):
    torch_version = version.parse(str(torch.__version__))
    return torch_version >= version.parse(target) and version.parse(target + ".1") > torch_version


def is_torch_equal_or_newer(target):
    return version.parse(str(torch.__version__)) >= version.parse(target)
"""

PATCHES = """\
import torch_npu
from torch._inductor import ir
from torch_npu.utils.torch_utils import is_torch_equal, is_torch_equal_or_newer


def patch_old():
    if is_torch_equal("2.9.0"):
        return ir.Conditional


def patch_now():
    return ir.Conditional


def newer():
    if is_torch_equal_or_newer("2.10"):
        return ir.Buffer


def model_config(config):
    if config.version == (2, 0):
        return 1
    if torch_npu.__version__ >= "2.0":
        return 2
"""


def conditional_removed(root, downstream: dict[str, str]):
    """The report of torch 2.13.0 -> 2.14.1 removing ``ir.Conditional``, on a downstream
    with :data:`HELPERS` as ``torch_npu/utils/torch_utils.py`` and the files given."""
    version = '__version__ = "{}"\n'
    return impact_of_commit(
        root,
        {"torch/version.py": version.format("2.13.0"), "torch/_inductor/ir.py": IR_V1},
        {"torch/version.py": version.format("2.14.1"), "torch/_inductor/ir.py": IR_V2},
        "[inductor] drop Conditional (#4)",
        {
            "torch_npu/utils/__init__.py": "",
            "torch_npu/utils/torch_utils.py": HELPERS,
            **downstream,
        },
    )


@pytest.fixture(scope="module")
def doc(tmp_path_factory):
    root = tmp_path_factory.mktemp("helpers")
    return conditional_removed(root, {"torch_npu/patches.py": PATCHES})


def _by_owner(doc) -> dict[str, tuple[str, str]]:
    return {
        c["owner"]: (c["rule"], c["action"])
        for u in doc["units"]
        for c in u["couplings"]
        if c["upstream"].endswith("::Conditional")
    }


def test_code_under_a_helper_false_on_both_torches_is_dead(doc):
    got = _by_owner(doc)
    assert got["patch_old"] == ("adapted.old_branch", "Check")


def test_the_same_use_without_the_helper_stays_shim(doc):
    assert _by_owner(doc)["patch_now"][1] == "Shim"


def test_only_torch_gates_are_compat_debt(doc):
    debt = {d["at"].split(":")[1]: d for d in doc["compat_debt"]}
    lines = PATCHES.split("\n")
    where = {n + 1: line.strip() for n, line in enumerate(lines)}
    found = {where[int(k)] for k in debt}
    assert 'if is_torch_equal("2.9.0"):' in found
    assert 'if is_torch_equal_or_newer("2.10"):' in found
    assert "if config.version == (2, 0):" not in found
    assert 'if torch_npu.__version__ >= "2.0":' not in found


def test_remove_is_said_with_what_it_needs(doc):
    for d in doc["compat_debt"]:
        if "remove" in d["reason"] or "drop" in d["reason"]:
            assert "if the downstream supports no torch older than 2.13.0" in d["reason"]


# A module whose defs the text filter of version_helpers must read as a walk does: a form
# feed (a line break for str.splitlines, none for the parser) before them, a decorator
# that reads the version, a non-ASCII def, and defs that never read it.
FILTERED = (
    "import torch\n\f\n"
    "def plain(x):\n    return x + 1\n\n"
    "@functools.lru_cache(torch.__version__ > '2')\ndef decorated():\n    return 1\n\n"
    "def cann_version():\n    return '8.0'\n\n"
    "def torch_214():\n    return torch.__version__ >= '2.14'\n\n"
    "def caf\u00e9():\n    v = torch.__version__\n    return v\n\n"
    "def late(x):\n    x = 1\n    return torch.__version__ if x else None\n"
)


def test_the_text_filter_of_version_helpers_agrees_with_the_walk():
    import ast

    from instep.impact.downstream.version_conditions import version_helpers

    tree = ast.parse(FILTERED)
    walked = version_helpers(tree)
    assert version_helpers(tree, FILTERED) == walked
    assert walked[1] == {"plain", "cann_version"}  # the others read it
