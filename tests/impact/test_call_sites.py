"""Callers of a function whose signature changed: judged by how they call it.

Real git repositories: upstream adds a required keyword to one function and an optional one
to another, and a required parameter to a class's ``__init__``; the downstream calls them
in ways the new signatures accept and reject, or passes one on as a value.
"""

from __future__ import annotations

import ast

import pytest

from instep.impact.downstream.coupling_index import index_downstream_file
from instep.pyindex.signatures import call_problems, call_shape

from .gitrepo import impact_of_one_commit

UTILS_V1 = """
def pad(x, n):
    return x


def scale(x, factor=1):
    return x * factor


class Buf:
    def __init__(self, name):
        self.name = name

    def size(self):
        return 1
"""

UTILS_V2 = (
    UTILS_V1.replace("def pad(x, n):", "def pad(x, n, *, mode):")
    .replace("def scale(x, factor=1):", "def scale(x, factor=1, *, bias=0):")
    .replace("def __init__(self, name):", "def __init__(self, name, layout):")
    .replace("def size(self):", "def size(self, dim=None):")
)

# a second downstream file that calls the changed member through an instance
SIZES = """
from torch._inductor.utils import Buf


def numel(b):
    assert isinstance(b, Buf)
    return b.size()
"""

DOWN = """
from torch._inductor.utils import Buf, pad, scale


def padded(x):
    return pad(x, 2)


def padded_new_style(x):
    return pad(x, 2, mode="constant")


def scaled(x):
    return scale(x, factor=2) + scale(x)


def mapped(xs):
    return list(map(scale, xs))


def unpacked(args):
    return pad(*args)


def buffer():
    return Buf("buf0")


def checked(x) -> Buf:
    try:
        return isinstance(x, (Buf, int))
    except Buf:
        return False
"""


def _shape(src: str) -> str:
    node = ast.parse(src).body[0]
    assert isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)
    return call_shape(node.value)


def test_call_problems_bind_like_python():
    sig = "x, sizes, *, implicit=False"
    assert call_problems(_shape("f(a, b)"), sig) == []
    assert call_problems(_shape("f(a, sizes=b, implicit=True)"), sig) == []
    assert call_problems(_shape("f(a)"), sig) == ["does not pass 'sizes', which it requires"]
    assert call_problems(_shape("f(a, b, c)"), sig) == [
        "passes 3 positional arguments, where it takes 2"
    ]
    assert call_problems(_shape("f(a, x=b)"), "x, sizes") == [
        "passes 'x' twice",
        "does not pass 'sizes', which it requires",
    ]
    assert call_problems(_shape("f(a, y=1)"), "x, **kw") == []
    assert call_problems(_shape("f(1, 2, 3)"), "a, *rest") == []
    assert call_problems(_shape("f(a=1)"), "a, /") == [
        "passes keyword 'a', which it does not accept",
        "does not pass 'a', which it requires",
    ]
    # an instance call does not pass self
    assert call_problems(_shape("o.m(1)"), "self, a", method=True) == []
    # unpacked arguments cannot be checked
    assert call_problems(_shape("f(*a)"), "a") is None
    assert call_problems(_shape("f(**k)"), "a") is None


def test_index_records_how_each_def_calls_each_upstream_callable():
    idx = index_downstream_file("torch_npu/_inductor/fx.py", DOWN.encode())
    uses = {
        (r.target.rsplit(".", 1)[1], r.owner): r.call_shapes
        for r in idx.references
        if r.detail == "use"
    }
    assert uses[("pad", "padded")] == ("2;;;",)
    assert uses[("pad", "padded_new_style")] == ("2;mode;;",)
    assert uses[("scale", "scaled")] == ("1;;;", "1;factor;;")
    assert uses[("scale", "mapped")] is None  # passed on: its callers are elsewhere
    assert uses[("pad", "unpacked")] == ("0;;*;",)
    assert uses[("Buf", "buffer")] == ("1;;;",)
    # a class named in a type position (isinstance, except, annotation) is not called
    assert uses[("Buf", "checked")] == ()
    # the import line answers for the whole file
    imports = {
        r.target.rsplit(".", 1)[1]: r.call_shapes
        for r in idx.references
        if r.detail.startswith("from ")
    }
    assert imports["pad"] == ("0;;*;", "2;;;", "2;mode;;")
    assert imports["scale"] is None


