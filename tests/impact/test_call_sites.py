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

from .gitrepo import impact_of_commit, impact_of_one_commit

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
    # the import line answers only for calls no place of their own judges: here none
    imports = {
        r.target.rsplit(".", 1)[1]: r.call_shapes
        for r in idx.references
        if r.detail.startswith("from ")
    }
    assert imports == {"Buf": (), "pad": (), "scale": ()}


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
    # isinstance runs no __init__: a type position couples to no member (use.type_position)
    assert ("Buf.__init__", "return isinstance(x, (Buf, int))") not in got


def test_calls_that_cannot_be_told_stay_unsure(doc):
    got, _ = _verdicts(doc)
    assert got[("scale", "return list(map(scale, xs))")][2:] == ("unsure", "signature.caller")
    assert got[("pad", "return pad(*args)")][2:] == ("unsure", "signature.caller")
    # the import line: every call of pad is judged in its def (padded breaks there)
    assert got[("pad", "from torch._inductor.utils import Buf, pad, scale")][3] == (
        "signature.calls_fit"
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


# Where a call is judged: at the use of its own place (a def, a class body, the module
# level); the import line only for calls no such use answers for.
PLACED = {
    # a module-level call that breaks: its own use (owner: the module) is the one Shim
    "torch_npu/_inductor/at_module.py": """
from torch._inductor.utils import pad

PADDED = pad(1, 2)
""",
    # the only breaking call sits in a function: Shim there, not at the import
    "torch_npu/_inductor/in_def.py": """
from torch._inductor.utils import Buf


def buffer():
    return Buf("buf0")
""",
    # a class body is a place of its own; the fitting call leaves the import line fit
    "torch_npu/_inductor/in_class.py": """
from torch._inductor.utils import pad


class Sizes:
    width = pad(1, 2)


def fine(x):
    return pad(x, 2, mode="constant")
""",
    # the use stands on the import line: one coupling per line, the import line's
    "torch_npu/_inductor/one_line.py": """
from torch._inductor.utils import pad; PADDED = pad(1, 2)
""",
    # a config module's function: its uses are config reads, which carry no calls
    "torch_npu/_inductor/configured.py": """
from torch._inductor.config import decide


def choose(x):
    return decide(x)
""",
}

CONFIG_V1 = """
def decide(x):
    return x
"""


@pytest.fixture(scope="module")
def placed(tmp_path_factory):
    return impact_of_commit(
        tmp_path_factory.mktemp("placed"),
        {"torch/_inductor/utils.py": UTILS_V1, "torch/_inductor/config.py": CONFIG_V1},
        {
            "torch/_inductor/utils.py": UTILS_V2,
            "torch/_inductor/config.py": CONFIG_V1.replace("(x)", "(x, *, mode)"),
        },
        "[inductor] pad takes a mode, Buf a layout, decide a mode (#8)",
        PLACED,
    )


def _placed(doc: dict, path: str) -> dict[tuple[str, str], str]:
    """(upstream qualname, downstream line) -> action and rule, for one downstream file."""
    lines = PLACED[path].split("\n")
    out = {}
    for unit in doc["units"]:
        for c in unit["couplings"]:
            where, line = c["downstream"].rsplit(":", 1)
            if where == path and c["kind"] == "import_use":
                key = (c["upstream"].split("::")[1], lines[int(line) - 1].strip())
                assert key not in out, key
                out[key] = f"{c['action']} {c['rule']}"
    return out


def test_a_module_level_call_that_breaks_is_one_shim_at_its_own_place(placed):
    assert _placed(placed, "torch_npu/_inductor/at_module.py") == {
        ("pad", "from torch._inductor.utils import pad"): "Test signature.calls_fit",
        ("pad", "PADDED = pad(1, 2)"): "Shim signature.call_breaks",
    }


def test_a_breaking_call_in_a_function_is_shim_there_not_at_the_import(placed):
    got = _placed(placed, "torch_npu/_inductor/in_def.py")
    assert got[("Buf.__init__", 'return Buf("buf0")')] == "Shim constructor.call_breaks"
    assert got[("Buf.__init__", "from torch._inductor.utils import Buf")] == (
        "Test signature.calls_fit"
    )


def test_a_class_body_is_judged_at_its_own_place(placed):
    assert _placed(placed, "torch_npu/_inductor/in_class.py") == {
        ("pad", "from torch._inductor.utils import pad"): "Test signature.calls_fit",
        ("pad", "width = pad(1, 2)"): "Shim signature.call_breaks",
        ("pad", 'return pad(x, 2, mode="constant")'): "Test signature.calls_fit",
    }


def test_a_call_on_the_import_line_is_judged_by_the_import_line(placed):
    assert _placed(placed, "torch_npu/_inductor/one_line.py") == {
        ("pad", "from torch._inductor.utils import pad; PADDED = pad(1, 2)"): (
            "Shim signature.call_breaks"
        ),
    }


def test_calls_whose_place_has_no_use_coupling_stay_with_the_import_line(placed):
    got = _placed(placed, "torch_npu/_inductor/configured.py")
    assert got[("decide", "from torch._inductor.config import decide")] == (
        "Shim signature.call_breaks"
    )
    assert ("decide", "return decide(x)") not in got  # a config read, not a call judged
