"""Constructions of upstream classes whose ``__init__`` changed: the constructor rules.

A real git repository (commit mode): one upstream commit adds a required field to one
dataclass and a defaulted one to another, inserts a parameter before others in a plain
class, renames a keyword, adds a required parameter to a base the downstream subclasses;
the downstream constructs them positionally, by keyword, through ``super().__init__``.
The synthesised dataclass ``__init__`` is checked on its own against Python's.
"""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from instep.pyindex.symbols import index_text

from .gitrepo import impact_of_one_commit

UTILS_V1 = """
from dataclasses import dataclass, field


@dataclass
class Spec:
    name: str
    size: int


@dataclass
class Opts:
    name: str
    size: int


class Plain:
    def __init__(self, name, size=1):
        self.name = name


class Renamed:
    def __init__(self, name):
        self.name = name


class Base:
    def __init__(self, name):
        self.name = name


class Tail:
    def __init__(self, name):
        self.name = name
"""

UTILS_V2 = (
    UTILS_V1.replace(
        "class Spec:\n    name: str\n", "class Spec:\n    name: str\n    layout: str\n"
    )
    .replace(
        "class Opts:\n    name: str\n    size: int\n",
        "class Opts:\n    name: str\n    size: int\n    extra: int = 0\n"
        "    more: list = field(default_factory=list)\n",
    )
    .replace("def __init__(self, name, size=1):", "def __init__(self, name, dtype, size=1):")
    .replace(
        "class Renamed:\n    def __init__(self, name):",
        "class Renamed:\n    def __init__(self, label):",
    )
    .replace(
        "class Base:\n    def __init__(self, name):",
        "class Base:\n    def __init__(self, name, device):",
    )
    .replace(
        "class Tail:\n    def __init__(self, name):",
        "class Tail:\n    def __init__(self, name, *, fast=False):",
    )
)

DOWN = """
from torch._inductor.utils import Base, Opts, Plain, Renamed, Spec, Tail


def spec():
    return Spec("a", 2)


def opts():
    return Opts("a", 2)


def plain():
    return Plain("a", 4)


def plain_by_name():
    return Plain("a", size=4)


def renamed():
    return Renamed(name="a")


def tail():
    return Tail("a")


class NpuBase(Base):
    def __init__(self, name):
        super().__init__(name)


class NpuBaseAdapted(Base):
    def __init__(self, name, device):
        super().__init__(name, device)
"""


@pytest.fixture(scope="module")
def doc(tmp_path_factory):
    return impact_of_one_commit(
        tmp_path_factory.mktemp("ctor"),
        "torch/_inductor/utils.py",
        UTILS_V1,
        UTILS_V2,
        "[inductor] constructors change (#11)",
        {"torch_npu/_inductor/build.py": DOWN},
    )


def _by_line(doc: dict) -> dict[tuple[str, str], dict]:
    """(upstream qualname, downstream line text) -> coupling, for the constructor changes."""
    unit = next(u for u in doc["units"] if u["pr"] == 11)
    lines = DOWN.split("\n")
    out = {}
    for c in unit["couplings"]:
        if c["kind"] == "inherited_path":
            continue
        line = int(c["downstream"].rsplit(":", 1)[1])
        out[(c["upstream"].split("::")[1], lines[line - 1].strip())] = c
    return out


def test_a_dataclass_field_without_default_breaks_a_positional_construction(doc):
    c = _by_line(doc)[("Spec.__init__", 'return Spec("a", 2)')]
    assert (c["action"], c["risk"], c["code_change"]) == ("Shim", "high", "yes")
    assert c["rule"] == "constructor.call_breaks"
    assert "does not pass 'size', which it requires" in c["detail"]
    # the Shim carries its evidence: the place, its call, what does not bind
    assert c["evidence"].startswith(f'at {c["downstream"]} (`return Spec("a", 2)`): ')
    assert "does not pass 'size', which it requires" in c["evidence"]
    # the change is the synthesised __init__'s signature, old -> new
    unit = next(u for u in doc["units"] if u["pr"] == 11)
    change = next(x for x in unit["changes"] if x["symbol"].endswith("::Spec.__init__"))
    assert change["detail"] == ("signature: (self, name, size) -> (self, name, layout, size)")


def test_fields_appended_with_defaults_break_nothing(doc):
    got = _by_line(doc)
    c = got[("Opts.__init__", 'return Opts("a", 2)')]
    assert (c["action"], c["rule"]) == ("Test", "signature.calls_fit")
    assert not any(k[0].startswith("Opts") and v["action"] == "Shim" for k, v in got.items())


def test_a_parameter_inserted_before_others_shifts_positional_arguments(doc):
    got = _by_line(doc)
    c = got[("Plain.__init__", 'return Plain("a", 4)')]
    assert (c["action"], c["rule"]) == ("Shim", "constructor.call_breaks")
    assert (
        "passes argument 2 positionally, which bound 'size' and now binds 'dtype'" in (c["detail"])
    )
    # by keyword the old argument still lands on 'size', but 'dtype' is now required
    c = got[("Plain.__init__", 'return Plain("a", size=4)')]
    assert c["rule"] == "constructor.call_breaks"
    assert "does not pass 'dtype', which it requires" in c["detail"]


