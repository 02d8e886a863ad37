"""A class-level annotation (a dataclass field ``x: C``) is no use of ``C``'s members
that only the rest of the file names (issue #31).

A place that names a class only in type positions reaches the members it names itself.
A class's place is its own lines, methods included (a field ``x: C`` is used as
``self.x.member`` there); before, a class had no end line and answered with every
member its file names. A field whose default calls or passes the class
(``field(default_factory=C)``) is a use of it.

Tuning rows: torch-npu 2.13.0 and 2.14.0, ``dynamo/{npugraph_ex,torchair}/
_acl_concrete_graph/graph_pass.py``: ``InplaceableNpuOp.extra_check: Callable[[torch.fx
.Node], bool]`` answered for ``Node.format_node``, named only in a module-level
``print(n.format_node())``. A member named only in a comment or a string that is no
identifier (a docstring of debug code) is not named: 2.13.0's local annotation
``storage_to_nodes: dict[StorageWeakRef, set[torch.fx.Node]]`` in a def whose
``n.format_node()`` is in a docstring (npugraph_ex) or a comment (torchair). The same
holds for the file's names that judge a used class's other members
(``use.member_unnamed``): the def above passes ``torch.fx.Node`` to ``tree_map_only``.
"""

from __future__ import annotations

import pytest

from .gitrepo import impact_of_commit

NODE_V1 = """\
class Node:
    def __init__(self, graph, name):
        self.graph = graph
        self.name = name

    def format_node(self, placeholder_names=None):
        return f"%{self.name}"
"""

NODE_V2 = NODE_V1.replace('return f"%{self.name}"', 'return f"%{self.name} : {self.graph}"')

# torch_npu 2.14.0's graph_pass.py, shortened: the field's annotation names Node, and
# format_node is named only by a module-level def
GRAPH_PASS = """\
from dataclasses import dataclass
from typing import Any, Callable, List

import torch


def check_multi_stream_for_single_reinplace(node: torch.fx.Node) -> bool:
    return node.meta.get("stream") is None


@dataclass(frozen=True)
class InplaceableNpuOp:
    inplace_op: Callable[..., Any]
    mutated_arg: List[int]
    extra_check: Callable[[torch.fx.Node], bool] = lambda node: True


def dump(gm):
    for n in gm.graph.nodes:
        print(n.format_node())
"""

# torch_npu 2.13.0's reinplace_with_multi_stream_check, shortened: a local annotation,
# and format_node only in a string of debug code (npugraph_ex) and a comment (torchair)
DEBUG_TEXT = """\
from collections import defaultdict

import torch


def reinplace_with_multi_stream_check(gm, *sample_args):
    \"\"\"
    Useful debug printing
    for n in gm.graph.nodes:
        print(n.format_node())
    \"\"\"
    # for n in gm.graph.nodes:
    # print(n.format_node())
    storage_to_nodes: dict[int, set[torch.fx.Node]] = defaultdict(set)
    return storage_to_nodes
"""

# a file that builds a Node and names format_node only in a comment
COMMENT_ONLY = """\
import torch


def make(graph):
    # print(node.format_node()) to see it
    node = torch.fx.Node(graph, "a")
    return node
"""

FIELDS_USED = """\
from dataclasses import dataclass

import torch


@dataclass
class Reported:
    node: torch.fx.Node

    def text(self):
        return self.node.format_node()
"""

# a file of its own: a member other than __init__ couples once per file
FIELD_BUILT = """\
from dataclasses import dataclass, field

import torch


@dataclass
class Built:
    node: torch.fx.Node = field(default_factory=torch.fx.Node)


def dump(n):
    return n.format_node()
"""


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    doc = impact_of_commit(
        tmp_path_factory.mktemp("fields"),
        {
            "torch/__init__.py": "from torch import fx\n",
            "torch/fx/__init__.py": "from torch.fx.node import Node\n",
            "torch/fx/node.py": NODE_V1,
        },
        {"torch/fx/node.py": NODE_V2},
        "[fx] format_node shows the graph (#12)",
        {
            "torch_npu/graph_pass.py": GRAPH_PASS,
            "torch_npu/fields.py": FIELDS_USED,
            "torch_npu/built.py": FIELD_BUILT,
            "torch_npu/reinplace.py": DEBUG_TEXT,
            "torch_npu/comment_only.py": COMMENT_ONLY,
        },
    )
    return {
        (c["owner"], c["downstream"].split(":")[0]): c["action"]
        for unit in doc["units"]
        for c in unit["couplings"]
        if c["upstream"].endswith("::Node.format_node")
    }


def test_a_field_annotation_reaches_no_member_named_elsewhere(rows):
    assert not [k for k in rows if k[1] == "torch_npu/graph_pass.py"]


def test_a_member_named_in_a_comment_or_a_docstring_is_not_named(rows):
    assert not [k for k in rows if k[1] == "torch_npu/reinplace.py"]


def test_a_file_that_names_the_member_only_in_a_comment_reaches_it_only_for_check(rows):
    # the construction uses Node; whether the file names format_node is read from its
    # code (an unnamed member of a used class is Check: use.member_unnamed)
    assert rows[("make", "torch_npu/comment_only.py")] == "Check"


def test_a_field_used_in_a_method_or_built_by_its_default_stays_a_use(rows):
    # Reported.text calls self.node.format_node(): the class's own lines name the member
    assert rows[("Reported", "torch_npu/fields.py")] == "Test"
    # field(default_factory=torch.fx.Node) passes the class on: a use, not an annotation
    assert rows[("Built", "torch_npu/built.py")] == "Test"
