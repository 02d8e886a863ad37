"""The fault-injection suite of ``instep selftest``: one pytest case per compile layer.

Each case compiles a tiny function on CPU with a fault injected at one layer through the
real torch extension points: a ``torch.library`` custom op (with a fake kernel, an
autograd formula, a decomposition, a lowering), Inductor's configuration (implicit
fallbacks off, a scheduler pass, the C++ compiler) or the op's runtime kernel. The layer each
case must be filed under is in ``matrix.py``. This file is
data for the runner (it is copied into a temporary directory and run by ``instep run``);
it is not imported by instep itself.
"""

import ctypes
import time

import pytest
import torch
import torch._dynamo
import torch._inductor.config as inductor_config
from torch._inductor import lowering as inductor_lowering
from torch._inductor.decomposition import decompositions as inductor_decompositions

LIB = torch.library.Library("instep_selftest", "DEF")


def _define(name, kernel, fake=None):
    LIB.define(f"{name}(Tensor x) -> Tensor")
    LIB.impl(name, kernel, "CompositeExplicitAutograd")
    torch.library.register_fake(f"instep_selftest::{name}", fake or (lambda x: torch.empty_like(x)))
    return getattr(torch.ops.instep_selftest, name).default


def _sane(x):
    return x.clone()


OP_BACKWARD = _define("bad_backward", _sane)
OP_DECOMP = _define("bad_decomp", _sane)
OP_LOWERING = _define("bad_lowering", _sane)
OP_NO_LOWERING = _define("no_lowering", _sane)
OP_WRONG = _define("wrong_values", _sane)
OP_CODEGEN = _define("bad_codegen", _sane)


def _raise_at_runtime(x):
    raise RuntimeError("selftest: the op's runtime kernel rejected its arguments")


def _segfault(x):
    ctypes.string_at(0)


def _hang(x):
    while True:
        time.sleep(0.05)


OP_RUNTIME = _define("runtime_error", _raise_at_runtime)
OP_CRASH = _define("crash", _segfault)
OP_HANG = _define("hang", _hang)


def _backward(ctx, grad):
    # a NumPy round trip: fine in eager, cannot be traced by AOTAutograd's joint graph
    return torch.from_numpy(grad.numpy() * 2)


torch.library.register_autograd("instep_selftest::bad_backward", _backward)


def _broken_decomposition(x):
    raise RuntimeError("selftest: the decomposition is broken")


inductor_decompositions[OP_DECOMP] = _broken_decomposition


@inductor_lowering.register_lowering(OP_LOWERING)
def _broken_lowering(x):
    raise RuntimeError("selftest: the lowering is broken")


@inductor_lowering.register_lowering(OP_WRONG)
def _wrong_lowering(x):
    return inductor_lowering.make_pointwise(lambda v: inductor_lowering.ops.add(v, v))(x)


@inductor_lowering.register_lowering(OP_CODEGEN)
def _codegen_lowering(x):
    return inductor_lowering.make_pointwise(lambda v: inductor_lowering.ops.instep_no_such_op(v))(x)


def _compile(fn, **kwargs):
    torch._dynamo.reset()
    return torch.compile(fn, backend="inductor", **kwargs)


def _x():
    return torch.arange(8, dtype=torch.float32) + 0.5


def test_graph_break_under_fullgraph():
    def f(x):
        x = x + 1
        torch._dynamo.graph_break()
        return x * 2

    _compile(f, fullgraph=True)(_x())


def test_backward_formula():
    x = _x().requires_grad_()
    _compile(lambda t: OP_BACKWARD(t).sum())(x).backward()


def test_decomposition():
    _compile(lambda t: OP_DECOMP(t) + 1)(_x())


def test_lowering():
    _compile(lambda t: OP_LOWERING(t) + 1)(_x())


def test_missing_lowering():
    with inductor_config.patch(implicit_fallbacks=False):
        _compile(lambda t: OP_NO_LOWERING(t) + 1)(_x())


def test_scheduler_pass():
    def broken_pass(nodes):
        raise RuntimeError("selftest: a scheduler pass is broken")

    with inductor_config.patch(_pre_fusion_custom_pass=broken_pass):
        _compile(lambda t: (t + 1).sin())(_x())


def test_codegen():
    _compile(lambda t: OP_CODEGEN(t) * 3)(_x())


def test_kernel_compile():
    with inductor_config.patch({"cpp.cxx": ("instep-selftest-no-such-compiler",)}):
        _compile(lambda t: (t * 7).cos())(_x())


def test_runtime():
    _compile(lambda t: OP_RUNTIME(t + 1) * 2)(_x())


def test_wrong_numerics():
    x = _x()
    torch.testing.assert_close(_compile(lambda t: OP_WRONG(t) - 1)(x), OP_WRONG(x) - 1)


def test_crash():
    _compile(lambda t: OP_CRASH(t + 1) * 2)(_x())


@pytest.mark.timeout(20)
def test_hang():
    _compile(lambda t: OP_HANG(t + 1) * 2)(_x())


def test_eager_reference():
    x = _x()
    expected = x.view(2, 3)  # the eager reference itself is wrong: 8 elements
    torch.testing.assert_close(_compile(lambda t: t + 1)(x), expected)
