"""A patch of a function through a module that only re-imported it rebinds that module's
global alone. torch-spyre 859df83 sets ``torch.fx.passes.fake_tensor_prop.snapshot_fake``
(``tensors.py:37``); ``fake_tensor_prop`` did ``from ...proxy_tensor import
snapshot_fake``, and torch 2.8.0's ``extract_val`` in ``proxy_tensor`` passes
``include_real=`` to its *own* global, which that patch never touches. The breaking path
must be a call in the patched module (or through it), not in the origin."""

from __future__ import annotations

import pytest
from tests.impact.gitrepo import impact_of_commit
from tests.impact.test_late_bound_patches import PROXY, patches_of_snapshot_fake
from tests.impact.test_late_bound_patches import V1 as PROXY_V1
from tests.impact.test_late_bound_patches import V2 as PROXY_V2

PROP = "torch/fx/passes/fake_tensor_prop.py"
META = "torch/_subclasses/meta_utils.py"

# re-imports the name and calls it with one argument, before and after
PROP_V = """\
from torch.fx.experimental.proxy_tensor import snapshot_fake


def run_node(val):
    return snapshot_fake(val)
"""

META_V1 = """\
from torch.fx.experimental.proxy_tensor import snapshot_fake


def describe(val):
    return snapshot_fake(val)
"""

# re-imports the name and, in the new version, passes the new keyword to its own global
META_V2 = """\
from torch.fx.experimental.proxy_tensor import snapshot_fake


def describe(val):
    return snapshot_fake(val, include_real=True)
"""

REPLACEMENT = "def my_snapshot_fake(val):\n    return val.detach()\n"

DOWNSTREAM = {
    # the origin: extract_val reads this global
    "dev/origin.py": "import torch\n\n\n"
    f"{REPLACEMENT}\n\ntorch.fx.experimental.proxy_tensor.snapshot_fake = my_snapshot_fake\n",
    # the re-importer whose own calls pass one argument: only the origin passes include_real
    "dev/reimport.py": "import torch.fx.passes.fake_tensor_prop as ftp\n\n\n"
    f"{REPLACEMENT}\n\nftp.snapshot_fake = my_snapshot_fake\n",
    # the re-importer whose own call passes include_real
    "dev/reimport_called.py": "from torch._subclasses import meta_utils\n\n\n"
    f"{REPLACEMENT}\n\nmeta_utils.snapshot_fake = my_snapshot_fake\n",
}


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    inits = {
        p: ""
        for p in (
            "torch/fx/__init__.py",
            "torch/fx/experimental/__init__.py",
            "torch/fx/passes/__init__.py",
            "torch/_subclasses/__init__.py",
        )
    }
    doc = impact_of_commit(
        tmp_path_factory.mktemp("reimport"),
        {**inits, PROXY: PROXY_V1, PROP: PROP_V, META: META_V1},
        {PROXY: PROXY_V2, META: META_V2},
        "[fx] snapshot_fake: include_real (#1)",
        DOWNSTREAM,
    )
    return patches_of_snapshot_fake(doc)


def test_patch_of_the_origin_breaks_through_its_own_call(rows):
    c = rows["origin.py"]
    assert (c["action"], c["rule"]) == ("Shim", "signature.replacement_breaks")
    assert "proxy_tensor.py:6" in c["evidence"] and "extract_val" in c["evidence"]


def test_patch_of_a_reimporter_is_not_reached_from_the_origin(rows):
    c = rows["reimport.py"]
    assert (c["action"], c["rule"]) == ("Test", "signature.no_breaking_call")
    assert "does not rebind" in c["evidence"]


def test_patch_of_a_reimporter_breaks_through_a_call_in_it(rows):
    c = rows["reimport_called.py"]
    assert (c["action"], c["rule"]) == ("Shim", "signature.replacement_breaks")
    assert "meta_utils.py:5" in c["evidence"] and "describe" in c["evidence"]
