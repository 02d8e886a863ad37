"""Pattern 4: monkey-patches with the 2.13.0 signature of functions that changed."""


def test_make_reduction_monkeypatch_sum(fresh_inductor):
    torch = fresh_inductor
    from npu_like import reduction_patch

    reduction_patch.CALLS.clear()
    reduction_patch.install()
    try:

        def f(x):
            return x.sum(dim=1)

        x = torch.randn(4, 8)
        out = torch.compile(f, backend="inductor")(x)
        torch.testing.assert_close(out, f(x))
    finally:
        reduction_patch.uninstall()
    assert "sum" in reduction_patch.CALLS


def test_reduction_create_monkeypatch_amax(fresh_inductor):
    torch = fresh_inductor
    from npu_like import ir_patch

    ir_patch.CALLS.clear()
    ir_patch.install()
    try:

        def f(x):
            return x.amax(dim=1)

        x = torch.randn(4, 8)
        out = torch.compile(f, backend="inductor")(x)
        torch.testing.assert_close(out, f(x))
    finally:
        ir_patch.uninstall()
    assert "max" in ir_patch.CALLS
