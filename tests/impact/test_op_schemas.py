"""ATen operator schemas (native_functions.yaml) and higher-order ops: the upstream index
(op_schemas), the downstream places (op_refs) and their couplings (op_couplings), end to
end on a real upstream git history and a downstream package."""

from __future__ import annotations

import json

import pytest

from instep.cli import run as cli_run
from instep.impact.downstream.coupling_index import index_downstream_file
from instep.impact.join.op_couplings import binding_problems
from instep.impact.upstream.file_index import index_source
from instep.impact.upstream.op_schemas import breaking_changes, parse_schema
from instep.impact.upstream.sources import open_snapshot

from .gitrepo import RepoBuilder

YAML = "aten/src/ATen/native/native_functions.yaml"

SCHEMA_V1 = """\
# comment
- func: foo(Tensor self) -> Tensor
  variants: function

- func: foo.names(Tensor self, str[] names) -> Tensor
  dispatch:
    CPU: foo_names

- func: bar.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor

- func: bar.Scalar(Tensor self, Scalar other) -> Tensor

- func: baz(Tensor self, *, bool keep=False) -> Tensor

- func: gone(Tensor self) -> Tensor

- func: qux(Tensor self) -> Tensor
"""

SCHEMA_V2 = """\
# comment
- func: foo(Tensor self) -> Tensor
  variants: function

- func: foo.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)

- func: bar.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor

- func: bar.Scalar(Tensor self, Scalar other, *, Scalar alpha=1) -> Tensor

- func: baz(Tensor self, *, bool keepdim=False) -> Tensor

- func: qux(Tensor self) -> Tensor
"""

HOP_V1 = """\
from torch._ops import HigherOrderOperator


class CondOp(HigherOrderOperator):
    def __init__(self):
        super().__init__("cond")


cond_op = CondOp()


def cond_autograd(pred, true_fn, false_fn, operands):
    return cond_op(pred, true_fn, false_fn, operands)
"""

HOP_V2 = HOP_V1.replace(
    "    return cond_op(pred, true_fn, false_fn, operands)",
    "    operands = tuple(operands)\n    return cond_op(pred, true_fn, false_fn, operands)",
)

WHILE_V1 = """\
from torch._ops import HigherOrderOperator

while_loop_op = HigherOrderOperator("while_loop")


def while_loop_dense(cond_fn, body_fn, carried):
    return carried
"""
WHILE_V2 = WHILE_V1.replace("return carried", "return tuple(carried)")

LOWERING = """\
import torch
from torch._inductor.lowering import make_fallback, register_lowering

aten = torch.ops.aten

make_fallback(aten.foo.names)
make_fallback(aten.gone)

try:
    GUARDED = aten.foo.names
except AttributeError:
    GUARDED = None


@register_lowering(aten.baz.default)
def baz_lowering(x, *, keep=False):
    return x


@register_lowering(aten.foo)
def foo_lowering(x):
    return x


def convert(x):
    return torch.ops.aten.foo.names(x)


CONVERTERS = {"aten::qux": 1, aten.bar.Tensor: 2}


@register_lowering(torch.ops.higher_order.cond)
def cond_lowering(pred, true_fn, false_fn, operands):
    return operands


SCANS = [torch.ops.higher_order.scan]
"""
LOWERING_PATH = "torch_npu/_inductor/lowering_npu.py"


def test_parse_schema():
    s = parse_schema(
        "bar.Tensor(Tensor(a!) self, int[2] size=[1, 1], *, Scalar? alpha=None) -> Tensor"
    )
    assert (s.op, s.overload, s.qualname) == ("bar", "Tensor", "aten::bar.Tensor")
    assert [(a.type, a.name, a.default, a.kwarg_only) for a in s.arguments] == [
        ("Tensor(a!)", "self", None, False),
        ("int[2]", "size", "[1, 1]", False),
        ("Scalar?", "alpha", "None", True),
    ]
    assert parse_schema("foo(Tensor self) -> Tensor").qualname == "aten::foo"
    with pytest.raises(ValueError, match="expected 'Type name"):
        parse_schema("foo(Tensor) -> Tensor")
    with pytest.raises(ValueError, match="unbalanced"):
        parse_schema("foo(Tensor self -> Tensor")


