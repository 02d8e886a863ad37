"""Changes that reach the backend only through upstream code: Check, not Test.

Real git repositories: upstream changes the bodies of members of a class that the
downstream uses; one downstream file calls the changed member, another only builds the
class and hands it to upstream code. The verdict rules (join/verdict_rules.toml) must
keep the first Test and make the second Check.
"""

from __future__ import annotations

import pytest

from .gitrepo import impact_of_one_commit

UTILS_V1 = """
class Buf:
    def __init__(self, name):
        self.name = name

    def size(self):
        return 1

    def __call__(self):
        return self.name


def run(buf):
    return buf.size()
"""

UTILS_V2 = UTILS_V1.replace("return 1", "return 2").replace(
    "return self.name", "return self.name.upper()"
)

DOWN = {
    # builds a Buf and hands it to upstream: never names size
    "torch_npu/_inductor/builds.py": (
        "from torch._inductor.utils import Buf, run\n\n\ndef make():\n    return run(Buf('b'))\n"
    ),
    # calls the changed member itself
    "torch_npu/_inductor/sizes.py": (
        "from torch._inductor.utils import Buf\n\n\ndef numel(name):\n    return Buf(name).size()\n"
    ),
}


@pytest.fixture(scope="module")
def unit(tmp_path_factory):
    doc = impact_of_one_commit(
        tmp_path_factory.mktemp("reach"),
        "torch/_inductor/utils.py",
        UTILS_V1,
        UTILS_V2,
        "[inductor] Buf sizes (#11)",
        DOWN,
    )
    return next(u for u in doc["units"] if u["pr"] == 11)


def _by_file(unit, member: str) -> dict[str, tuple[str, str]]:
    return {
        c["downstream"].split(":")[0].rsplit("/", 1)[1]: (c["action"], c["rule"])
        for c in unit["couplings"]
        if c["upstream"].endswith(f"::Buf.{member}") and c["kind"] == "import_use"
    }


def test_a_changed_member_the_file_never_names_is_check(unit):
    got = _by_file(unit, "size")
    assert got["builds.py"] == ("Check", "use.member_unnamed")


def test_a_file_that_calls_the_changed_member_stays_test(unit):
    assert _by_file(unit, "size")["sizes.py"] == ("Test", "use.behaviour")
    assert unit["action"] == "Test"


def test_a_dunder_called_without_its_name_stays_test(unit):
    # Buf(...)() calls __call__ without naming it: neither file names it, both stay Test
    got = _by_file(unit, "__call__")
    assert got and all(v == ("Test", "use.behaviour") for v in got.values()), got