@pytest.fixture(scope="module")
def doc(tmp_path_factory):
    return impact_of_one_commit(
        tmp_path_factory.mktemp("calls"),
        "torch/_inductor/utils.py",
        UTILS_V1,
        UTILS_V2,
        "[inductor] utils: pad takes a mode, scale a bias, Buf a layout (#7)",
        {"torch_npu/_inductor/fx.py": DOWN, "torch_npu/_inductor/sizes.py": SIZES},
    )


def _verdicts(doc: dict) -> dict[tuple[str, int], tuple[str, str, str, str]]:
    unit = next(u for u in doc["units"] if u["pr"] == 7)
    lines = DOWN.split("\n")
    out = {}
    for c in unit["couplings"]:
        if not c["downstream"].startswith("torch_npu/_inductor/fx.py:"):
            continue
        line = int(c["downstream"].rsplit(":", 1)[1])
        key = (c["upstream"].split("::")[1], lines[line - 1].strip())
        out[key] = (c["action"], c["risk"], c["code_change"], c["rule"])
    return out, unit


def test_a_call_the_new_signature_rejects_is_shim(doc):
    got, unit = _verdicts(doc)
    assert got[("pad", "return pad(x, 2)")] == ("Shim", "high", "yes", "signature.call_breaks")
    assert got[("Buf.__init__", 'return Buf("buf0")')][3] == "constructor.call_breaks"
    assert unit["action"] == "Shim"
    breaks = next(
        c
        for c in unit["couplings"]
        if c["rule"] == "signature.call_breaks" and "pad" in c["upstream"]
    )
    assert "does not pass 'mode', which it requires" in breaks["detail"]
    assert "a call there does not pass 'mode', which it requires" in unit["rationale"]


def test_calls_that_still_bind_need_a_test_not_a_code_change(doc):
    got, _ = _verdicts(doc)
    assert got[("pad", 'return pad(x, 2, mode="constant")')] == (
        "Test",
        "low",
        "no",
        "signature.calls_fit",
    )
    assert got[("scale", "return scale(x, factor=2) + scale(x)")][3] == "signature.calls_fit"
    assert got[("Buf.__init__", "return isinstance(x, (Buf, int))")][3] == "signature.calls_fit"


def test_calls_that_cannot_be_told_stay_unsure(doc):
    got, _ = _verdicts(doc)
    assert got[("scale", "return list(map(scale, xs))")][2:] == ("unsure", "signature.caller")
    assert got[("pad", "return pad(*args)")][2:] == ("unsure", "signature.caller")
    # the import line: pad is called in a way that breaks somewhere in the file
    assert got[("pad", "from torch._inductor.utils import Buf, pad, scale")][3] == (
        "signature.call_breaks"
    )


def test_a_changed_member_the_file_never_names_cannot_break_a_call_there(doc):
    unit = next(u for u in doc["units"] if u["pr"] == 7)
    size = {
        c["downstream"].split(":")[0]: (c["code_change"], c["rule"])
        for c in unit["couplings"]
        if c["upstream"].endswith("::Buf.size")
    }
    assert size["torch_npu/_inductor/fx.py"] == ("no", "signature.member_unused")
    # b.size() through an instance: the call is not resolved, so it stays unsure
    assert size["torch_npu/_inductor/sizes.py"] == ("unsure", "signature.caller")


def test_an_annotation_only_change_keeps_its_evidence_and_is_check(tmp_path):
    before = "def helper(x, n=1):\n    return x\n\n\ndef api(x):\n    return helper(x)\n"
    after = before.replace("def helper(x, n=1):", "def helper(x: int, n: int = 1) -> int:")
    doc = impact_of_one_commit(
        tmp_path,
        "torch/_inductor/utils.py",
        before,
        after,
        "[inductor] annotate helper (#8)",
        {"torch_npu/_inductor/a.py": "from torch._inductor.utils import api\n\nY = api(1)\n"},
    )
    unit = next(u for u in doc["units"] if u["pr"] == 8)
    assert unit["upstream"] == ["torch/_inductor/utils.py::helper (annotation)"]
    assert unit["action"] == "Check"
    # the downstream reaches helper through api: the path is shown, judged Check
    (coupling,) = unit["couplings"]
    assert coupling["kind"] == "inherited_path" and coupling["rule"] == "annotation.only"
    assert coupling["downstream"].startswith("torch_npu/_inductor/a.py:")
