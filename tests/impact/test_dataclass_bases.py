"""Dataclasses whose bases are defined in other files: ``pyindex.dataclass_init``'s
``SnapshotDataclasses``, checked against what Python builds.

Each test writes a small package of real modules to a temp dir, indexes every file on its
own (as the per-file cache does), resolves the bases across files, and compares the
synthesised ``__init__`` with ``inspect.signature`` of the class that ``importlib`` imports.
"""

from __future__ import annotations

import gc
import hashlib
import importlib
import inspect
import sys
from pathlib import Path

import pytest

from instep.impact.no_gc import no_cyclic_gc
from instep.impact.upstream import dataclass_bases
from instep.pyindex.dataclass_init import SnapshotDataclasses
from instep.pyindex.symbols import index_text

from .gitrepo import impact_of_commit


def _snapshot(root: Path, files: dict[str, str]) -> SnapshotDataclasses:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    indexes = {rel: index_text(rel, text) for rel, text in files.items()}
    return SnapshotDataclasses(list(files), indexes.get)


@pytest.fixture
def import_from(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    loaded: list[str] = []

    def load(module: str):
        loaded.append(module)
        return importlib.import_module(module)

    yield load
    for name in list(sys.modules):
        if any(name == m or name.startswith(m.split(".")[0] + ".") for m in loaded):
            sys.modules.pop(name, None)
        if any(name == m.split(".")[0] for m in loaded):
            sys.modules.pop(name, None)


def _params(signature: inspect.Signature) -> list[tuple[str, bool, object]]:
    """(name, keyword-only, default): a constant default as is, another one (Python's
    default_factory sentinel, our ``list()``) as 'computed', none as 'required'."""
    out = []
    for p in signature.parameters.values():
        if p.default is p.empty:
            default: object = "required"
        elif isinstance(p.default, (int, float, str)):
            default = p.default
        else:
            default = "computed"
        out.append((p.name, p.kind is p.KEYWORD_ONLY, default))
    return out


def _same_as_python(snap: SnapshotDataclasses, path: str, cls: type) -> str:
    """Assert the synthesised ``cls.__init__`` binds as Python's; give its signature."""
    sym, _ = snap.inits(path)[f"{cls.__qualname__}.__init__"]
    namespace: dict = {}
    exec(f"def synthesised({sym.signature}): pass", namespace)  # our own output
    assert _params(inspect.signature(namespace["synthesised"])) == _params(
        inspect.signature(cls.__init__)
    )
    return sym.signature


def test_fields_of_a_base_in_another_file_come_first(tmp_path, import_from):
    files = {
        "dca/__init__.py": "",
        "dca/base.py": (
            "from dataclasses import dataclass\n\n"
            "@dataclass\nclass Base:\n    a: int\n    b: str = 'x'\n"
        ),
        "dca/child.py": (
            "from dataclasses import dataclass\nfrom dca.base import Base\n\n"
            "@dataclass\nclass Child(Base):\n    c: float = 1.5\n"
        ),
    }
    snap = _snapshot(tmp_path, files)
    child = import_from("dca.child").Child
    assert _same_as_python(snap, "dca/child.py", child) == "self, a, b='x', c=1.5"
    assert snap.inits("dca/child.py")["Child.__init__"][1] == {"dca/base.py"}
    # the file's own index (the cached one) does not know the base: no __init__ there
    assert "Child.__init__" not in index_text("dca/child.py", files["dca/child.py"]).symbols


CHAIN = {
    "dcb/__init__.py": "",
    "dcb/root.py": """
from dataclasses import InitVar, dataclass, field
from typing import ClassVar


@dataclass
class Root:
    a: int
    b: int = 2
    counter: ClassVar[int] = 0
    hidden: int = field(default=0, init=False)
    seed: InitVar[int] = 7
    tags: list = field(default_factory=list)

    def __post_init__(self, seed):
        pass
""",
    "dcb/mid.py": """
from dataclasses import KW_ONLY, dataclass

from .root import Root


@dataclass
class Mid(Root):
    b: int = 20
    m: str = "m"
    _: KW_ONLY
    flag: bool = False


class Plain(Mid):
    note = "not a dataclass: inherits Mid's fields as they are"
""",
    "dcb/leaf.py": """
from dataclasses import dataclass

import dcb.mid as m


@dataclass
class Leaf(m.Plain):
    a: int = 1
    z: float = 0.5
""",
}


def test_a_chain_across_three_files_in_mro_order(tmp_path, import_from):
    snap = _snapshot(tmp_path, CHAIN)
    leaf = import_from("dcb.leaf").Leaf
    mid = import_from("dcb.mid").Mid
    # a (overridden: keeps its first place, takes the new default), b (Mid's default),
    # ClassVar and init=False left out, InitVar kept, the KW_ONLY field last
    assert _same_as_python(snap, "dcb/leaf.py", leaf) == (
        "self, a=1, b=20, seed=7, tags=list(), m='m', z=0.5, *, flag=False"
    )
    assert _same_as_python(snap, "dcb/mid.py", mid) == (
        "self, a, b=20, seed=7, tags=list(), m='m', *, flag=False"
    )
    assert snap.inits("dcb/leaf.py")["Leaf.__init__"][1] == {"dcb/mid.py", "dcb/root.py"}


def test_kw_only_in_the_base_and_a_reexport_through_the_package(tmp_path, import_from):
    files = {
        "dcc/__init__.py": "from dcc.impl import KBase\n",
        "dcc/impl.py": (
            "from dataclasses import dataclass, field\n\n"
            "@dataclass(kw_only=True)\nclass KBase:\n    k: int\n"
            "    j: int = field(default=3, kw_only=False)\n"
        ),
        "dcc/user.py": (
            "from dataclasses import dataclass\nfrom dcc import KBase\n\n"
            "@dataclass\nclass User(KBase):\n    p: int = 4\n"
        ),
    }
    snap = _snapshot(tmp_path, files)
    user = import_from("dcc.user").User
    assert _same_as_python(snap, "dcc/user.py", user) == "self, j=3, p=4, *, k"


def test_an_unresolvable_base_gives_no_init(tmp_path):
    files = {
        "dcd/__init__.py": "",
        "dcd/out.py": """
from dataclasses import dataclass

from elsewhere.pkg import Remote
import dcd.factory as f


@dataclass
class FromOutside(Remote):
    a: int


@dataclass
class FromACall(f.make()):
    a: int


@dataclass
class FromAFunction(f.make):
    a: int


@dataclass
class FromMissing(f.Missing):
    a: int
""",
        "dcd/factory.py": "def make():\n    return object\n",
    }
    snap = _snapshot(tmp_path, files)
    assert snap.inits("dcd/out.py") == {}


def test_a_non_dataclass_base_in_another_file_brings_no_fields(tmp_path, import_from):
    files = {
        "dce/__init__.py": "",
        "dce/plain.py": "class Plain:\n    a: int\n    b: int = 1\n",
        "dce/data.py": (
            "from dataclasses import dataclass\nfrom dce.plain import Plain\n\n"
            "@dataclass\nclass Data(Plain):\n    d: int\n"
        ),
    }
    snap = _snapshot(tmp_path, files)
    data = import_from("dce.data").Data
    assert _same_as_python(snap, "dce/data.py", data) == "self, d"


# ---------------------------------------------------------------- end to end: instep impact

BASES_V1 = """
from dataclasses import dataclass


@dataclass
class ReqBase:
    name: str


@dataclass
class OptBase:
    name: str
"""

BASES_V2 = BASES_V1.replace(
    "class ReqBase:\n    name: str\n", "class ReqBase:\n    name: str\n    layout: str\n"
).replace("class OptBase:\n    name: str\n", "class OptBase:\n    name: str\n    extra: int = 0\n")

CHILDREN = """
from dataclasses import dataclass

from torch._inductor.config_bases import ReqBase
import torch._inductor.config_bases as bases


@dataclass
class ReqChild(ReqBase):
    size: int


@dataclass
class OptChild(bases.OptBase):
    size: int = 1
"""

DOWN = """
from torch._inductor.config_children import OptChild, ReqChild


def req():
    return ReqChild("a", 2)


def opt():
    return OptChild("a", size=2)
"""


@pytest.fixture(scope="module")
def doc(tmp_path_factory):
    # the commit changes only the bases' file; the subclasses' file stays as it is
    return impact_of_commit(
        tmp_path_factory.mktemp("dcbase"),
        {
            "torch/_inductor/config_bases.py": BASES_V1,
            "torch/_inductor/config_children.py": CHILDREN,
        },
        {"torch/_inductor/config_bases.py": BASES_V2},
        "[inductor] config bases gain fields (#12)",
        {"torch_npu/_inductor/build.py": DOWN},
    )


def _coupling(doc: dict, upstream: str, line_text: str) -> dict:
    unit = next(u for u in doc["units"] if u["pr"] == 12)
    lines = DOWN.split("\n")
    return next(
        c
        for c in unit["couplings"]
        if c["upstream"].endswith("::" + upstream)
        and lines[int(c["downstream"].rsplit(":", 1)[1]) - 1].strip() == line_text
    )


def test_a_base_in_another_file_gaining_a_required_field_breaks_the_subclass(doc):
    c = _coupling(doc, "ReqChild.__init__", 'return ReqChild("a", 2)')
    assert (c["action"], c["rule"]) == ("Shim", "constructor.call_breaks")
    assert "does not pass 'size', which it requires" in c["detail"]
    unit = next(u for u in doc["units"] if u["pr"] == 12)
    change = next(x for x in unit["changes"] if x["symbol"].endswith("::ReqChild.__init__"))
    assert change["symbol"].startswith("torch/_inductor/config_children.py::")
    assert change["detail"] == "signature: (self, name, size) -> (self, name, layout, size)"


def test_a_base_gaining_a_defaulted_field_fits_the_subclass_calls(doc):
    c = _coupling(doc, "OptChild.__init__", 'return OptChild("a", size=2)')
    assert (c["action"], c["rule"]) == ("Test", "signature.calls_fit")


def test_a_root_commit_in_the_range_is_read_without_a_parent(tmp_path):
    """An orphan history merged into the range brings a parentless commit that adds a
    dataclass hierarchy: it has no ``commit^`` to compare with, and the analysis goes on."""
    import json

    from instep.cli import run as cli_run

    from .gitrepo import RepoBuilder

    up = RepoBuilder(tmp_path / "pytorch")
    for package in ("torch/__init__.py", "torch/_inductor/__init__.py"):
        up.write(package, "")
    up.commit("base")
    up.tag("v1")
    up.git("checkout", "-q", "--orphan", "side")
    up.git("rm", "-q", "-rf", ".")
    up.write("torch/_inductor/config_bases.py", BASES_V1)
    up.write("torch/_inductor/config_children.py", CHILDREN)
    root = up.commit("side history")
    up.git("checkout", "-q", "main")
    up.git("merge", "-q", "--allow-unrelated-histories", "--no-edit", "side")
    up.tag("v2")
    down = tmp_path / "torch_npu"
    (down / "torch_npu").mkdir(parents=True)
    (down / "torch_npu" / "__init__.py").write_text("", encoding="utf-8")
    (down / "torch_npu" / "build.py").write_text(DOWN, encoding="utf-8")
    out = tmp_path / "impact.json"
    args = ["impact", "--upstream-git", str(up.path), "--range", "v1..v2"]
    args += ["--downstream", str(down), "--format", "json", "--out", str(out), "--no-cache"]
    assert cli_run(args) == 0
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert root[:12] in {u["id"][:12] for u in doc["units"]} | {
        (u.get("commit") or "")[:12] for u in doc["units"]
    }


class _MemorySnapshot:
    """A snapshot in memory with sha256 digests; counts what is read."""

    def __init__(self, files: dict[str, str]) -> None:
        self.files = files
        self.reads: list[str] = []

    def paths(self) -> list[str]:
        return sorted(self.files)

    def read(self, path: str) -> bytes:
        self.reads.append(path)
        return self.files[path].encode()

    def digest(self, path: str) -> str:
        return "sha256=" + hashlib.sha256(self.files[path].encode()).hexdigest()


def _base_gains_a_field() -> tuple[_MemorySnapshot, _MemorySnapshot]:
    """A dataclass ``Sub`` whose base in another file gains a required field."""
    sub = (
        "from dataclasses import dataclass\nfrom pkg.base import Base\n\n"
        "@dataclass\nclass Sub(Base):\n    y: int = 0\n"
    )
    base = "from dataclasses import dataclass\n\n@dataclass\nclass Base:\n    x: int\n"
    old = _MemorySnapshot({"pkg/__init__.py": "", "pkg/base.py": base, "pkg/sub.py": sub})
    new = _MemorySnapshot(
        {"pkg/__init__.py": "", "pkg/base.py": base + "    z: int\n", "pkg/sub.py": sub}
    )
    return old, new


def test_the_new_side_takes_unchanged_files_from_the_old_side():
    old, new = _base_gains_a_field()
    found = dataclass_bases.changes({"pkg/base.py"}, old, new)
    assert [(x.change.qualname, x.sources) for x in found] == [
        ("Sub.__init__", frozenset({"pkg/base.py"}))
    ]
    assert found[0].change.detail == "signature: (self, x, y=0) -> (self, x, z, y=0)"
    assert new.reads == ["pkg/base.py"]  # sub.py and __init__.py: the old side's bytes


def test_what_the_sides_read_is_freed_with_the_cyclic_collector_paused():
    """The analysis runs with the cyclic collector paused (impact/no_gc.py): a side's
    class tables hold its bound ``index``, so the sides, their bytes and indexes stayed
    alive to the end of the run (issue #32) unless released."""
    old, new = _base_gains_a_field()
    with no_cyclic_gc():
        found = dataclass_bases.changes({"pkg/base.py"}, old, new)
        deps = dataclass_bases.dependants(new, None, 1)
        alive = [o for o in gc.get_objects() if isinstance(o, dataclass_bases._Side)]
    assert [x.change.qualname for x in found] == ["Sub.__init__"]
    assert deps == {"pkg/sub.py": frozenset({"pkg/base.py"})}
    assert alive == []
