"""REGISTERED_KERNEL end to end: an upstream git repository whose native_functions.yaml and
C shim header change between two tags, against a downstream tree holding a torchgen
backend yaml, C++ registrations, an autocast list and a shim header. Each kernel.* verdict
is met, and its near miss is not (an unchanged overload, another overload of the same op,
a commented-out line, another namespace). All code here is written for the test, in the
shapes torch-npu writes."""

from __future__ import annotations

import json

import pytest

from instep.cli import run as cli_run
from instep.impact.analysis import ImpactRequest, analyse
from instep.impact.downstream.kernel_records import KernelSource, RegisteredKernel
from instep.impact.export.csv_table import render_csv
from instep.impact.export.html_page import render_html
from instep.impact.export.json_doc import as_document
from instep.impact.export.markdown import render_markdown
from instep.impact.join.kernel_couplings import kernel_facts
from instep.impact.join.verdicts import decide
from instep.impact.model import ChangeKind, CouplingKind, KernelRole, Reference, Stage, SymbolChange
from instep.impact.upstream.op_schemas import declarations

from .gitrepo import RepoBuilder

YAML = "aten/src/ATen/native/native_functions.yaml"
SHIM = "torch/csrc/inductor/aoti_torch/generated/c_shim_cpu.h"

SCHEMA_V1 = """\
- func: gone.names(Tensor self, Dimname dim) -> Tensor

- func: gone(Tensor self, int dim) -> Tensor

- func: grow(Tensor self, int dim) -> Tensor

- func: grow_default(Tensor self, int dim) -> Tensor

- func: retype(Tensor self, int dim) -> Tensor

- func: rename_me(Tensor grad, Tensor self) -> Tensor

- func: defaulted(Tensor self, int dim) -> Tensor

- func: redefault(Tensor self, int dim=0) -> Tensor

- func: returns_more(Tensor self) -> Tensor

- func: kept(Tensor self) -> Tensor

- func: adapted(Tensor self, int dim) -> Tensor

- func: boxed_op(Tensor self) -> Tensor

- func: wider.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)

- func: wider(Tensor self) -> Tensor
"""

SCHEMA_V2 = """\
- func: gone(Tensor self, int dim) -> Tensor

- func: grow(Tensor self, int dim, bool keepdim) -> Tensor

- func: grow_default(Tensor self, int dim, bool keepdim=False) -> Tensor

- func: retype(Tensor self, int? dim) -> Tensor

- func: rename_me(Tensor grad_output, Tensor self) -> Tensor

- func: defaulted(Tensor self, int dim=0) -> Tensor

- func: redefault(Tensor self, int dim=1) -> Tensor

- func: returns_more(Tensor self) -> (Tensor, Tensor)

- func: kept(Tensor self) -> Tensor

- func: adapted(Tensor self, int dim, bool flag=False) -> Tensor

- func: boxed_op(Tensor self, int n) -> Tensor

- func: wider.out(Tensor self, *, int n=0, Tensor(a!) out) -> Tensor(a!)

- func: wider(Tensor self) -> Tensor

- func: npu_own(Tensor self) -> Tensor

- func: fresh(Tensor self) -> Tensor
"""

SHIM_V1 = """\
#pragma once
AOTI_TORCH_EXPORT AOTITorchError aoti_torch_cpu_rename_me(AtenTensorHandle grad, AtenTensorHandle self, AtenTensorHandle* ret0);
AOTI_TORCH_EXPORT AOTITorchError aoti_torch_cpu_grow(AtenTensorHandle self, int64_t dim, AtenTensorHandle* ret0);
"""  # noqa: E501
SHIM_V2 = """\
#pragma once
AOTI_TORCH_EXPORT AOTITorchError aoti_torch_cpu_rename_me(AtenTensorHandle grad_output, AtenTensorHandle self, AtenTensorHandle* ret0);
AOTI_TORCH_EXPORT AOTITorchError aoti_torch_cpu_grow(AtenTensorHandle self, int64_t dim, int32_t keepdim, AtenTensorHandle* ret0);
AOTI_TORCH_EXPORT AOTITorchError aoti_torch_xpu_grow(AtenTensorHandle self, int64_t dim, int32_t keepdim, AtenTensorHandle* ret0);
"""  # noqa: E501

