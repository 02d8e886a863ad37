"""Pattern 3: module-level import of torch._inductor.ir.Conditional (gone in 2.14.1)."""


def test_cond_lowering_module_imports():
    from npu_like import cond_lowering  # in the test: the ImportError fails this case only

    assert cond_lowering.install


def test_cond_lowering_compiles(fresh_inductor):
    torch = fresh_inductor
    from npu_like import cond_lowering

    cond_lowering.CALLS.clear()
    cond_lowering.install()
    try:

        def f(x):
            return torch.cond(x.sum() > 0, lambda t: t + 1, lambda t: t - 1, (x,))

        x = torch.randn(3, 3)
        out = torch.compile(f, backend="inductor")(x)
        torch.testing.assert_close(out, f(x))
    finally:
        cond_lowering.uninstall()
    assert cond_lowering.CALLS, "the npu_like cond lowering was not used"
