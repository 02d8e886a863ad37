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