BACKEND_YAML = """\
backend: NPU
cpp_namespace: at_npu::native
supported:
  - gone.names
  - grow
  - func: rename_me(Tensor grad, Tensor self) -> Tensor
    op_api: True
  - defaulted
  - redefault
  - kept
  - func: adapted(Tensor self, int dim, bool flag=False) -> Tensor
  - fresh
  - wider
symint:
  - grow
custom:
  - func: npu_own(Tensor self) -> Tensor
  - func: npu_thing(Tensor self) -> Tensor
"""
BACKEND_YAML_PATH = "torch_npu/csrc/aten/npu_native_functions.yaml"

AUTOCAST_CPP = """\
#include <ATen/autocast_mode.h>
TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
  KERNEL_PRIVATEUSEONE(gone, names, fp32)
  KERNEL_PRIVATEUSEONE(grow_default, lower_precision_fp)
  KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE(
      ADD_NS(retype),
      "retype",
      at::Tensor(const at::Tensor&, int64_t),
      at::Tensor(const at::Tensor&, int64_t, at::ScalarType),
      fp32_append_dtype)
  KERNEL_PRIVATEUSEONE(kept, fp32)
  // KERNEL_PRIVATEUSEONE(returns_more, fp32)
}
"""
AUTOCAST_PATH = "torch_npu/csrc/aten/AutoCastOps.cpp"

KERNELS_CPP = """\
#include <torch/library.h>
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("returns_more", TORCH_FN(returns_more_npu));
  m.impl(TORCH_SELECTIVE_NAME("aten::gone.names"), TORCH_FN(gone_names_npu));
  m.impl("boxed_op", torch::CppFunction::makeFallthrough());
  m.impl("grow_default", TORCH_FN(grow_default_npu));
}
TORCH_LIBRARY_IMPL(npu, PrivateUse1, m) {
  m.impl("grow", TORCH_FN(npu_grow));
}
TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&npu_cpu_fallback>());
}
static const char* kCpuFallbackOps[] = {"aten::gone.names", "aten::kept"};
static const char* kMessage = "operator 'aten::gone.names' falls back to the CPU";
"""
KERNELS_PATH = "torch_npu/csrc/aten/ops/Kernels.cpp"

SHIM_NPU = """\
#pragma once
AOTI_TORCH_EXPORT AOTITorchError aoti_torch_npu_rename_me(AtenTensorHandle grad, AtenTensorHandle self, AtenTensorHandle* ret0);
AOTI_TORCH_EXPORT AOTITorchError aoti_torch_npu_grow(AtenTensorHandle self, int64_t dim, AtenTensorHandle* ret0);
AOTI_TORCH_EXPORT AOTITorchError aoti_torch_npu_gone_names(AtenTensorHandle self, const char* dim, AtenTensorHandle* ret0);
AOTI_TORCH_EXPORT AOTITorchError aoti_torch_npu_kept(AtenTensorHandle self, AtenTensorHandle* ret0);
"""  # noqa: E501
SHIM_NPU_PATH = "torch_npu/csrc/inductor/aoti_torch/generated/c_shim_npu.h"


def _upstream(root):
    up = RepoBuilder(root / "pytorch")
    up.write("torch/__init__.py", "")
    up.write(YAML, SCHEMA_V1)
    up.write(SHIM, SHIM_V1)
    up.commit("base")
    up.tag("v1")
    up.write(YAML, SCHEMA_V2)
    up.commit("Remove gone.names, change grow, rename rename_me's grad (#21)")
    up.write(SHIM, SHIM_V2)
    up.commit("[aoti] regenerate the C shims (#22)")
    up.tag("v2")
    return up


