"""A fork needs more than framework boilerplate (issue #31, noise).

An ``__init__`` that calls ``super().__init__`` and sets fields looks like every other
subclass ``__init__``: it matched Dynamo's ``InliningGeneratorInstructionTranslator.
__init__`` as a stale copy. A function is a fork candidate only with at least
``forks.MIN_SUBSTANCE`` (2) logical lines besides its def line, ``super()`` /
``Base.__init__(self, ...)`` calls, ``self.x = <simple value>``, ``pass`` and ``return``.
A real copy with the same boilerplate and some logic stays a fork, and so does a copied
interface: a def line with ``forks.MIN_SIGNATURE_PARAMS`` (3) named parameters besides
self/cls is a line of substance (torch_musa's ``_record_memory_history_legacy``: six
parameters over one call into its own extension). One line of substance is enough for
a copy under the upstream function's own name (not a dunder): torch-npu 2.12.0's
``_boundaries_helper``, one ``return`` of a tuple; the same body under another name is no
fork.
"""

from __future__ import annotations

import pytest

from instep.impact.downstream import forks

from .gitrepo import impact_of_commit

UP_V1 = """\
class Segment:
    pass


class InliningInstructionTranslator:
    def __init__(self, *args, **kwargs):
        self.args = args


class InliningGeneratorInstructionTranslator(InliningInstructionTranslator):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.generated_items = []
        self.frame_state = FRAME_CREATED
        self.gi_exc_state = Segment()

    def yield_value(self, val):
        self.generated_items.append(val)
        if self.frame_state == FRAME_CREATED:
            self.frame_state = FRAME_STARTED
        result = self.push(val)
        self.log_yield(result, len(self.generated_items))
        return result


def record_history(enabled, context=True, max_entries=1, device=None, cpp=False):
    _C._record_history(enabled, context, max_entries, cpp)


def boundaries(tb):
    return (tb.name(), tb.size()[-1], tb.size()[0] * tb.stride()[0], tb.stride()[-1])
"""

UP_V2 = (
    UP_V1.replace(
        "self.gi_exc_state = Segment()", "self.gi_exc_state = Segment()\n        self.n = 0"
    )
    .replace("result = self.push(val)", "result = self.push(val, wrap=True)")
    .replace(
        "cpp=False):\n    _C._record_history(enabled, context, max_entries, cpp)",
        "cpp=False, x=False):\n    _C._record_history(enabled, context, max_entries, cpp, x)",
    )
    .replace("tb.size()[0] * tb.stride()[0]", "tb.layout().storage_size()")
)

DOWN = """\
from torch._dynamo.symbolic_convert import InliningInstructionTranslator


class NPUTranslator(InliningInstructionTranslator):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.generated_items = []
        self.frame_state = FRAME_CREATED
        self.npu_state = Segment()

    def npu_yield(self, val):
        self.generated_items.append(val)
        if self.frame_state == FRAME_CREATED:
            self.frame_state = FRAME_STARTED
        result = self.push(val)
        self.log_yield(result, len(self.generated_items))
        return result


def record_history(enabled, context=True, max_entries=1, device=None, cpp=False):
    _NPUC._record_history(enabled, context, max_entries, cpp)


def boundaries(tb):
    return (tb.name(), tb.size()[-1], tb.size()[0] * tb.stride()[0], tb.stride()[-1])


def npu_boundaries(tb):
    return (tb.name(), tb.size()[-1], tb.size()[0] * tb.stride()[0], tb.stride()[-1])
"""


@pytest.fixture(scope="module")
def forked(tmp_path_factory) -> dict[str, str]:
    doc = impact_of_commit(
        tmp_path_factory.mktemp("forks"),
        {"torch/_dynamo/__init__.py": "", "torch/_dynamo/symbolic_convert.py": UP_V1},
        {"torch/_dynamo/symbolic_convert.py": UP_V2},
        "[dynamo] generator state (#5)",
        {"torch_npu/translator.py": DOWN},
    )
    return {
        c["owner"]: c["rule"]
        for unit in doc["units"]
        for c in unit["couplings"]
        if c["kind"] == "fork"
    }


def test_boilerplate_init_is_no_fork(forked):
    assert "NPUTranslator.__init__" not in forked


def test_a_copy_with_logic_stays_a_fork(forked):
    assert forked["NPUTranslator.npu_yield"] == "fork.stale"


def test_a_copied_interface_with_one_call_stays_a_fork(forked):
    assert forked["record_history"] == "fork.stale"


def test_one_line_under_the_same_name_stays_a_fork(forked):
    assert forked["boundaries"] == "fork.stale"
    assert "npu_boundaries" not in forked


def test_what_counts_as_boilerplate() -> None:
    init = forks.normalised_lines(
        "def __init__(self, a, *args):\n    super().__init__(*args)\n    Base.__init__(self, a)\n"
        "    self.a = a\n    self.b: int = 0\n    self.c = []\n    self.d = Segment()\n"
        "    self.e = mod.CONST\n    pass\n"
    )
    assert forks.substantial_lines(init) == 0
    logic = forks.normalised_lines(
        "def f(self, a):\n    self.a = g(a)\n    self.b = a + 1\n    return self.a\n"
    )
    assert forks.substantial_lines(logic) == 3
    interface = forks.normalised_lines(
        "def f(self, a, b: int = 1, *, c=None, **kw):\n    return g(a, b, c)\n"
    )
    assert forks.substantial_lines(interface) == 2
    two = forks.normalised_lines("async def f(cls, a, b, *args):\n    return g(a, b)\n")
    assert forks.substantial_lines(two) == 1
