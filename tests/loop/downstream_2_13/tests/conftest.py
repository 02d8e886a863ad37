import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
_PKG_ROOT = os.path.dirname(_HERE)
if _PKG_ROOT not in sys.path:
    sys.path.insert(0, _PKG_ROOT)

import pytest  # noqa: E402


@pytest.fixture
def fresh_inductor():
    """Reset dynamo and turn caches off so every case really lowers and codegens."""
    import torch
    import torch._inductor.config as inductor_config

    torch._dynamo.reset()
    with inductor_config.patch(fx_graph_cache=False, fx_graph_remote_cache=False):
        yield torch
    torch._dynamo.reset()
