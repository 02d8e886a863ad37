"""A member used one attribute step behind an annotated parameter is a use of that
member: ``def call(self, gm: torch.fx.GraphModule)`` … ``gm.graph.call_function(...)``
calls ``Graph.call_function`` because upstream declares ``GraphModule.graph`` to be a
``Graph`` (a property annotated ``-> Graph``; a class-level ``graph: "Graph"`` on
``Node``). torch-ttnn 7fb5bbaaf's passes do this 196 times (pattern 5 of
docs/validation/impact-other-backends.md). An attribute whose type upstream does not
declare, or a parameter the function rebinds, gives no such use."""

from __future__ import annotations

import pytest
from tests.impact.gitrepo import impact_of_commit

FX_INIT = """\
from torch.fx.graph import Graph
from torch.fx.graph_module import GraphModule
from torch.fx.node import Node
"""

GRAPH_V1 = """\
class Graph:
    def call_function(self, the_function, args=None, kwargs=None):
        return (the_function, args, kwargs)

    def lint(self):
        return None
"""

# call_function gains an optional keyword (every positional call still binds); lint gains
# a required parameter (a bare call stops binding)
GRAPH_V2 = """\
class Graph:
    def call_function(self, the_function, args=None, kwargs=None, name=None):
        return (the_function, args, kwargs, name)

    def lint(self, strict):
        return strict
"""

GRAPH_MODULE = """\
from torch.fx.graph import Graph


class GraphModule:
    extras = None

    @property
    def graph(self) -> Graph:
        return self._graph

    @property
    def untyped(self):
        return self._graph
"""

NODE = """\
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torch.fx.graph import Graph


class Node:
    graph: "Graph"

    def __init__(self, graph):
        self.graph = graph
"""

UPSTREAM_V1 = {
    "torch/fx/__init__.py": FX_INIT,
    "torch/fx/graph.py": GRAPH_V1,
    "torch/fx/graph_module.py": GRAPH_MODULE,
    "torch/fx/node.py": NODE,
}

DOWNSTREAM = {
    # a property annotated -> Graph
    "dev/passes.py": "import torch\n\n\ndef run(gm: torch.fx.GraphModule):\n"
    "    gm.graph.call_function(print, (1,))\n    gm.graph.lint()\n",
    # a class-level annotation, quoted, its class imported under TYPE_CHECKING
    "dev/node_pass.py": "from torch.fx import Node\n\n\ndef run(n: Node):\n    n.graph.lint()\n",
    # attributes whose type upstream does not declare
    "dev/undeclared.py": "import torch\n\n\ndef run(gm: torch.fx.GraphModule):\n"
    "    gm.extras.lint()\n    gm.untyped.lint()\n",
    # the parameter is rebound before the use: its annotation no longer says what it is
    "dev/rebound.py": "import torch\n\n\ndef run(gm: torch.fx.GraphModule, other):\n"
    "    gm = other\n    gm.graph.lint()\n",
}


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    doc = impact_of_commit(
        tmp_path_factory.mktemp("typed"),
        UPSTREAM_V1,
        {"torch/fx/graph.py": GRAPH_V2},
        "[fx] Graph.call_function: name; Graph.lint: strict (#1)",
        DOWNSTREAM,
    )
    got: dict[tuple[str, str], dict] = {}
    for unit in doc["units"]:
        for c in unit["couplings"]:
            member = c["upstream"].split("::")[-1]
            got[(c["downstream"].split("/")[-1], member)] = c
    return got


def test_property_annotated_type_makes_the_call_a_use(rows):
    fits = rows[("passes.py:5", "Graph.call_function")]
    assert (fits["kind"], fits["rule"], fits["action"]) == (
        "import_use",
        "signature.calls_fit",
        "Test",
    )
    breaks = rows[("passes.py:6", "Graph.lint")]
    assert (breaks["rule"], breaks["action"]) == ("signature.call_breaks", "Shim")
    assert "strict" in breaks["detail"] + " ".join(breaks["problems"])


def test_class_level_annotation_makes_the_call_a_use(rows):
    c = rows[("node_pass.py:5", "Graph.lint")]
    assert (c["rule"], c["action"]) == ("signature.call_breaks", "Shim")


def test_undeclared_attribute_or_rebound_parameter_gives_no_use(rows):
    for name in ("undeclared.py", "rebound.py"):
        assert not [k for k in rows if k[0].startswith(name)], name
