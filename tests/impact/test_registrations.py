"""Registration recognition on real source snippets (both sides use it)."""

from __future__ import annotations

import ast

from instep.pyindex.registrations import (
    item_assignment,
    op_key,
    registrations_of_call,
    registrations_of_decorators,
    registry_entries,
)


def _first(src: str) -> ast.stmt:
    return ast.parse(src).body[0]


def test_op_key_forms():
    expr = lambda s: ast.parse(s, mode="eval").body  # noqa: E731
    assert op_key(expr("aten.expand")) == ("aten.expand", None)
    assert op_key(expr("aten.expand.default")) == ("aten.expand", "default")
    assert op_key(expr("torch.ops.aten.expand.default")) == ("aten.expand", "default")
    assert op_key(expr("torch.ops.higher_order.cond")) == ("higher_order.cond", None)
    assert op_key(expr("'aten::expand.default'")) == ("aten.expand", "default")
    assert op_key(expr("self.foo.bar")) is None
    assert op_key(expr("op")) is None


def test_decorator_with_op_list():
    fn = _first(
        "@register_lowering([aten.expand, aten.expand_copy.default], type_promotion_kind=None)\n"
        "def expand(x, sizes):\n    pass\n"
    )
    regs = registrations_of_decorators(fn.decorator_list, "l.py", "expand")
    assert [(r.registrar, r.key, r.overload, r.symbol) for r in regs] == [
        ("register_lowering", "aten.expand", None, "expand"),
        ("register_lowering", "aten.expand_copy", "default", "expand"),
    ]


def test_calls_curried_and_qualified():
    call = _first("L.register_lowering(torch.ops.rngprims.philox_rand)(fn)\n").value
    assert [r.key for r in registrations_of_call(call, "x.py")] == ["rngprims.philox_rand"]
    call = _first("make_fallback(aten.uniform, warn=False)\n").value
    assert [(r.registrar, r.key) for r in registrations_of_call(call, "x.py")] == [
        ("make_fallback", "aten.uniform")
    ]
    call = _first("make_fallback(op)\n").value  # a variable is never evaluated
    assert registrations_of_call(call, "x.py") == []


def test_string_keyed_registrations():
    call = _first("register_backend(name='npu', compiler_fn=f)\n").value
    assert [r.key for r in registrations_of_call(call, "x.py")] == ["backend:npu"]
    call = _first("register_device_op_overrides('npu', NPUDeviceOpOverrides())\n").value
    assert [r.key for r in registrations_of_call(call, "x.py")] == ["device_op_overrides:npu"]
    fn = _first("@register_backend\ndef npugraphs(gm, inputs):\n    pass\n")
    regs = registrations_of_decorators(fn.decorator_list, "x.py", "npugraphs")
    assert [r.key for r in regs] == ["backend:npugraphs"]


def test_py_impl_takes_the_receiver():
    fn = _first("@aten.add.default.py_impl(DispatchKey.Autograd)\ndef f():\n    pass\n")
    regs = registrations_of_decorators(fn.decorator_list, "x.py", "f")
    assert [(r.key, r.overload) for r in regs] == [("aten.add", "default")]


def test_tables_and_item_assignment():
    node = _first("FALLBACK_LIST = [aten.a, 'x', torch.ops.npu._npu_dropout.default]\n")
    regs = registry_entries("FALLBACK_LIST", node.value, "x.py")
    assert [(r.registrar, r.key) for r in regs] == [
        ("table:FALLBACK_LIST", "aten.a"),
        ("table:FALLBACK_LIST", "npu._npu_dropout"),
    ]
    node = _first("inplaceable_ops = {aten.index_put.default: InplaceableOp(x, 0)}\n")
    assert [r.key for r in registry_entries("inplaceable_ops", node.value, "x.py")] == [
        "aten.index_put"
    ]
    node = _first("lowerings[aten.foo] = bar\n")
    assert [r.key for r in item_assignment(node.targets[0], "x.py")] == ["aten.foo"]
    node = _first("other[aten.foo] = bar\n")
    assert item_assignment(node.targets[0], "x.py") == []


def test_a_registrar_given_a_role_only_in_the_table_gets_that_role(monkeypatch):
    """Registrar roles are data: a row added to registrars.toml with a ``role`` (and no
    code) is recognised, carries the role, and stands in for upstream's registration of
    the same op in that role."""
    from importlib import resources

    from instep.impact.join import facts
    from instep.impact.model import ChangeKind, CouplingKind, Reference, Stage, SymbolChange
    from instep.pyindex import registrations
    from instep.pyindex.model import Registration, Symbol, SymbolKind

    shipped = (resources.files("instep.pyindex") / "data" / "registrars.toml").read_text()
    assert "register_npu_lowering" not in shipped
    row = '[registrars.register_npu_lowering]\nkey = "op"\nfrom = "first"\nrole = "lowering"\n'
    text = shipped.replace("[tables]", row + "[tables]")
    table = registrations.parse_registrars(text, "test registrars.toml")
    monkeypatch.setattr(registrations, "_table", lambda: table)

    assert registrations.role_of("register_npu_lowering") == "lowering"
    assert registrations.role_of("register_lowering") == "lowering"
    assert registrations.role_of("table:decompositions") == "decomposition"
    assert registrations.role_of("register_kernel") is None
    call = _first("register_npu_lowering(aten.add)\n").value
    assert [(r.registrar, r.key) for r in registrations_of_call(call, "d.py")] == [
        ("register_npu_lowering", "aten.add")
    ]

    up = Registration("register_lowering", "aten.add", None, "torch/_inductor/lowering.py", 3)
    sym = Symbol(
        "torch/_inductor/lowering.py", "add", SymbolKind.FUNCTION, 3, 4, registrations=(up,)
    )
    change = SymbolChange(
        "torch/_inductor/lowering.py",
        "add",
        ChangeKind.BODY,
        SymbolKind.FUNCTION,
        Stage.INDUCTOR,
        old=sym,
        new=sym,
    )
    ref = Reference(CouplingKind.REGISTRATION, "op:aten.add", "d.py", 1, "register_npu_lowering")
    assert facts._same_registration(change, ref, "register_npu_lowering", None)
    assert not facts._same_registration(change, ref, "register_kernel", None)