def test_breaking_changes_and_binding():
    old = parse_schema("baz(Tensor self, *, bool keep=False) -> Tensor")
    new = parse_schema("baz(Tensor self, *, bool keepdim=False) -> Tensor")
    assert breaking_changes(old, new) == ["argument 'keep' renamed to 'keepdim'"]
    assert binding_problems(old, new, "x, *, keep=False") == [
        "keyword 'keep' is now 'keepdim', which the registered function does not take"
    ]
    assert binding_problems(old, new, "x, **kwargs") == []  # takes any keyword
    assert binding_problems(old, new, "x, *, keepdim=False") == []  # already follows
    added = parse_schema("baz(Tensor self, *, bool keep=False, int n) -> Tensor")
    assert breaking_changes(old, added) == ["argument 'n' added without a default"]
    assert binding_problems(old, added, "x, *, keep=False") == [
        "new required keyword 'n', which the registered function does not take"
    ]
    with_default = parse_schema("baz(Tensor self, *, bool keep=False, int n=0) -> Tensor")
    assert breaking_changes(old, with_default) == []


def test_schema_file_is_indexed_per_overload(tmp_path):
    idx = index_source(YAML, SCHEMA_V1.encode())
    assert idx.error is None
    assert {q: s.line for q, s in idx.symbols.items()} == {
        "aten::foo": 2,
        "aten::foo.names": 5,
        "aten::bar.Tensor": 9,
        "aten::bar.Scalar": 11,
        "aten::baz": 13,
        "aten::gone": 15,
        "aten::qux": 17,
    }
    assert idx.symbols["aten::baz"].signature == "(Tensor self, *, bool keep=False) -> Tensor"
    # a source tree's copy is read, any other YAML is not
    (tmp_path / YAML).parent.mkdir(parents=True)
    (tmp_path / YAML).write_text(SCHEMA_V1)
    (tmp_path / "aten/src/ATen/native/tags.yaml").write_text("- tag: x\n")
    assert open_snapshot(str(tmp_path), tmp_path / "cache").paths() == [YAML]


def test_bad_yaml_is_one_line_error():
    idx = index_source(YAML, b"- func: foo(Tensor self) -> Tensor\n  - : [\n")
    assert idx.symbols == {}
    assert idx.error is not None and "\n" not in idx.error
    assert idx.error.startswith(f"{YAML}:") and "not valid YAML" in idx.error


def test_downstream_places():
    refs = index_downstream_file(LOWERING_PATH, LOWERING.encode()).references
    got = {
        (r.line, r.target): (r.detail.split()[0], r.at_import, r.gate.kind if r.gate else None)
        for r in refs
        if r.kind.value in ("op_schema", "higher_order_op")
    }
    assert got == {
        (6, "schema:aten.foo.names"): ("make_fallback", True, None),
        (7, "schema:aten.gone"): ("make_fallback", True, None),
        (10, "schema:aten.foo.names"): ("use", True, "try_except"),
        (15, "schema:aten.baz.default"): ("register_lowering", True, None),
        (20, "schema:aten.foo"): ("register_lowering", True, None),
        (26, "schema:aten.foo.names"): ("use", False, None),
        (29, "schema:aten.qux"): ("string", True, None),
        (29, "schema:aten.bar.Tensor"): ("table:CONVERTERS", True, None),
        (32, "hop:cond"): ("register_lowering", True, None),
        (37, "hop:scan"): ("table:SCANS", True, None),
    }


SPELT_OTHERWISE = """
import torch
from torch._inductor.lowering import register_lowering

aten = torch.ops.aten
PLAIN = 1
X = "at" "en::split.Tensor"
Y = "\\x61ten::mm"
Z = 'ate' 'n::bmm.out'


def plain(x):
    return x + PLAIN


@register_lowering(
    [
        aten.sort.stable,
    ]
)
def sort(x):
    return x
"""


