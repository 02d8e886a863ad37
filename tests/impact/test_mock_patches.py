"""``unittest.mock.patch.object(Cls, "name", new)`` and ``patch("dotted.name", new)`` replace
an upstream attribute as ``setattr`` does, while active (a context manager, a decorator or
``.start()``). IPEX 6d3ba89cf puts its scheduling in place with ``patch.object(Scheduler,
"get_backend", ...)`` (``_inductor/compile_fx.py:44``). A signature change of the patched
method must reach the replacement; a patcher of another attribute, or one that puts a
MagicMock there (no replacement), is no patch of it. Unlike an assignment, a patcher reads
the original when it starts, so a removed name breaks it (unless ``create=True``)."""

from __future__ import annotations

import pytest
from tests.impact.gitrepo import impact_of_commit

SCHED = "torch/_inductor/scheduler.py"

V1 = """\
class Scheduler:
    def get_backend(self, device):
        return device

    def old_hook(self):
        return None

    def flush(self):
        return None

    def codegen(self, device):
        return self.get_backend(device)
"""

V2 = """\
class Scheduler:
    def get_backend(self, device, *, fused=False):
        return device

    def flush(self):
        return None

    def codegen(self, device):
        return self.get_backend(device, fused=True)
"""

HEAD = "from unittest.mock import patch\n\nfrom torch._inductor.scheduler import Scheduler\n\n\n"
REPL = "def my_get_backend(self, device):\n    return device\n\n\n"

DOWNSTREAM = {
    "dev/setattr_form.py": f"{HEAD}{REPL}setattr(Scheduler, 'get_backend', my_get_backend)\n",
    "dev/with_form.py": f"{HEAD}{REPL}def compile_it(gm):\n"
    "    with patch.object(Scheduler, 'get_backend', my_get_backend):\n        return gm\n",
    "dev/decorator_form.py": f"{HEAD}{REPL}@patch.object(Scheduler, 'get_backend', "
    "new=my_get_backend)\ndef compile_it(gm):\n    return gm\n",
    "dev/start_form.py": "from unittest import mock\n\n\n"
    f"{REPL}mock.patch('torch._inductor.scheduler.Scheduler.get_backend', "
    "my_get_backend).start()\n",
    # negatives: another attribute; a MagicMock (no replacement)
    "dev/other_attr.py": f"{HEAD}{REPL}def compile_it(gm):\n"
    "    with patch.object(Scheduler, 'flush', my_get_backend):\n        return gm\n",
    "dev/mock_only.py": f"{HEAD}def compile_it(gm):\n"
    "    with patch.object(Scheduler, 'get_backend'):\n        return gm\n",
    # a removed method: assigned (cannot fail) vs patched (the patcher reads it first)
    "dev/removed_assign.py": f"{HEAD}{REPL}Scheduler.old_hook = my_get_backend\n",
    "dev/removed_patch.py": f"{HEAD}{REPL}def compile_it(gm):\n"
    "    with patch.object(Scheduler, 'old_hook', my_get_backend):\n        return gm\n",
    "dev/removed_create.py": f"{HEAD}{REPL}def compile_it(gm):\n"
    "    with patch.object(Scheduler, 'old_hook', my_get_backend, create=True):\n"
    "        return gm\n",
}


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    doc = impact_of_commit(
        tmp_path_factory.mktemp("mock"),
        {SCHED: V1},
        {SCHED: V2},
        "[inductor] get_backend: fused (#1)",
        DOWNSTREAM,
    )
    got: dict[tuple[str, str], dict] = {}
    for unit in doc["units"]:
        for c in unit["couplings"]:
            if c["kind"] == "monkeypatch":
                member = c["upstream"].rsplit(".", 1)[-1]
                got[(c["downstream"].split("/")[-1].split(":")[0], member)] = c
    return got


@pytest.mark.parametrize("name", ["with_form.py", "decorator_form.py", "start_form.py"])
def test_mock_patch_is_judged_as_setattr(rows, name):
    c, ref = rows[(name, "get_backend")], rows[("setattr_form.py", "get_backend")]
    assert (ref["action"], ref["rule"]) == ("Shim", "signature.replacement_breaks")
    assert (c["action"], c["rule"]) == (ref["action"], ref["rule"])
    assert "scheduler.py:9" in c["evidence"] and "fused" in c["evidence"]
    assert c["detail"].startswith("patch")


@pytest.mark.parametrize("name", ["other_attr.py", "mock_only.py"])
def test_no_patch_of_get_backend(rows, name):
    assert (name, "get_backend") not in rows


def test_removed_name_breaks_a_patcher_but_not_an_assignment(rows):
    assigned = rows[("removed_assign.py", "old_hook")]
    patched = rows[("removed_patch.py", "old_hook")]
    created = rows[("removed_create.py", "old_hook")]
    assert (assigned["action"], assigned["rule"]) == ("Test", "removed.patch_dead")
    assert (patched["action"], patched["rule"]) == ("Shim", "removed.breaks")
    assert (created["action"], created["rule"]) == ("Test", "removed.patch_dead")
