"""The native index (instep.elfindex) on real ELF files the machine's compiler builds."""

from __future__ import annotations

import subprocess
import zipfile

import pytest

from instep.elfindex.demangle import demangle, source_names, split_declaration
from instep.elfindex.files import SharedObjectFiles, WheelMembers
from instep.elfindex.model import Binding, SharedObject, SymbolType, Unreadable
from instep.pyindex.cache import ContentCache

from .native_fixture import EXTENSION_FILE, build_native_trees


@pytest.fixture(scope="module")
def trees(tmp_path_factory):
    return build_native_trees(tmp_path_factory.mktemp("native"))


def test_a_library_s_exports_imports_and_dynamic_section(trees):
    files = SharedObjectFiles(root=trees.new)
    up = files.read("torch/lib/libup.so")
    assert isinstance(up, SharedObject)
    assert up.machine and up.elf_class in (32, 64)
    assert up.soname == "libup.so" and "libup2.so" in up.needed
    assert (up.runpath or up.rpath) == ("$ORIGIN",)
    assert up.defines("_ZN2ns1fEib") and up.defines("_ZN2ns1hEi")  # f(int, bool), h(int)
    assert not up.defines("_ZN2ns1fEi") and not up.defines("_ZN2ns1gEv")
    f = up.exported("_ZN2ns1fEib")
    assert f is not None and f.type is SymbolType.FUNC and f.binding is Binding.GLOBAL


def test_undefined_symbols_keep_their_binding(trees):
    down = SharedObjectFiles(root=trees.down).read("dpkg/lib/libdown.so")
    assert isinstance(down, SharedObject)
    names = set(down.imports)
    assert {"_ZN2ns1fEi", "_ZN2ns1gEv", "_ZN2ns1hEi", "_ZN2ns1mEv", "_ZN2ns1kEv"} <= names
    w = down.imported("_ZN2ns1wEv")
    assert w is not None and w.weak  # declared __attribute__((weak)): never fails a load
    assert not down.imported("_ZN2ns1gEv").weak  # type: ignore[union-attr]
    assert "libup.so" in down.needed and down.soname == "libdown.so"


def test_the_counts_agree_with_nm(trees):
    """A check against the toolchain (used here to check, never by the product)."""
    path = trees.down / "dpkg/lib/libdown.so"
    out = subprocess.run(
        ["nm", "-D", "--undefined-only", str(path)], capture_output=True, text=True
    )
    if out.returncode != 0:
        pytest.skip("no nm to check against")
    nm = {line.split()[-1].split("@")[0] for line in out.stdout.splitlines() if line.strip()}
    down = SharedObjectFiles(root=trees.down).read("dpkg/lib/libdown.so")
    assert set(down.imports) == nm  # type: ignore[union-attr]


def test_a_wheel_member_reads_as_the_file_does(trees, tmp_path):
    wheel = trees.down_wheel(tmp_path)
    from_wheel = SharedObjectFiles(wheel=wheel).read("dpkg/lib/libdown.so")
    from_tree = SharedObjectFiles(root=trees.down).read("dpkg/lib/libdown.so")
    assert isinstance(from_wheel, SharedObject) and isinstance(from_tree, SharedObject)
    assert from_wheel.imports == from_tree.imports and from_wheel.needed == from_tree.needed
    with zipfile.ZipFile(wheel) as zf:
        info = zf.getinfo("dpkg/lib/libdown.so")
        assert WheelMembers(wheel).read(info) == zf.read(info)


