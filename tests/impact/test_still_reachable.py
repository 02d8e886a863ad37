"""A name the new upstream module no longer defines is not removed for the downstream when
the module still answers it: a module-level ``__getattr__``, or a class that became an
instance of another class that still has the member (``X = _X()``).

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
