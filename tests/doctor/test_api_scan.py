"""The static API scan: a synthetic torch tree for each rule, then the installed torch."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from instep.doctor.api_scan import InstalledTorch, RefKind, Verdict, scan_test_sources
from instep.errors import MissingInput

from .conftest import needs_torch


def _write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")


@pytest.fixture
def fake_torch(tmp_path) -> InstalledTorch:
    """A small torch-shaped package: re-exports, star imports, __getattr__, a config."""
    root = tmp_path / "site" / "torch"
    _write(root, "__init__.py", "from torch._C import *\n__version__ = '9.9'\n")
    _write(root, "version.py", "__version__ = '9.9.0+fake'\n")
    (root / "_C.cpython-311-x86_64-linux-gnu.so").write_bytes(b"\0")
    _write(root, "_inductor/__init__.py", "")
    _write(
        root,
        "_inductor/codecache.py",
        """
        from torch._inductor.cpp_builder import get_cpp_flags as cpp_flags
        from .runtime_utils import cache_dir
        try:
            from fast import accel
        except ImportError:
            accel = None
        if True:
            CONDITIONAL = 1
        class PyCodeCache:
            modules = []
            def load(self): ...
        class Derived(PyCodeCache):
            pass
        def code_hash(x): ...
        """,
    )
    _write(root, "_inductor/cpp_builder.py", "def get_cpp_flags(): ...\n")
    _write(root, "_inductor/runtime_utils.py", "def cache_dir(): ...\n")
    _write(
        root,
        "_inductor/config.py",
        """
        import sys
        debug = False
        class triton:
            cudagraphs = False
        from torch.utils._config_module import install_config_module
        install_config_module(sys.modules[__name__])
        """,
    )
    _write(root, "utils/__init__.py", "")
    _write(
        root,
        "utils/_config_module.py",
        "import types\nclass ConfigModule(types.ModuleType):\n    def patch(self, *a, **k): ...\n",
    )
    _write(root, "_dynamo/__init__.py", "from .lazy import *\n")
    _write(root, "_dynamo/lazy.py", "def __getattr__(name): ...\n")
    _write(root, "_star/__init__.py", "from ._impl import *\n")
    _write(root, "_star/_impl.py", "def exported(): ...\n")
    return InstalledTorch(root)


def _verdicts(report) -> dict[str, tuple[Verdict, int, RefKind]]:
    return {f.ref.target: (f.verdict, f.ref.line, f.ref.kind) for f in report.findings}


def test_every_kind_of_reference_against_a_known_tree(tmp_path, fake_torch):
    test = tmp_path / "tests" / "test_mod.py"
    _write(
        test.parent,
        "test_mod.py",
        """
        import torch
        import torch._inductor.codecache as cc
        from torch._inductor import config
        from torch._inductor.codecache import cpp_prefix_path, code_hash
        from torch._inductor.codecache import cpp_flags, cache_dir, accel, CONDITIONAL
        from torch._star import exported, not_exported
        from unittest import mock

        @config.patch(debug=True, no_such_key=1)
        @config.patch({"triton.cudagraphs": True})
        @mock.patch("torch._inductor.codecache.gone_fn")
        def test_it():
            torch._inductor.codecache.PyCodeCache.load
            torch._inductor.codecache.PyCodeCache.nope
            torch._inductor.codecache.Derived.maybe_inherited
            cc.code_hash("x").hexdigest
            config.triton.cudagraphs
            config.triton.bogus
            torch._dynamo.anything_goes
            torch._C._private_binding
            mock.patch.object(cc, "missing_attr")
            torch.randn(3)  # public: not checked

        def shadowed(config):
            config.not_the_module  # a parameter, not the import
        """,
    )
    report = scan_test_sources([test.parent], fake_torch)
    got = _verdicts(report)
    mod = "torch._inductor.codecache"
    assert got[f"{mod}.cpp_prefix_path"] == (Verdict.MISSING, 5, RefKind.IMPORT)
    assert got[f"{mod}.code_hash"][0] is Verdict.FOUND
    assert got[f"{mod}.cpp_flags"][0] is Verdict.FOUND  # re-export, followed
    assert got[f"{mod}.cache_dir"][0] is Verdict.FOUND  # relative re-export
    assert got[f"{mod}.accel"][0] is Verdict.FOUND  # import inside try
    assert got[f"{mod}.CONDITIONAL"][0] is Verdict.FOUND  # bound inside if
    assert got["torch._star.exported"][0] is Verdict.FOUND  # through a star import
    assert got["torch._star.not_exported"][0] is Verdict.MISSING
    assert got["torch._inductor.config.debug"] == (Verdict.FOUND, 10, RefKind.CONFIG_KEY)
    assert got["torch._inductor.config.no_such_key"] == (Verdict.MISSING, 10, RefKind.CONFIG_KEY)
    assert got["torch._inductor.config.patch"][0] is Verdict.FOUND  # a ConfigModule method
    assert got["torch._inductor.config.triton.cudagraphs"][0] is Verdict.FOUND
    assert got["torch._inductor.config.triton.bogus"] == (Verdict.MISSING, 19, RefKind.ATTRIBUTE)
    assert got[f"{mod}.gone_fn"] == (Verdict.MISSING, 12, RefKind.PATCH_TARGET)
    assert got[f"{mod}.missing_attr"][0] is Verdict.MISSING
    assert got[f"{mod}.PyCodeCache.load"][0] is Verdict.FOUND
    assert got[f"{mod}.PyCodeCache.nope"][0] is Verdict.MISSING
    assert got[f"{mod}.Derived.maybe_inherited"][0] is Verdict.UNVERIFIABLE
    assert got[f"{mod}.code_hash"][0] is Verdict.FOUND  # call results are not followed
    assert got["torch._dynamo.anything_goes"][0] is Verdict.UNVERIFIABLE  # __getattr__
    assert got["torch._C._private_binding"][0] is Verdict.UNVERIFIABLE  # extension
    assert "torch.randn" not in got
    assert not any("not_the_module" in t for t in got)
    assert report.torch_version == "9.9.0+fake"
    missing = {(f.ref.where, f.ref.target) for f in report.missing}
    assert (f"{test}:5", f"{mod}.cpp_prefix_path") in missing
    assert report.as_dict()["counts"]["missing"] == len(report.missing)


def test_unparsable_file_is_skipped_with_a_warning(tmp_path, fake_torch, caplog):
    bad = tmp_path / "test_bad.py"
    bad.write_text("def broken(:\n")
    report = scan_test_sources([bad], fake_torch)
    assert str(bad) in report.skipped and report.findings == []
    assert "skipping" in caplog.text


def test_absent_path_is_one_clear_error(tmp_path, fake_torch):
    with pytest.raises(MissingInput, match="does not exist"):
        scan_test_sources([tmp_path / "nope.py"], fake_torch)


@needs_torch
def test_the_installed_torch_lacks_cpp_prefix_path(tmp_path):
    """Seed 000 6.1/11: tests of another torch import a name this torch does not have."""
    test = tmp_path / "test_codecache.py"
    test.write_text(
        "import torch\n"
        "from torch._inductor.codecache import PyCodeCache\n"
        "from torch._inductor.codecache import cpp_prefix_path\n"
        "from torch._inductor import config\n"
        "\n"
        "@config.patch(cpp_wrapper=True)\n"
        "def test_x():\n"
        "    torch._inductor.codecache.cpp_prefix_path()\n"
    )
    report = scan_test_sources([test])
    missing = [(f.ref.line, f.ref.target) for f in report.missing]
    assert missing == [
        (3, "torch._inductor.codecache.cpp_prefix_path"),
        (8, "torch._inductor.codecache.cpp_prefix_path"),
    ]
    found = {f.ref.target for f in report.by_verdict(Verdict.FOUND)}
    assert "torch._inductor.codecache.PyCodeCache" in found
    assert "torch._inductor.config.cpp_wrapper" in found
    assert report.torch_version and report.torch_version.startswith("2.")
