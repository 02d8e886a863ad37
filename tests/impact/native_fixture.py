"""Real shared objects for the native tests, built with the machine's C++ compiler.

A tiny C++ "upstream" in two versions, laid out as torch installs itself (``torch/lib``,
``torch/include``, ``torch/__init__.py``), and a "downstream" package whose extension
module loads a library linked against upstream v1 (``-Wl,--no-as-needed``: every
``DT_NEEDED`` entry is kept):

============ ================================ ======================================
symbol       v1 (``torch/lib/libup.so``)      v2
============ ================================ ======================================
``ns::f``    ``f(int)``                       ``f(int, bool)``: signature changed
``ns::g``    ``g()``                          removed
``ns::h``    ``h(int)``                       kept
``ns::m``    ``m()``                          moved to ``libup2.so``, which v2's
                                              ``libup.so`` needs: still loaded
``ns::k``    ``k()``                          moved to ``libelse.so``, which nothing
                                              loads
``ns::w``    ``w()``                          removed; the downstream takes it weakly
============ ================================ ======================================

The downstream ``dpkg``: ``dpkg/lib/libdown.so`` (RUNPATH ``$ORIGIN``) calls all six and
is loaded at import through ``dpkg/_C<this Python's extension suffix>`` (RUNPATH
``$ORIGIN/lib``), which ``dpkg/__init__.py`` imports at module level. Tests that need a
compiler skip with a reason when none is found (CI has one).
"""

from __future__ import annotations

import shutil
import subprocess
import zipfile
from dataclasses import dataclass
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

import pytest

UP_V1 = """\
namespace ns {
int f(int x) { return x + 1; }
int g() { return 2; }
int h(int x) { return x * 3; }
int m() { return 4; }
int k() { return 5; }
void w() {}
}
"""
UP_V2 = """\
namespace ns {
int f(int x, bool y) { return y ? x : -x; }
int h(int x) { return x * 3; }
}
"""
UP2_V2 = "namespace ns { int m() { return 4; } }\n"
ELSE_V2 = "namespace ns { int k() { return 5; } }\n"
HEADER_V1 = """\
#pragma once
namespace ns {
int f(int x);
int g();
int h(int x);
int m();
int k();
void w();
}  // namespace ns
"""
HEADER_V2 = """\
#pragma once
namespace ns {
int f(int x, bool y);
int h(int x);
int m();
int k();
}  // namespace ns
"""
DOWN = """\
namespace ns {
int f(int); int g(); int h(int); int m(); int k();
void w() __attribute__((weak));
}
extern "C" int down_entry(int x) {
  if (ns::w) ns::w();
  return ns::f(x) + ns::g() + ns::h(x) + ns::m() + ns::k();
}
"""
EXTENSION = """\
extern "C" int down_entry(int);
extern "C" void* PyInit__C() { return down_entry(1) ? nullptr : nullptr; }
"""
INIT_PY = '''\
"""dpkg: a backend package whose extension module links the upstream."""
import os

from dpkg import _C  # loads lib/libdown.so through DT_NEEDED


def version():
    return os.environ.get("DPKG_VERSION", "0")
'''
# the running interpreter's own suffix, so that a test can really import it
EXTENSION_FILE = "_C" + next(s for s in EXTENSION_SUFFIXES if s.endswith(".so") and s != ".so")
IMPORT_LINE = 4  # the line of ``from dpkg import _C`` in INIT_PY


def compiler() -> str:
    found = shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")
    if found is None:
        pytest.skip(
            "no C++ compiler (g++, c++ or clang++) on PATH: the native tests build ELF files"
        )
    return found


def _build(cxx: str, out: Path, source: str, *flags: str) -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    src = out.with_suffix(".cpp") if out.suffix == ".so" else out.parent / (out.name + ".cpp")
    src.write_text(source)
    cmd = [cxx, "-shared", "-fPIC", "-O0", "-o", str(out), str(src), *flags]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    src.unlink()
    return out


def _torch_python(root: Path, version: str) -> None:
    (root / "torch").mkdir(parents=True, exist_ok=True)
    (root / "torch" / "__init__.py").write_text(f'__version__ = "{version}"\n')
    (root / "torch" / "version.py").write_text(f'__version__ = "{version}"\n')


@dataclass
class NativeTrees:
    old: Path  # upstream v1 tree
    new: Path  # upstream v2 tree
    down: Path  # downstream tree (dpkg/...)

    def down_wheel(self, where: Path, extra: dict[str, bytes] | None = None) -> Path:
        """The downstream as a wheel (``dpkg-1.0-py3-none-any.whl``), built with zipfile."""
        return _wheel(self.down, where / "dpkg-1.0-py3-none-any.whl", "dpkg", extra)

    def up_wheel(self, which: str, where: Path) -> Path:
        root = self.old if which == "old" else self.new
        version = "1.0" if which == "old" else "2.0"
        return _wheel(root, where / f"torch-{version}-py3-none-any.whl", "torch", None)


def _wheel(root: Path, out: Path, name: str, extra: dict[str, bytes] | None) -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        for file in sorted(root.rglob("*")):
            if file.is_file():
                zf.write(file, file.relative_to(root).as_posix())
        for rel, data in (extra or {}).items():
            zf.writestr(rel, data)
        version = out.name.split("-")[1]
        zf.writestr(f"{name}-{version}.dist-info/METADATA", f"Name: {name}\nVersion: {version}\n")
    return out


def build_native_trees(base: Path) -> NativeTrees:
    cxx = compiler()
    old, new, down = base / "up-v1", base / "up-v2", base / "down"
    _torch_python(old, "1.0")
    _torch_python(new, "2.0")
    (old / "torch/include/up").mkdir(parents=True)
    (old / "torch/include/up/api.h").write_text(HEADER_V1)
    (new / "torch/include/up").mkdir(parents=True)
    (new / "torch/include/up/api.h").write_text(HEADER_V2)
    soname = "-Wl,-soname,{}"
    _build(cxx, old / "torch/lib/libup.so", UP_V1, soname.format("libup.so"))
    lib2 = new / "torch/lib"
    _build(cxx, lib2 / "libup2.so", UP2_V2, soname.format("libup2.so"))
    _build(cxx, lib2 / "libelse.so", ELSE_V2, soname.format("libelse.so"))
    _build(
        cxx,
        lib2 / "libup.so",
        UP_V2,
        soname.format("libup.so"),
        f"-L{lib2}",
        "-Wl,--no-as-needed",
        "-lup2",
        "-Wl,-rpath,$ORIGIN",
    )
    pkg = down / "dpkg"
    _build(
        cxx,
        pkg / "lib" / "libdown.so",
        DOWN,
        soname.format("libdown.so"),
        f"-L{old / 'torch/lib'}",
        "-Wl,--no-as-needed",
        "-lup",
        "-Wl,-rpath,$ORIGIN",
    )
    _build(
        cxx,
        pkg / EXTENSION_FILE,
        EXTENSION,
        f"-L{pkg / 'lib'}",
        "-Wl,--no-as-needed",
        "-ldown",
        "-Wl,-rpath,$ORIGIN/lib",
    )
    (pkg / "__init__.py").write_text(INIT_PY)
    return NativeTrees(old, new, down)
