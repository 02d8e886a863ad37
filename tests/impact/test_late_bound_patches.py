"""A monkey-patch made inside a function may name a module-level def further down the
file: Python looks the name up when the installing function runs, after the module has
loaded. torch-spyre 859df83's ``install_spyre_tensors`` (``tensors.py:30``) sets
``proxy_tensor.snapshot_fake = spyre_snapshot_fake``, defined at :80; torch 2.8.0's
``extract_val`` passes ``include_real=`` to that global. The replacement must be found
wherever the def stands, so the signature rules judge it (not ``patch.wraps``, whose text
says the patch calls the original)."""

from __future__ import annotations

import pytest
from tests.impact.gitrepo import impact_of_commit

PROXY = "torch/fx/experimental/proxy_tensor.py"

V1 = """\
def snapshot_fake(val):
    return val.detach()


def extract_val(val):
    return snapshot_fake(val)
"""

V2 = """\
def snapshot_fake(val, include_real=False):
    return val.detach()


def extract_val(val, include_real=False):
    return snapshot_fake(val, include_real=include_real)
"""

INSTALL = """\
def install():
    torch.fx.experimental.proxy_tensor.snapshot_fake = my_snapshot_fake
"""

LATE_DEF = "def my_snapshot_fake(val):\n    return val.detach()\n"
FITS_DEF = "def my_snapshot_fake(val, include_real=False):\n    return val.detach()\n"

DOWNSTREAM = {
    # the replacement is defined below the function that installs it
    "dev/late.py": f"import torch\n\n\n{INSTALL}\n\n{LATE_DEF}",
    # the same, defined above: the order must not matter
    "dev/early.py": f"import torch\n\n\n{LATE_DEF}\n\n{INSTALL}",
    # defined below and already taking the new keyword
    "dev/fits.py": f"import torch\n\n\n{INSTALL}\n\n{FITS_DEF}",
    # a name no def of the file binds stays unknown
    "dev/unknown.py": "import torch\nfrom dev.other import my_snapshot_fake as f\n\n\n"
    "def install():\n    torch.fx.experimental.proxy_tensor.snapshot_fake = g\n",
}


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    doc = impact_of_commit(
        tmp_path_factory.mktemp("late"),
        {PROXY: V1},
        {PROXY: V2},
        "[fx] snapshot_fake: include_real (#1)",
        DOWNSTREAM,
    )
    return patches_of_snapshot_fake(doc)


def patches_of_snapshot_fake(doc: dict) -> dict[str, dict]:
    """The monkey-patch couplings of ``snapshot_fake``, by downstream file name."""
    got = {}
    for unit in doc["units"]:
        for c in unit["couplings"]:
            if c["upstream"] == f"{PROXY}::snapshot_fake" and c["kind"] == "monkeypatch":
                got[c["downstream"].split("/")[-1].split(":")[0]] = c
    return got


@pytest.mark.parametrize("name", ["late.py", "early.py"])
def test_replacement_defined_anywhere_in_the_file_is_judged_by_signature(rows, name):
    c = rows[name]
    assert (c["action"], c["rule"]) == ("Shim", "signature.replacement_breaks")
    assert "include_real" in c["evidence"]


def test_late_replacement_that_takes_the_keyword_fits(rows):
    assert rows["fits.py"]["rule"] in {"signature.adapted", "signature.replacement_fits"}
    assert rows["fits.py"]["action"] != "Shim"


def test_unbound_name_stays_unknown(rows):
    assert rows["unknown.py"]["rule"] == "patch.wraps"
    assert rows["unknown.py"]["detail"] == "assign: value"
