"""Code behind a flag the module set in a version check carries that check as its gate.
DICP 9dd38082's ``compile_fx.py:18-25`` sets ``is_torch_210 = True`` under
``elif torch.__version__.startswith("2.1"):`` and guards code with ``if is_torch_210:``
(``:40-42``); that code runs only on 2.1, so on torch 2.2.0 it is the old branch, not a
break. A prefix is no range ("2.10" starts with "2.1"), so the join decides the flag's
condition on the new version itself. A flag set by no version check gates nothing.
A flag imported from the module that sets it (DICP's ``op_transformer.py:8`` ``from
dicp.dynamo_bridge.compile_fx import is_torch_210``) gates the same way; a same-named
flag imported from a module that sets it from anything else gates nothing."""

from __future__ import annotations

from textwrap import indent

import pytest
from tests.impact.gitrepo import impact_of_commit

UTILS_V1 = "def detect_fake_mode(inputs=None):\n    return inputs\n"
# a required keyword-only parameter: a call with one argument stops binding
UTILS_V2 = "def detect_fake_mode(inputs=None, *, strict):\n    return inputs\n"

FLAGS = """\
import torch

is_torch_200 = False
is_torch_210 = False
if torch.__version__.startswith("2.0"):
    is_torch_200 = True
elif torch.__version__.startswith("2.1"):
    is_torch_210 = True
IS_21 = torch.__version__.startswith("2.1")
"""

USE = """\
def fake_mode(x):
    from torch._dynamo.utils import detect_fake_mode

    return detect_fake_mode(x)
"""

DOWNSTREAM = {
    # set in an elif branch of a version chain, used in the same module
    "dev/chain.py": FLAGS + "\n\nif is_torch_210:\n" + indent(USE, "    "),
    # assigned the version test itself, negated, with an else branch
    "dev/direct.py": FLAGS + "\n\nif not IS_21:\n    pass\nelse:\n" + indent(USE, "    "),
    # the flags module of the package; the flags imported by name and through a module alias
    "dev/flags.py": FLAGS,
    "dev/imported.py": "from dev.flags import is_torch_210\n\n\nif is_torch_210:\n"
    + indent(USE, "    "),
    "dev/aliased.py": "import dev.flags as m\n\n\nif not m.IS_21:\n    pass\nelse:\n"
    + indent(USE, "    "),
    # a same-named flag from a module that sets it from an environment variable: no gate
    "dev/envflags.py": "import os\n\nis_torch_210 = os.environ.get('X') == '1'\n",
    "dev/imported_env.py": "from dev.envflags import is_torch_210\n\n\nif is_torch_210:\n"
    + indent(USE, "    "),
    # a flag no version check sets: no gate
    "dev/plain.py": "import os\n\nDEBUG = os.environ.get('X') == '1'\n\nif DEBUG:\n"
    + indent(USE, "    "),
}


def _rows(tmp, new_version: str) -> dict[str, dict]:
    doc = impact_of_commit(
        tmp,
        {"torch/version.py": "__version__ = '2.1.1'\n", "torch/_dynamo/utils.py": UTILS_V1},
        {
            "torch/version.py": f"__version__ = '{new_version}'\n",
            "torch/_dynamo/utils.py": UTILS_V2,
        },
        "[dynamo] detect_fake_mode: strict (#1)",
        DOWNSTREAM,
    )
    got = {}
    for unit in doc["units"]:
        for c in unit["couplings"]:
            if c["upstream"].endswith("::detect_fake_mode") and c["snippet"].startswith("return"):
                got[c["downstream"].split("/")[-1].split(":")[0]] = c
    return got


@pytest.fixture(scope="module")
def on_22(tmp_path_factory):
    return _rows(tmp_path_factory.mktemp("flag22"), "2.2.0")


@pytest.mark.parametrize("name", ["chain.py", "direct.py", "imported.py", "aliased.py"])
def test_code_behind_a_version_flag_false_on_the_new_version_is_the_old_branch(on_22, name):
    c = on_22[name]
    assert (c["rule"], c["action"]) == ("adapted.old_branch", "Check")
    assert c["gate"]["kind"] == "version_flag"


@pytest.mark.parametrize("name", ["plain.py", "imported_env.py"])
def test_flag_set_by_no_version_check_gates_nothing(on_22, name):
    c = on_22[name]
    assert c["gate"] is None
    assert (c["rule"], c["action"]) == ("signature.call_breaks", "Shim")


def test_prefix_flag_holds_on_2_10(tmp_path_factory):
    """startswith("2.1") is true on 2.10: the flagged code runs there, so it is no old branch."""
    got = _rows(tmp_path_factory.mktemp("flag210"), "2.10.0")
    assert got["chain.py"]["rule"] == "adapted.version_gate"
    assert got["direct.py"]["rule"] == "adapted.version_gate"
    assert got["imported.py"]["rule"] == "adapted.version_gate"
    assert got["aliased.py"]["rule"] == "adapted.version_gate"
