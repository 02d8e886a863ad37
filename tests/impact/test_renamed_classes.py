"""Members of a class the new upstream renamed without an alias are not removed at each
downstream override when the renamed class still has them with the same parameters: the
old class name at the import and subclass lines is the one break (torch_musa #8, #11,
#13: ``WrapperCodeGen`` -> ``PythonWrapperCodegen``).

Real upstream git commits rename the class; the downstream subclasses it by its old name.
"""

from __future__ import annotations

from .gitrepo import impact_of_commit

V1 = """\
class WrapperCodeGen:
    def write_header(self):
        self.header = 1

    def guard_enter(self, idx):
        self.lines.append(("enter", idx))
        self.depth += 1
        self.seen.add(idx)
        return self.depth

    def make_allocation(self, name):
        return name

    def dropped(self):
        return 0
"""

V2_RENAMED = """\
class PythonWrapperCodegen:
    def write_header(self):
        self.header = 2

    def guard_enter(self, idx):
        self.lines.append(("enter", idx))
        self.depth += 1
        self.seen.add(idx)
        return self.depth

    def make_allocation(self, name, shape):
        return name
"""

# the same members on a new class, but nothing pairs it with the old one
V2_UNPAIRED = V2_RENAMED.replace('("enter", idx)', '("enter!", idx)')

DOWN = """\
from torch._inductor.codegen.wrapper import WrapperCodeGen


class MusaWrapper(WrapperCodeGen):
    def write_header(self):
        super().write_header()

    def guard_enter(self, idx):
        super().guard_enter(idx)

    def make_allocation(self, name):
        return name

    def dropped(self):
        return 1
"""


def _rules(tmp_path, after) -> dict[tuple[str, str], set[str]]:
    doc = impact_of_commit(
        tmp_path,
        {"torch/_inductor/codegen/wrapper.py": V1},
        {"torch/_inductor/codegen/wrapper.py": after},
        "rename WrapperCodeGen",
        {"torch_musa/_inductor/codegen/wrapper.py": DOWN},
    )
    out: dict[tuple[str, str], set[str]] = {}
    for u in doc["units"]:
        for c in u["couplings"]:
            key = (c["upstream"].split("::")[1].split(".")[-1], c["downstream"].rsplit(":", 1)[1])
            out.setdefault(key, set()).add(c["rule"])
    return out


def _shims(rules: dict[tuple[str, str], set[str]]) -> set[tuple[str, str]]:
    shim = {"removed.breaks", "signature.replacement_breaks", "signature.path_unproven"}
    return {key for key, got in rules.items() if got & shim}


def test_members_that_survive_on_the_renamed_class_are_not_removed(tmp_path):
    rules = _rules(tmp_path, V2_RENAMED)
    shims = _shims(rules)
    names = {name for name, _ in shims}
    assert ("WrapperCodeGen", "1") in shims  # the import line
    assert ("WrapperCodeGen", "4") in shims  # the subclass line
    assert "write_header" not in names  # same parameters on PythonWrapperCodegen
    assert "guard_enter" not in names  # paired by the diff itself, same parameters
    # its parameters changed on the new class, which upstream still calls: not dead
    assert rules[("make_allocation", "11")] == {"removed.breaks"}
    # gone from the new class, and the override does not call it: dead, nothing raises
    assert rules[("dropped", "14")] == {"removed.dead_override"}


def test_without_a_pairing_the_members_stay_removed(tmp_path):
    """No member or class of the new upstream is paired with the old class: no successor."""
    rules = _rules(tmp_path, V2_UNPAIRED)
    names = {name for name, _ in _shims(rules)}
    # the overrides that call super() read the removed member: AttributeError
    assert {"WrapperCodeGen", "write_header", "guard_enter"} <= names
    # those that do not are dead overrides
    assert rules[("make_allocation", "11")] == {"removed.dead_override"}
    assert rules[("dropped", "14")] == {"removed.dead_override"}