def _downstream(root):
    down = root / "torch_npu"
    for rel, text in {
        "torch_npu/__init__.py": "",
        BACKEND_YAML_PATH: BACKEND_YAML,
        AUTOCAST_PATH: AUTOCAST_CPP,
        KERNELS_PATH: KERNELS_CPP,
        SHIM_NPU_PATH: SHIM_NPU,
    }.items():
        (down / rel).parent.mkdir(parents=True, exist_ok=True)
        (down / rel).write_text(text, encoding="utf-8")
    return down


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    """The same pair read as a commit range (git mode, the command line's JSON) and as a
    release (two revisions; the report objects, in English and Chinese)."""
    root = tmp_path_factory.mktemp("kernels")
    up, down = _upstream(root), _downstream(root)
    path = root / "git.json"
    argv = ["impact", "--upstream-git", str(up.path), "--range", "v1..v2"]
    argv += ["--downstream", str(down), "--format", "json", "--out", str(path), "--no-cache"]
    assert cli_run(argv) == 0
    out = {"git": json.loads(path.read_text(encoding="utf-8"))}
    for lang in ("en", "zh"):
        out[f"release-{lang}"] = analyse(
            ImpactRequest(
                downstream=str(down),
                upstream_old=f"{up.path}@v1",
                upstream_new=f"{up.path}@v2",
                use_cache=False,
                lang=lang,
            )
        )
    out["release"] = json.loads(as_document(out["release-en"]).to_json())
    return out


def _couplings(doc, kind="registered_kernel"):
    return {
        (c["downstream"], c["upstream"].split("::", 1)[1]): (c["action"], c["rule"], c["role"])
        for u in doc["units"]
        for c in u["couplings"]
        if c["kind"] == kind
    }


Y, A, C, S = BACKEND_YAML_PATH, AUTOCAST_PATH, KERNELS_PATH, SHIM_NPU_PATH
EXPECTED = {
    # a removed overload: the codegen rejects the yaml entry, the autocast macro no longer
    # compiles, the shim's body calls a missing op; an m.impl dangles; a list misses it
    (f"{Y}:4", "aten::gone.names"): ("Shim", "kernel.removed_codegen", "kernel"),
    (f"{A}:3", "aten::gone.names"): ("Shim", "kernel.removed_autocast", "autocast"),
    (f"{S}:4", "aten::gone.names"): ("Shim", "kernel.removed_c_shim", "c_shim"),
    (f"{C}:4", "aten::gone.names"): ("Test", "kernel.removed_registration", "kernel"),
    (f"{C}:14", "aten::gone.names"): ("Test", "kernel.removed_op_list", "op_list"),
    # an argument added without a default: every kernel of the overload, both yaml lines
    (f"{Y}:5", "aten::grow"): ("Shim", "kernel.signature_breaks", "kernel"),
    (f"{Y}:15", "aten::grow"): ("Shim", "kernel.signature_breaks", "kernel"),
    (f"{S}:3", "aten::grow"): ("Shim", "kernel.signature_breaks", "c_shim"),
    # ... with a default: the C++ kernel takes every argument, so it breaks too; the
    # autocast wrapper's type follows the op
    (f"{C}:6", "aten::grow_default"): ("Shim", "kernel.signature_breaks", "kernel"),
    (f"{A}:4", "aten::grow_default"): ("Test", "kernel.autocast_follows", "autocast"),
    # a type change under an autocast signature written out
    (f"{A}:5", "aten::retype"): ("Shim", "kernel.autocast_signature_breaks", "autocast"),
    # the returns changed under an m.impl
    (f"{C}:3", "aten::returns_more"): ("Shim", "kernel.signature_breaks", "kernel"),
    # a renamed argument: Test for a kernel, Check for a C shim (positional C calls)
    (f"{Y}:6", "aten::rename_me"): ("Test", "kernel.argument_renamed", "kernel"),
    (f"{S}:2", "aten::rename_me"): ("Check", "kernel.c_shim_renamed", "c_shim"),
    # a default added; a default changed
    (f"{Y}:8", "aten::defaulted"): ("Check", "kernel.schema_compatible", "kernel"),
    (f"{Y}:9", "aten::redefault"): ("Test", "kernel.schema_behaviour", "kernel"),
    # the yaml's func: copy already has the new schema
    (f"{Y}:11", "aten::adapted"): ("Check", "kernel.copy_adapted", "kernel"),
    # a fallthrough kernel reads the stack
    (f"{C}:5", "aten::boxed_op"): ("Check", "kernel.boxed", "kernel"),
    # upstream adds an overload the backend registers, and one named like a custom op
    (f"{Y}:12", "aten::fresh"): ("Check", "kernel.added_registered", "kernel"),
    (f"{Y}:17", "aten::npu_own"): ("Test", "kernel.custom_collides", "custom"),
}