def test_extension_modules_and_versioned_names_are_listed(trees, tmp_path):
    (trees.down / "dpkg/lib/libdown.so.1").symlink_to("libdown.so")  # one library, two names
    try:
        paths = SharedObjectFiles(root=trees.down).paths()
    finally:
        (trees.down / "dpkg/lib/libdown.so.1").unlink()
    assert f"dpkg/{EXTENSION_FILE}" in paths
    assert sum(p.startswith("dpkg/lib/libdown.so") for p in paths) == 1


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"this is a linker script, not ELF\n", "not an ELF file"),
        (None, "truncated"),  # the first 200 bytes of a real library
    ],
)
def test_an_unreadable_file_says_why(trees, tmp_path, content, reason):
    real = (trees.down / "dpkg/lib/libdown.so").read_bytes()
    data = content if content is not None else real[:200]
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg/libbad.so").write_bytes(data)
    found = SharedObjectFiles(root=tmp_path).read("pkg/libbad.so")
    assert isinstance(found, Unreadable) and found.reason.startswith(reason), found
    with zipfile.ZipFile(tmp_path / "w.whl", "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("pkg/libbad.so", data)
    in_wheel = SharedObjectFiles(wheel=tmp_path / "w.whl").read("pkg/libbad.so")
    assert isinstance(in_wheel, Unreadable) and in_wheel.reason.startswith(reason)


def test_a_corrupt_member_is_unreadable_not_a_crash(trees, tmp_path):
    wheel = trees.down_wheel(tmp_path)
    data = bytearray(wheel.read_bytes())
    with zipfile.ZipFile(wheel) as zf:
        info = zf.getinfo("dpkg/lib/libdown.so")
    start = info.header_offset + 30 + len(info.filename) + 200
    data[start : start + 64] = bytes(64)  # zero a stretch of the deflate stream
    broken = tmp_path / "broken.whl"
    broken.write_bytes(bytes(data))
    found = SharedObjectFiles(wheel=broken).read("dpkg/lib/libdown.so")
    assert isinstance(found, Unreadable) and "corrupt" in found.reason


def test_a_warm_read_reads_nothing(trees, tmp_path):
    wheel = trees.up_wheel("new", tmp_path)
    cold = SharedObjectFiles(wheel=wheel, cache=ContentCache(tmp_path / "c", "elf-test"))
    first = cold.read("torch/lib/libup.so")
    assert cold.reads == 1
    warm = SharedObjectFiles(wheel=wheel, cache=ContentCache(tmp_path / "c", "elf-test"))
    again = warm.read("torch/lib/libup.so")
    assert warm.reads == 0
    assert isinstance(again, SharedObject) and again.exports == first.exports  # type: ignore[union-attr]
    assert warm.identity("torch/lib/libup.so").startswith("zip:")


def test_demangling_and_the_parts_of_a_declaration():
    name = "_ZN2at14namedinference15propagate_namesERKNS_6TensorEN3c108ArrayRefINS_7DimnameEEEb"
    text = demangle(name)
    assert text == (
        "at::namedinference::propagate_names(at::Tensor const&, c10::ArrayRef<at::Dimname>, bool)"
    )
    decl = split_declaration(text)
    assert decl.qualified == "at::namedinference::propagate_names"
    assert decl.parameters == "(at::Tensor const&, c10::ArrayRef<at::Dimname>, bool)"
    assert (decl.scope, decl.name) == ("at::namedinference", "propagate_names")
    assert source_names(name)[:3] == ["at", "namedinference", "propagate_names"]
    method = split_declaration(
        demangle("_ZNK5torch8autograd13SavedVariable6unpackESt10shared_ptrINS0_4NodeEE")
    )
    assert (method.qualified, method.qualifiers) == (
        "torch::autograd::SavedVariable::unpack",
        "const",
    )
    op = split_declaration(demangle("_ZN2atlsERSoRKNS_7DimnameE"))
    assert op.qualified == "at::operator<<" and op.scope == "at"
    template = split_declaration(demangle("_Z3maxIiET_S0_S0_"))
    assert (template.qualified, template.parameters) == ("max<int>", "(int, int)")
    assert split_declaration(demangle("_ZTVN2at6TensorE")).parameters is None  # vtable: data
    assert demangle("not_mangled") == "not_mangled" and demangle("_Zbad") == "_Zbad"


def test_a_member_is_read_from_the_kept_ranges_without_a_temporary_file(
    trees, tmp_path, monkeypatch
):
    from instep.elfindex import files

    def no_spool(*a, **k):
        raise AssertionError("the whole member was written out")

    monkeypatch.setattr(files.tempfile, "TemporaryFile", no_spool)
    found = SharedObjectFiles(wheel=trees.down_wheel(tmp_path)).read("dpkg/lib/libdown.so")
    assert isinstance(found, SharedObject) and "_ZN2ns1gEv" in found.imports


def test_tables_past_the_kept_head_are_read_from_a_second_inflate(trees, tmp_path, monkeypatch):
    from instep.elfindex import files

    monkeypatch.setattr(files, "HEAD_KEPT", 64)  # not even the program headers are kept
    found = SharedObjectFiles(wheel=trees.down_wheel(tmp_path)).read("dpkg/lib/libdown.so")
    tree = SharedObjectFiles(root=trees.down).read("dpkg/lib/libdown.so")
    assert isinstance(found, SharedObject) and found.imports == tree.imports  # type: ignore[union-attr]
    assert found.needed == tree.needed  # type: ignore[union-attr]


def test_names_of_the_cxx_runtime_are_told_apart():
    from instep.impact.join.linked_symbols import CXX_RUNTIME_NAME

    runtime = [
        "_ZSt21ios_base_library_initv",  # std::ios_base_library_init()
        "_ZNSt15__exception_ptr13exception_ptr9_M_addrefEv",
        "_ZNKSt5ctypeIcE8do_widenEc",
        "_ZNSo3putEc",  # std::ostream::put
        "_ZTVSt9exception",
        "_ZN9__gnu_cxx18__exchange_and_addEPVii",
        "__cxa_throw",
    ]
    torch = [
        "_ZN2at14namedinference15are_names_equalEPN3c1010TensorImplES3_",
        "_ZN3c104SymIntC1El",
        # std::vector<at::Tensor>::reserve: a std:: template only torch instantiates
        "_ZNSt6vectorIN2at6TensorESaIS1_EE7reserveEm",
    ]
    assert all(CXX_RUNTIME_NAME.match(n) for n in runtime)
    assert not any(CXX_RUNTIME_NAME.match(n) for n in torch)


def test_a_tree_reached_through_a_symlinked_directory_is_listed(trees, tmp_path):
    """``triage --upstream-old`` reads the run's installed torch through a link."""
    (tmp_path / "run-torch").mkdir()
    (tmp_path / "run-torch/torch").symlink_to(trees.new / "torch", target_is_directory=True)
    (tmp_path / "run-torch/torch/lib/again").symlink_to("..", target_is_directory=True)
    try:
        paths = SharedObjectFiles(root=tmp_path / "run-torch").paths()
    finally:
        (tmp_path / "run-torch/torch/lib/again").unlink()
    assert paths == ["torch/lib/libelse.so", "torch/lib/libup.so", "torch/lib/libup2.so"]
