"""Pattern 2: wrapper-codegen subclass whose override keeps the 2.13.0 signature."""


def test_wrapper_override_codegen_inputs(fresh_inductor):
    torch = fresh_inductor
    from npu_like import wrapper

    wrapper.SEEN_INPUTS.clear()
    wrapper.install("cpu")
    try:

        def f(x, y):
            return (x * y).relu() + 1

        x, y = torch.randn(4, 4), torch.randn(4, 4)
        out = torch.compile(f, backend="inductor")(x, y)
        torch.testing.assert_close(out, f(x, y))
    finally:
        wrapper.uninstall("cpu")
    assert wrapper.SEEN_INPUTS, "the npu_like wrapper codegen was not used"
