"""Exceptions as data: causes, contexts, inner exceptions, frames, and faulthandler dumps."""

from __future__ import annotations

from instep.run.exception_chain import exception_chain, faulthandler_frames


class BackendCompilerFailed(Exception):
    """Shaped like torch._dynamo.exc.BackendCompilerFailed: it carries `inner_exception`."""

    def __init__(self, inner: Exception) -> None:
        super().__init__(f"backend raised {type(inner).__name__}")
        self.inner_exception = inner


def _lowering():
    raise NotImplementedError("no lowering for aten.sin")


def _compile():
    try:
        _lowering()
    except NotImplementedError as exc:
        raise BackendCompilerFailed(exc) from None


def _caught(func):
    try:
        func()
    except BaseException as exc:
        return exc
    raise AssertionError("did not raise")


def test_inner_exception_of_a_compiler_failure_is_followed():
    chain = exception_chain(_caught(_compile))
    assert [(c["type"].rsplit(".", 1)[-1], c["relation"]) for c in chain] == [
        ("BackendCompilerFailed", None),
        ("NotImplementedError", "inner"),
    ]
    inner_frames = chain[1]["frames"]
    assert inner_frames[-1]["function"] == "_lowering"
    assert inner_frames[-1]["module"] == __name__
    assert inner_frames[-1]["file"] == __file__


def test_implicit_context_is_followed_and_suppressed_context_is_not():
    def suppressed():
        try:
            raise KeyError("first")
        except KeyError:
            raise RuntimeError("no context wanted") from None

    def context():
        try:
            raise KeyError("first")
        except KeyError:
            raise RuntimeError("while handling")  # noqa: B904

    chain = exception_chain(_caught(context))
    assert [(c["type"], c["relation"]) for c in chain] == [
        ("RuntimeError", None),
        ("KeyError", "context"),
    ]
    assert chain[1]["message"] == "'first'"
    assert [c["type"] for c in exception_chain(_caught(suppressed))] == ["RuntimeError"]


def test_cycles_and_unprintable_messages_do_not_break_the_chain():
    class Unprintable(Exception):
        def __str__(self):
            raise ValueError("no")

    first, second = Unprintable(), RuntimeError("two")
    first.__cause__ = second
    second.__cause__ = first
    chain = exception_chain(first)
    assert len(chain) == 2
    assert chain[0]["message"].startswith("<unprintable Unprintable")


SEGV_DUMP = """some output before
Fatal Python error: Segmentation fault

Thread 0x00007f0000000001 (most recent call first):
  File "/usr/lib/python3.11/threading.py", line 320 in wait
  File "/usr/lib/python3.11/threading.py", line 622 in run

Current thread 0x00007f0000000002 (most recent call first):
  File "/tmp/x/inductor_cache/ab/cabc.py", line 74 in call
  File "/tmp/tests/test_ops.py", line 12 in test_fmin

Extension modules: numpy.core._multiarray_umath (total: 1)
"""


def test_faulthandler_dump_gives_the_crashing_threads_frames_innermost_last():
    dump = faulthandler_frames(SEGV_DUMP)
    assert dump["header"] == "Fatal Python error: Segmentation fault"
    assert [(f["function"], f["line"]) for f in dump["frames"]] == [
        ("test_fmin", 12),
        ("call", 74),
    ]


def test_no_dump_in_plain_output():
    assert faulthandler_frames("just some text\nFile nothing\n") is None


def test_module_from_an_installed_file_path():
    from instep.run.exception_chain import module_from_path

    site = "/usr/lib/python3.11/site-packages"
    assert (
        module_from_path(f"{site}/torch/_inductor/codegen/cpp.py") == "torch._inductor.codegen.cpp"
    )
    assert module_from_path(f"{site}/torch_npu/__init__.py") == "torch_npu"
    assert module_from_path("/tmp/tests/test_ops.py") is None
    assert module_from_path(f"{site}/torch/lib/libtorch.so") is None


def test_a_hang_is_located_in_the_compile_layer_of_its_innermost_known_frame():
    from instep.profiles import load_profile
    from instep.run.runner import _note_stack_layer

    site = "/x/site-packages"
    frames = [
        {"file": "/tmp/t/test_x.py", "module": None, "function": "test_x", "line": 3},
        {
            "file": f"{site}/torch/_inductor/scheduler.py",
            "module": None,
            "function": "f",
            "line": 9,
        },
        {
            "file": f"{site}/torch/_inductor/codecache.py",
            "module": None,
            "function": "g",
            "line": 7,
        },
        {"file": "/tmp/t/helper.py", "module": None, "function": "spin", "line": 1},
    ]
    data = {"status": "timeout", "exception_chain": [{"type": "Timeout", "frames": frames}]}
    _note_stack_layer(data, load_profile("cpu"))
    assert data["evidence"] == {
        "stack_layer": "kernel_compile",
        "stack_frame": "torch._inductor.codecache:7",
    }
    passed = {"status": "passed", "exception_chain": [{"type": "X", "frames": frames}]}
    _note_stack_layer(passed, load_profile("cpu"))
    assert "evidence" not in passed