@pytest.mark.parametrize("mode", ["git", "release"])
def test_each_kernel_verdict(reports, mode):
    doc = reports[mode]
    got = _couplings(doc)
    assert got == EXPECTED
    # not coupled: kept (unchanged), wider (its .out changed, not the default overload),
    # the npu:: grow, the commented-out returns_more, the message naming gone.names,
    # npu_thing (a custom op upstream never had)
    downstream = {d for d, _ in got}
    assert f"{A}:11" not in downstream and f"{C}:15" not in downstream
    assert (
        f"{C}:9" not in downstream and f"{Y}:13" not in downstream and f"{Y}:18" not in downstream
    )


@pytest.mark.parametrize("mode", ["git", "release"])
def test_scope_counts(reports, mode):
    stats = reports[mode]["stats"]
    # yaml: 11 distinct names (grow in supported and symint is one); C++: 4 aten m.impl,
    # npu::grow, 4 autocast lines (the commented one not read)
    assert stats["registered_kernels_by_source"] == {
        "backend_yaml": 11,
        "backend_yaml_custom": 2,
        "cpp_impl": 5,
        "autocast": 4,
        "c_shim": 4,
        "op_list": 2,
        "fallback": 1,
    }
    # by name: the yaml's 11, then returns_more, boxed_op, grow_default, npu::grow, retype
    assert stats["registered_kernels"] == 11 + 5
    assert stats["registered_kernel_files"]["backend_yaml"] == [BACKEND_YAML_PATH]


def test_shim_header_declarations_meet_upstream_shim_changes(reports):
    doc = reports["git"]
    got = _couplings(doc, "c_shim")
    # the cpu shim renamed a parameter: the npu declaration still fits; the cpu shim of grow
    # gained a parameter: the npu one is stale; the new xpu shim of grow is no coupling
    assert got == {
        (f"{S}:2", "aoti_torch_cpu_rename_me"): ("Check", "c_shim.names_only", None),
        (f"{S}:3", "aoti_torch_cpu_grow"): ("Shim", "c_shim.changed", None),
    }


def test_act_now_shows_both_yaml_lines_and_every_format_the_role(reports):
    md = render_markdown(reports["release-en"])
    line = next(x for x in md.splitlines() if x.startswith(f"- **{Y}:4**"))
    # the backend yaml's line, the role, and the upstream schema file's line (old side)
    assert "(registered_kernel, kernel)" in line
    assert f"{YAML}:1 (removed)" in line
    assert "[kernel.removed_codegen]" in line
    assert f"`{A}:3` registered_kernel, autocast policy" in render_markdown(
        reports["release-en"], all_units=True
    )
    assert f"{A}:3 registered_kernel, autocast policy -> " in render_csv(reports["release-en"])
    assert "registered_kernel, C shim" in render_html(reports["release-en"])
    roles = {c["role"] for u in reports["release"]["units"] for c in u["couplings"]}
    assert roles == {"kernel", "autocast", "c_shim", "op_list", "custom", None}
    # in Chinese: the role's word from the glossary, the rule's zh text
    zh = render_markdown(reports["release-zh"])
    line = next(x for x in zh.splitlines() if x.startswith(f"- **{A}:3**"))
    assert "(registered_kernel, autocast 策略)" in line
    unit = next(u for u in reports["release-zh"].units if u.action.value == "Shim")
    assert "torchgen 的后端代码生成会拒绝" in unit.rationale


