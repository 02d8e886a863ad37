"""npu_like: a tiny out-of-tree torch.compile backend written against torch 2.13.0.

It mimics the integration patterns torch_npu uses with Inductor. Each module
holds one pattern and exposes ``install()`` / ``uninstall()`` so the tests can
apply it and restore upstream state afterwards. Nothing is installed on
import (except what a module needs at import time: see ``cond_lowering``).

Modules: ``wrapper`` (pattern 2), ``cond_lowering`` (pattern 3),
``reduction_patch`` (pattern 4), ``ir_patch`` (pattern 4b).
"""
