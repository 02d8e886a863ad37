"""A name the new upstream module no longer defines is not removed for the downstream when
the module still answers it: a module-level ``__getattr__``, a class that became an
instance of another class that still has the member (``X = _X()``), or a def or class in a
branch of a module-level ``if``/``try`` (not the body of ``if TYPE_CHECKING:``).

One real upstream git commit removes two functions and turns a class into an instance;
the downstream imports and calls them. A plain removal next to them stays Shim.
"""

from __future__ import annotations

from .gitrepo import impact_of_commit

MOD_V1 = """\
def old_fn(x):
    return x


def gone_fn(x):
    return x
"""

MOD_V2 = """\
def gone_fn(x):
    return x


def __getattr__(name):
    if name == "old_fn":
        return lambda x: x
    raise AttributeError(name)
"""

REG_V1 = """\
class Registry:
    @staticmethod
    def lookup(key):
        return key


def dropped(x):
    return x
"""

REG_V2 = """\
class _Registry:
    def lookup(self, key):
        return key


Registry = _Registry()
"""

DOWN = """\
from torch._inductor.mod import old_fn
from torch._inductor.reg import Registry, dropped


def use(x):
    return old_fn(x) + Registry.lookup(x) + dropped(x)
"""


def test_names_a_module_still_answers_are_not_removed(tmp_path):
    doc = impact_of_commit(
        tmp_path,
        {"torch/_inductor/mod.py": MOD_V1, "torch/_inductor/reg.py": REG_V1},
        {"torch/_inductor/mod.py": MOD_V2, "torch/_inductor/reg.py": REG_V2},
        "module __getattr__, class to instance",
        {"torch_npu/_inductor/use.py": DOWN},
    )
    shims = {
        c["upstream"].split("::")[1]
        for u in doc["units"]
        for c in u["couplings"]
        if c["action"] == "Shim"
    }
    assert "dropped" in shims  # a plain removal still breaks the import
    assert "old_fn" not in shims  # mod.__getattr__ answers it
    assert "Registry.lookup" not in shims  # Registry is an instance of _Registry


UTILS_V1 = """\
def is_compiling():
    return False


def only_typed():
    return 1


def swapped():
    return 2
"""

UTILS_V2 = """\
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    def only_typed(): ...
else:
    def is_compiling():
        return False

try:
    import fast_impl
except ImportError:
    class swapped:
        pass
"""

DOWN_BRANCHES = """\
from torch._utils import is_compiling, only_typed, swapped


def use(x):
    return is_compiling() or swapped or only_typed()
"""


def test_a_definition_in_a_branch_of_a_module_level_if_or_try_still_binds_the_name(tmp_path):
    doc = impact_of_commit(
        tmp_path,
        {"torch/_utils.py": UTILS_V1},
        {"torch/_utils.py": UTILS_V2},
        "is_compiling under if TYPE_CHECKING/else",
        {"torch_npu/optim/use.py": DOWN_BRANCHES},
    )
    shims = {
        c["upstream"].split("::")[1]
        for u in doc["units"]
        for c in u["couplings"]
        if c["action"] == "Shim"
    }
    assert "is_compiling" not in shims  # defined in the else: of if TYPE_CHECKING
    assert "swapped" not in shims  # defined in the except: of a try
    assert "only_typed" in shims  # the body of if TYPE_CHECKING never runs
    removed = {
        c["symbol"].split("::")[1]
        for u in doc["units"]
        for c in u["changes"]
        if c["change"] == "removed"
    }
    assert {"is_compiling", "swapped"} <= removed  # the symbol diff still says removed


def test_a_block_binds_only_what_its_branches_define(tmp_path):
    """The negative case: a removed function next to an ``if`` that defines other names."""
    doc = impact_of_commit(
        tmp_path,
        {"torch/_utils.py": UTILS_V1},
        {"torch/_utils.py": "if True:\n    def unrelated():\n        return 0\n"},
        "is_compiling removed",
        {"torch_npu/optim/use.py": "from torch._utils import is_compiling\n"},
    )
    shims = {
        c["upstream"].split("::")[1]
        for u in doc["units"]
        for c in u["couplings"]
        if c["action"] == "Shim"
    }
    assert "is_compiling" in shims