def test_a_renamed_keyword_breaks_a_construction_by_name(doc):
    c = _by_line(doc)[("Renamed.__init__", 'return Renamed(name="a")')]
    assert (c["action"], c["rule"]) == ("Shim", "constructor.call_breaks")
    assert "passes keyword 'name', which it does not accept" in c["detail"]


def test_a_new_keyword_only_parameter_with_a_default_breaks_nothing(doc):
    c = _by_line(doc)[("Tail.__init__", 'return Tail("a")')]
    assert (c["action"], c["rule"]) == ("Test", "signature.calls_fit")


def test_super_init_in_a_downstream_subclass_is_a_construction(doc):
    got = _by_line(doc)
    c = got[("Base.__init__", "def __init__(self, name):")]
    assert (c["action"], c["rule"]) == ("Shim", "constructor.super_call_breaks")
    assert "its super().__init__(...) does not pass 'device', which it requires" in c["detail"]
    # the subclass that passes the new argument on is adapted
    c = got[("Base.__init__", "def __init__(self, name, device):")]
    assert c["action"] == "Check" and c["rule"] == "signature.adapted"


def test_the_unit_starts_with_the_constructions_that_break(doc):
    unit = next(u for u in doc["units"] if u["pr"] == 11)
    assert unit["action"] == "Shim"
    # the rationale quotes the downstream call site, the problem and the new signature
    assert (
        "torch_npu/_inductor/build.py:30 constructs its upstream base through super(), and its "
        "super().__init__(...) does not pass 'device', which it requires, under the new "
        "signature of torch/_inductor/utils.py::Base.__init__ (signature: (self, name) -> "
        "(self, name, device))"
    ) in unit["rationale"]
    shims = {c["upstream"].split("::")[1] for c in unit["couplings"] if c["action"] == "Shim"}
    assert shims == {"Spec.__init__", "Plain.__init__", "Renamed.__init__", "Base.__init__"}


DATACLASSES = """
import dataclasses
from dataclasses import KW_ONLY, InitVar, dataclass, field
from typing import ClassVar, Generic, TypeVar

T = TypeVar("T")


@dataclass
class A:
    x: int
    y: str = "a"
    z: list = field(default_factory=list)
    w: int = field(default=3)
    f: int = field(default_factory=lambda: 0)
    c: ClassVar[int] = 1
    plain = 2
    i: InitVar[int] = 0
    hidden: int = field(init=False, default=0)


class Mixin(A):
    pass


@dataclasses.dataclass(kw_only=True)
class B(Mixin):
    k: int
    y: str = "b"


@dataclass
class C(Generic[T]):
    a: int
    _: KW_ONLY
    b: int
    c: int = 1
    d: int = field(default=0, kw_only=False)
"""


def test_the_synthesised_init_has_the_signature_python_gives_it():
    idx = index_text("torch/_inductor/shapes.py", DATACLASSES)
    scope: dict = {}
    exec(compile(DATACLASSES, "shapes.py", "exec", dont_inherit=True), scope)  # our fixture
    for name in ("A", "B", "C"):
        sym = idx.symbols[f"{name}.__init__"]
        assert sym.kind == "method" and sym.value == "<synthesised by @dataclass>"
        params = inspect.signature(scope[name].__init__).parameters
        want = [
            (p.name, p.kind.name == "KEYWORD_ONLY", p.default is p.empty) for p in params.values()
        ]
        namespace = dict(scope)
        exec(f"def synthesised({sym.signature}): pass", namespace)
        ours = inspect.signature(namespace["synthesised"]).parameters
        got = [(p.name, p.kind.name == "KEYWORD_ONLY", p.default is p.empty) for p in ours.values()]
        assert got == want, name
    assert dataclasses.is_dataclass(scope["B"])
    assert idx.symbols["A.__init__"].signature == (
        "self, x, y='a', z=list(), w=3, f=(lambda: 0)(), i=0"
    )


def test_no_init_is_synthesised_where_python_would_not_or_the_fields_are_not_known():
    src = """
from dataclasses import dataclass
from torch._inductor.base import Elsewhere


@dataclass(init=False)
class NoInit:
    a: int


@dataclass
class Written:
    a: int

    def __init__(self, a, b):
        self.a = a


@dataclass
class Unknown(Elsewhere):
    a: int


class NotADataclass:
    a: int
"""
    idx = index_text("torch/_inductor/shapes.py", src)
    assert "NoInit.__init__" not in idx.symbols
    assert idx.symbols["Written.__init__"].signature == "self, a, b"
    assert "Unknown.__init__" not in idx.symbols
    assert "NotADataclass.__init__" not in idx.symbols
