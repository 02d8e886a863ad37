"""``MemberNames``: the member names a file's code names (not its comments, docstrings or
messages), as ``code_member_names`` gives them, but tokenized only when a name is asked
that the file's text holds (issue #32: tokenizing every downstream file cost 6 CPU s)."""

from __future__ import annotations

import textwrap

from instep.impact.downstream.scope import MemberNames, code_member_names

SOURCE = textwrap.dedent(
    '''
    """Calls format_node on the graph (a docstring)."""
    import torch


    def check(node: torch.fx.Node) -> bool:
        # node.meta is read below; node.pretty_print is not
        msg = "cannot use node.pool here"
        return node.target is not None and getattr(node, "stack_trace") and f"{node.name}"
    '''
)


def test_the_same_answers_as_the_tokens_and_no_tokens_for_a_name_the_text_lacks():
    loads: list[int] = []

    def load() -> str:
        loads.append(1)
        return SOURCE

    names = MemberNames(SOURCE, load)
    code = code_member_names(SOURCE)
    assert "absent_member" not in names and "zzz" not in names
    assert loads == []  # a name the text never holds: nothing tokenized
    asked = [
        "target",
        "stack_trace",
        "name",
        "fx",
        "Node",
        "format_node",
        "pretty_print",
        "pool",
        "meta",
        "absent_member",
    ]
    assert [n in names for n in asked] == [n in code for n in asked]
    assert [n in names for n in asked[:5]] == [True] * 5  # code: after a dot, "id", f-string
    assert not any(n in names for n in asked[5:])  # docstring, comment, message
    assert loads == [1]  # tokenized once
