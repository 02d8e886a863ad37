"""A method removed from a class that now derives from an extension type is not removed
when the extension's stubs declare it (torch_musa #33-41: ``_StreamBase(torch.Stream)``,
whose members now come from ``torch._C.Stream``): Test, with the stub as evidence. A
method the stub class does not declare is removed: ``removed.breaks`` where the override
calls the original, a dead override (Test) where it does not.
"""

from __future__ import annotations

from .gitrepo import impact_of_commit

BASE_V1 = """\
class _StreamBase:
    def query(self):
        raise NotImplementedError

    def synchronize(self):
        raise NotImplementedError

    def legacy_handle(self):
        raise NotImplementedError
"""

BASE_V2 = """\
import torch


class _StreamBase(torch.Stream):
    pass
"""

TORCH_INIT = """\
import os

if os.environ.get("GLOBAL_DEPS"):
    from torch._C import *
else:
    from torch._C import *
"""

STUBS = """\
class Stream:
    device_index: int

    def query(self) -> bool: ...
    def synchronize(self) -> None: ...
"""

DOWN = """\
from torch._streambase import _StreamBase


class Stream(_StreamBase):
    def query(self):
        return True

    def synchronize(self):
        super().synchronize()

    def legacy_handle(self):
        return 0
"""


def _actions(tmp_path, stubs):
    before = {"torch/__init__.py": TORCH_INIT, "torch/_streambase.py": BASE_V1}
    after = {"torch/_streambase.py": BASE_V2}
    if stubs is not None:
        before["torch/_C/__init__.pyi"] = stubs
    doc = impact_of_commit(
        tmp_path, before, after, "streams from torch._C", {"torch_musa/core/stream.py": DOWN}
    )
    return {
        c["upstream"].split("::")[1]: (c["action"], c["rule"], c["evidence"])
        for u in doc["units"]
        for c in u["couplings"]
        if c["kind"] == "subclass_override" and "." in c["upstream"].split("::")[1]
    }


def test_members_the_extension_stubs_declare_are_inherited_not_removed(tmp_path):
    got = _actions(tmp_path, STUBS)
    assert got["_StreamBase.query"][:2] == ("Test", "removed.inherited_from_extension")
    assert "torch/_C/__init__.pyi" in got["_StreamBase.query"][2]
    # declared by the stub: super().synchronize() finds it there
    assert got["_StreamBase.synchronize"][:2] == ("Test", "removed.inherited_from_extension")
    # not declared: an override that does not call the original is dead, nothing raises
    assert got["_StreamBase.legacy_handle"][:2] == ("Test", "removed.dead_override")


def test_without_stubs_the_members_stay_removed(tmp_path):
    got = _actions(tmp_path, None)
    assert got["_StreamBase.synchronize"][:2] == ("Shim", "removed.breaks")  # super() raises
    assert got["_StreamBase.query"][:2] == ("Test", "removed.dead_override")
    assert got["_StreamBase.legacy_handle"][:2] == ("Test", "removed.dead_override")