def test_op_names_spelt_otherwise_and_decorators_above_the_def_are_found():
    refs = index_downstream_file("npu_ext/spelt.py", SPELT_OTHERWISE.encode()).references
    got = {(r.line, r.target) for r in refs if r.kind.value == "op_schema"}
    assert got == {
        (7, "schema:aten.split.Tensor"),
        (8, "schema:aten.mm"),
        (9, "schema:aten.bmm.out"),
        (18, "schema:aten.sort.stable"),
    }


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    root = tmp_path_factory.mktemp("schemas")
    up = RepoBuilder(root / "pytorch")
    for package in ("torch/__init__.py", "torch/_higher_order_ops/__init__.py"):
        up.write(package, "")
    up.write(YAML, SCHEMA_V1)
    up.write("torch/_higher_order_ops/cond.py", HOP_V1)
    up.write("torch/_higher_order_ops/while_loop.py", WHILE_V1)
    up.commit("base")
    up.tag("v1")
    up.write(YAML, SCHEMA_V2)
    up.commit("Remove foo.names and gone, rename baz's keep (#11)")
    up.write("torch/_higher_order_ops/cond.py", HOP_V2)
    up.write("torch/_higher_order_ops/while_loop.py", WHILE_V2)
    up.commit("[hop] cond and while_loop take tuples (#12)")
    up.tag("v2")
    down = root / "torch_npu"
    for rel, text in {
        "torch_npu/__init__.py": "",
        "torch_npu/_inductor/__init__.py": "",
        LOWERING_PATH: LOWERING,
    }.items():
        (down / rel).parent.mkdir(parents=True, exist_ok=True)
        (down / rel).write_text(text, encoding="utf-8")
    out = root / "impact.json"
    args = ["impact", "--upstream-git", str(up.path), "--range", "v1..v2"]
    args += ["--downstream", str(down), "--format", "json", "--out", str(out), "--no-cache"]
    assert cli_run(args) == 0
    return json.loads(out.read_text(encoding="utf-8"))


def _couplings(report, kind):
    return {
        (c["upstream"].split("::", 1)[1], c["downstream"].rsplit(":", 1)[1]): (
            c["action"],
            c["rule"],
            c["detail"],
        )
        for u in report["units"]
        for c in u["couplings"]
        if c["kind"] == kind
    }


def test_schema_couplings(report):
    got = {k: v[:2] for k, v in _couplings(report, "op_schema").items()}
    assert got == {
        # removed overload named at import: the module no longer loads
        ("aten::foo.names", "6"): ("Shim", "op_schema.removed_at_import"),
        # every overload of the packet gone, named at import
        ("aten::gone", "7"): ("Shim", "op_schema.packet_gone_at_import"),
        # behind try/except AttributeError
        ("aten::foo.names", "10"): ("Test", "op_schema.removed_guarded"),
        # a registered lowering that takes the old keyword by name
        ("aten::baz", "15"): ("Shim", "op_schema.registration_binds_by_name"),
        # the registered packet loses one overload and gains another
        ("aten::foo.names", "20"): ("Test", "op_schema.overload_left_packet"),
        ("aten::foo.out", "20"): ("Test", "op_schema.added_to_registered_packet"),
        # inside a function: fails when it runs
        ("aten::foo.names", "26"): ("Test", "op_schema.removed_when_run"),
    }
    # unrelated overloads (bar.Tensor while bar.Scalar changed) and the unchanged
    # "aten::qux" do not couple
    detail = _couplings(report, "op_schema")[("aten::foo.names", "6")][2]
    assert "make_fallback aten.foo.names (at import)" in detail
    assert "native_functions.yaml:5 (old)" in detail
    baz = _couplings(report, "op_schema")[("aten::baz", "15")][2]
    assert "keyword 'keep' is now 'keepdim'" in baz


def test_hop_couplings(report):
    got = {k: v[:2] for k, v in _couplings(report, "higher_order_op").items()}
    # one per file: the changed cond_autograd reaches the downstream cond lowering; the
    # changed while_loop and the unchanged scan reach nothing
    assert got == {("cond_autograd", "32"): ("Test", "hop.implementation_changed")}
    assert (
        "the HOP 'cond' is implemented in torch/_higher_order_ops/cond.py"
        in (_couplings(report, "higher_order_op")[("cond_autograd", "32")][2])
    )