def _change(old: str | None, new: str | None, kind: ChangeKind) -> SymbolChange:
    old_sym = declarations(YAML, f"- func: {old}\n")[0] if old else None
    new_sym = declarations(YAML, f"- func: {new}\n")[0] if new else None
    qualname = (old_sym or new_sym).qualname  # type: ignore[union-attr]
    return SymbolChange(
        YAML, qualname, kind, (old_sym or new_sym).kind, Stage.OTHER, old_sym, new_sym
    )  # type: ignore[union-attr]


def _verdict(change: SymbolChange, kernel: RegisteredKernel) -> tuple[str, str]:
    facts, why = kernel_facts(change, kernel)
    ref = Reference(
        CouplingKind.REGISTERED_KERNEL, "kernel:x", kernel.path, kernel.line, "", role=kernel.role
    )
    c = decide(change, ref, extra_facts=facts, detail="; ".join(why))
    return str(c.action), c.rule


def _k(role: KernelRole, name="f", source=KernelSource.YAML, **kw) -> RegisteredKernel:
    return RegisteredKernel("x.yaml", 1, name, role, source, "supported", **kw)


def test_rules_the_tree_does_not_meet():
    removed = _change("f(Tensor self) -> Tensor", None, ChangeKind.REMOVED)
    # a custom op named like a removed upstream overload stands on its own
    assert _verdict(removed, _k(KernelRole.CUSTOM)) == ("Check", "kernel.custom_name_gone")
    changed = _change(
        "f(Tensor self) -> Tensor", "f(Tensor self, int n) -> Tensor", ChangeKind.SIGNATURE
    )
    assert _verdict(changed, _k(KernelRole.CUSTOM)) == ("Test", "kernel.custom_schema_changed")
    # an explicit autocast signature does not break on a rename (C++ has no names)
    renamed = _change(
        "f(Tensor grad) -> Tensor", "f(Tensor grad_output) -> Tensor", ChangeKind.SIGNATURE
    )
    autocast = _k(KernelRole.AUTOCAST, source=KernelSource.CPP, explicit_signature=True)
    assert _verdict(renamed, autocast) == ("Test", "kernel.autocast_follows")
    assert _verdict(changed, autocast) == ("Shim", "kernel.autocast_signature_breaks")
    # a move across '*', a size annotation, the returns' names: the C++ signature is kept
    for old, new in [
        ("f(Tensor self, bool k=False) -> Tensor", "f(Tensor self, *, bool k=False) -> Tensor"),
        ("f(Tensor self, int[2] s) -> Tensor", "f(Tensor self, int[] s) -> Tensor"),
        ("f(Tensor self) -> (Tensor a, Tensor b)", "f(Tensor self) -> (Tensor x, Tensor y)"),
    ]:
        c = _change(old, new, ChangeKind.SIGNATURE)
        assert _verdict(c, _k(KernelRole.KERNEL, source=KernelSource.CPP)) == (
            "Check",
            "kernel.schema_compatible",
        )
    # int -> SymInt and a mutability change
    symint = _change(
        "f(Tensor self, int[] s) -> Tensor",
        "f(Tensor self, SymInt[] s) -> Tensor",
        ChangeKind.SIGNATURE,
    )
    assert _verdict(symint, _k(KernelRole.KERNEL)) == ("Test", "kernel.schema_behaviour")
    mutable = _change(
        "f(Tensor self) -> Tensor", "f(Tensor(a!) self) -> Tensor", ChangeKind.SIGNATURE
    )
    assert _verdict(mutable, _k(KernelRole.KERNEL)) == ("Shim", "kernel.signature_breaks")
    # a yaml copy that equals neither side: said so, and the verdict follows the change
    copy = _k(KernelRole.KERNEL, schema="f(Tensor self, float n) -> Tensor")
    facts, why = kernel_facts(changed, copy)
    assert "copy_matches_new" not in facts
    assert "the backend's func: copy differs from the old schema too" in why
