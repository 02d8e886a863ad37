"""pytest plugin of a bundle's debug re-run: the structured outcome of the case, as JSON.

Loaded with ``-p instep.bundle.rerun_plugin`` in the re-run subprocess; writes the
outcome of the last item run (the runner's :class:`~instep.run.pytest_plugin.OutcomeRecorder`
dict: status, exception chain, triad legs in the compile counters) to the file named by
``INSTEP_BUNDLE_OUTCOME``. It changes nothing else in the session.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

from instep.run.pytest_plugin import OutcomeRecorder

ENV_OUTCOME = "INSTEP_BUNDLE_OUTCOME"

_recorder = OutcomeRecorder()


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(_recorder, "instep-bundle-recorder")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: Any):  # type: ignore[no-untyped-def]
    _recorder.begin(item.nodeid)
    result = yield
    target = os.environ.get(ENV_OUTCOME)
    if target:
        data = _recorder.finish()
        data["case"] = item.nodeid
        with open(target, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=2, default=str)
    return result
