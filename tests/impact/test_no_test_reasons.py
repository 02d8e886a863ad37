"""A Test row without a command says why (issue #31): "Test these" in Markdown and HTML.

The trees of test_runnable_suggestions.py, with two more changed helpers the downstream
calls: ``cdist_impl``, which only ``aten.cdist``'s lowering reaches (the downstream runs
cdist eagerly: ``make_fallback``), and ``describe``, which no operator and no compile
stage's built-in case reaches. Their rows say so; the upstream trees carry no test files,
so they say that too. A row with a command (``npu_abs``: OpInfo ``abs``) gives no reason.
The JSON is unchanged: a new field is a new schema version (``impact_contract``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from .test_runnable_suggestions import DOWN_LOWERING, _impact, _upstream, _write

HELPERS = """\


def cdist_impl(x1, x2):
    return x1


def describe(node):
    return str(node)
"""

DOWN_USES = """\
from torch._inductor.lowering import cdist_impl, describe


def npu_cdist(x1, x2):
    return cdist_impl(x1, x2)


def npu_describe(node):
    return describe(node)
"""


def _with_helpers(root: Path, changed: bool) -> Path:
    lowering = root / "torch/_inductor/lowering.py"
    text = lowering.read_text(encoding="utf-8").replace(
        "    return make_pointwise(lambda v: v)(x1)", "    return cdist_impl(x1, x2)"
    ) + HELPERS.replace("return x1", "return x2" if changed else "return x1").replace(
        "return str(node)", "return repr(node)" if changed else "return str(node)"
    )
    lowering.write_text(text, encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def trees(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("reasons")
    down = _write(
        root / "down",
        {
            "npu_like/__init__.py": "",
            "npu_like/lowering.py": DOWN_LOWERING,
            "npu_like/uses.py": DOWN_USES,
        },
    )
    return {
        "old": _with_helpers(_upstream(root / "v1", "2.13.0", changed=False), False),
        "new": _with_helpers(_upstream(root / "v2", "2.14.0", changed=True), True),
        "down": down,
        "root": root,
    }


def _cells(text: str) -> dict[str, str]:
    rows = [ln for ln in text.split("## Test these", 1)[1].splitlines() if re.match(r"\| \d", ln)]
    return {ln.split(" | ")[2].split("::")[1].split("`")[0]: ln.rsplit(" | ", 1)[1] for ln in rows}


@pytest.fixture(scope="module")
def cells(trees) -> dict[str, str]:
    return _cells(_impact(trees, "md", trees["root"] / "impact.md"))


WHEEL = "no upstream test files (a wheel ships none): `instep run --upstream-tests`"


def test_a_row_reached_only_through_an_eager_operator_says_so(cells):
    assert cells["npu_cdist"] == f"none: its operators run eagerly on the backend; {WHEEL} |"


def test_a_row_no_operator_or_stage_reaches_says_so(cells):
    assert cells["npu_describe"] == (
        f"none: no operator or built-in case reaches this change; {WHEEL} |"
    )


def test_a_row_with_a_command_gives_no_reason(cells):
    assert cells["npu_abs"] == "`instep run --tier L5 --pytest-arg=--instep-opinfo-ops=abs` |"


def test_the_html_says_why_too(trees):
    html = _impact(trees, "html", trees["root"] / "impact.html")
    assert "none: its operators run eagerly on the backend; no upstream test files" in html


def test_the_json_carries_no_reason(trees):
    doc = json.loads(_impact(trees, "json", trees["root"] / "impact.json"))
    text = json.dumps(doc["units"])
    assert "eagerly" not in text and "untested" not in text
