"""L5: every op of the installed torch's ``op_db`` x supported dtype, compiled fullgraph on
the device against eager CPU (see ``harness.py``). Options: ``--instep-opinfo-limit N``,
``--instep-opinfo-ops 'add,nn.functional.*,cdist:grad'`` (``:grad``: that op's
gradients too), ``--instep-opinfo-dtypes float32,float16``,
``--instep-all-samples``, ``--instep-grad`` (or the ``INSTEP_*`` environment variables).
Cases listed in the profile's expected-failure list are marked xfail with the list's
reason; one that passes shows as ``xpassed``: fixed, remove it from the list.
"""

from __future__ import annotations

import pytest

from instep.suites.expected_failures import builtin_lists, load_lists
from instep.suites.opinfo.harness import OpCase, enumerate_cases, run_case
from instep.suites.suite_options import settings


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "op_case" not in metafunc.fixturenames:
        return
    suite = settings(metafunc.config)
    cases = enumerate_cases(suite.device, suite.opinfo_dtypes, suite.opinfo_ops, suite.opinfo_limit)
    entries = load_lists(builtin_lists(suite.profile, "L5"))
    params = []
    for case in cases:
        nodeid = f"test_opinfo[{case.id}]"
        entry = next((e for e in entries if e.matches(nodeid)), None)
        marks = []
        if entry is not None:
            reason = f"{entry.reason} ({entry.layer or '?'}; {entry.issue or 'no issue'})"
            marks.append(pytest.mark.xfail(reason=reason, strict=False))
        params.append(pytest.param(case, id=case.id, marks=marks))
    metafunc.parametrize("op_case", params)


def test_opinfo(op_case: OpCase, pytestconfig: pytest.Config) -> None:
    suite = settings(pytestconfig)
    grad = suite.grad or op_case.grad
    run_case(op_case, suite.device, suite.backend, all_samples=suite.all_samples, grad=grad)
