"""instep: keep an out-of-tree ``torch.compile`` backend in step with upstream PyTorch.

Two jobs: impact analysis of upstream changes on a downstream backend
(:mod:`instep.impact`), and test governance (runner, triage, reports, doctor).
This module only re-exports; the implementation lives in the sub-packages.
"""

from __future__ import annotations

from importlib import metadata as _metadata

from instep.errors import InstepError
from instep.layers import Layer

try:
    __version__ = _metadata.version("instep")
except _metadata.PackageNotFoundError:  # running from a source tree without install
    __version__ = "0.0.0+unknown"

__all__ = ["InstepError", "Layer", "__version__"]
