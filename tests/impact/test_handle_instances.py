"""A handle (``V.graph``) holds an instance: it never calls the class's ``__init__``.

Real git repositories: upstream gives ``GraphLowering.__init__`` a new optional parameter
(torch 2.12's ``get_decomp_fn``). A downstream that only reads ``V.graph`` was told it
"calls GraphLowering.__init__" (``signature.caller``, Test, code change unsure): on
torch-npu 2.11.0 four such places stood in the top 25 of "Test these". A place that
constructs the class is still judged on its calls, and one that passes the class on still
cannot be checked.
"""

from __future__ import annotations

import pytest

from .gitrepo import impact_of_commit

GRAPH_V1 = """
class GraphLowering:
    def __init__(self, gm, example_inputs=None):
        self.gm = gm
        self.example_inputs = example_inputs
"""

GRAPH_V2 = GRAPH_V1.replace(
    "def __init__(self, gm, example_inputs=None):",
    "def __init__(self, gm, example_inputs=None, get_decomp_fn=None):",
)

VIRTUALIZED = """
class _V:
    graph = None


V = _V()
"""

DOWN = """
from torch._inductor.graph import GraphLowering
from torch._inductor.virtualized import V


def reads_handle(x):
    if V.graph is not None:
        return record(V.graph, x)
    return x


def calls_handle_and_passes_it(x):
    return record(x, getattr(V.graph, "gm", None))


def constructs(gm):
    return GraphLowering(gm)


def constructs_and_reads_handle(gm):
    if V.graph is None:
        return GraphLowering(gm, None)
    return V.graph


def passes_the_class_on(factory=None):
    return make(factory or GraphLowering)


class Holder:
    def __init__(self, graph: GraphLowering):
        super().__init__()
        self.graph = graph


def record(*args):
    return args


def make(cls):
    return cls
"""


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory) -> dict[str, tuple[str, str, str]]:
    up = {"torch/_inductor/virtualized.py": VIRTUALIZED, "torch/_inductor/graph.py": GRAPH_V1}
    doc = impact_of_commit(
        tmp_path_factory.mktemp("handles"),
        up,
        {"torch/_inductor/graph.py": GRAPH_V2},
        "[inductor] GraphLowering takes get_decomp_fn (#9)",
        {"torch_npu/_inductor/lowering.py": DOWN},
    )
    unit = next(u for u in doc["units"] if u["pr"] == 9)
    return {
        c["owner"]: (c["action"], c["code_change"], c["rule"])
        for c in unit["couplings"]
        if c["upstream"].endswith("::GraphLowering.__init__") and c["owner"]
    }


def test_a_place_that_only_holds_the_handle_calls_no_constructor(verdicts):
    assert verdicts["reads_handle"] == ("Test", "no", "signature.instance_only")
    assert verdicts["calls_handle_and_passes_it"] == ("Test", "no", "signature.instance_only")
    # a parameter annotated with the class: it names __init__ (super's), calls no class
    assert verdicts["Holder.__init__"] == ("Test", "no", "signature.instance_only")


def test_a_place_that_constructs_the_class_is_judged_on_its_calls(verdicts):
    assert verdicts["constructs"] == ("Test", "no", "signature.calls_fit")
    # reading the handle as well does not hide the construction
    assert verdicts["constructs_and_reads_handle"] == ("Test", "no", "signature.calls_fit")


def test_a_place_that_passes_the_class_on_still_cannot_be_checked(verdicts):
    assert verdicts["passes_the_class_on"] == ("Test", "unsure", "signature.caller")
