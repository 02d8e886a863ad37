"""Changes that reach the backend only through upstream code: Check, not Test.

Real git repositories: upstream changes the bodies of members of a class that the
downstream uses or subclasses, of a function it imports and of a value it imports. A
downstream place that calls the changed code, copies the value, or whose overrides the
changed code calls stays Test; a class use or subclass whose file never names the changed
member, and the import line of a changed function, are Check (join/verdict_rules.toml).
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


WRAPPER_V1 = """
class Base:
    def helper(self):
        return 1

    def emit(self):
        return self.line()

    def line(self):
        return "a"

    def step(self):
        return 2


def make():
    return 1


LIMIT = 1
"""

WRAPPER_V2 = (
    WRAPPER_V1.replace("return 1\n\n    def emit", "return 10\n\n    def emit")
    .replace("return self.line()", "return self.line() + ''")
    .replace("return 2", "return 3")
    .replace("def make():\n    return 1", "def make():\n    return 2")
    .replace("LIMIT = 1", "LIMIT = 2")
)

SUBCLASSES = {
    # overrides line, which the changed emit calls; never names helper nor emit
    "torch_npu/_inductor/npu.py": (
        "from torch._inductor.wrapper import Base\n\n\n"
        "class NPU(Base):\n    def line(self):\n        return 'npu'\n"
    ),
    # calls the inherited step itself
    "torch_npu/_inductor/npu2.py": (
        "from torch._inductor.wrapper import Base\n\n\n"
        "class NPU2(Base):\n    def go(self):\n        return self.step()\n"
    ),
    "torch_npu/_inductor/runs.py": (
        "from torch._inductor.wrapper import make\n"
        "from torch._inductor.wrapper import LIMIT\n\n\n"
        "def run():\n    return make() + LIMIT\n"
    ),
}


@pytest.fixture(scope="module")
def wrapper_unit(tmp_path_factory):
    doc = impact_of_one_commit(
        tmp_path_factory.mktemp("inherit"),
        "torch/_inductor/wrapper.py",
        WRAPPER_V1,
        WRAPPER_V2,
        "[inductor] wrapper lines (#12)",
        SUBCLASSES,
    )
    unit = next(u for u in doc["units"] if u["pr"] == 12)
    return {
        (c["upstream"].split("::")[1], c["downstream"].split("/")[-1], c["kind"]): (
            c["action"],
            c["rule"],
        )
        for c in unit["couplings"]
    }


def test_an_inherited_member_only_upstream_calls_is_check(wrapper_unit):
    assert wrapper_unit[("Base.helper", "npu.py:4", "inherited_path")] == (
        "Check",
        "inherited.member_unnamed",
    )


def test_an_inherited_member_that_calls_an_override_stays_test(wrapper_unit):
    # the new emit calls self.line(), which NPU overrides: upstream code meets the backend's
    assert wrapper_unit[("Base.emit", "npu.py:4", "inherited_path")] == ("Test", "inherited.path")
    # NPU2 overrides nothing emit calls: there it is Check
    assert wrapper_unit[("Base.emit", "npu2.py:4", "inherited_path")][0] == "Check"


def test_an_inherited_member_the_file_calls_stays_test(wrapper_unit):
    assert wrapper_unit[("Base.step", "npu2.py:4", "inherited_path")] == ("Test", "inherited.path")


def test_the_import_line_of_a_changed_function_is_check_its_use_is_test(wrapper_unit):
    assert wrapper_unit[("make", "runs.py:1", "import_use")] == ("Check", "use.import_only")
    assert wrapper_unit[("make", "runs.py:6", "import_use")] == ("Test", "use.behaviour")


def test_the_import_line_of_a_changed_value_stays_test(wrapper_unit):
    # `from m import LIMIT` copies the value when the module loads: the new value arrives there
    assert wrapper_unit[("LIMIT", "runs.py:2", "import_use")] == ("Test", "use.behaviour")
