"""Frames to layers: where in the compile pipeline an exception chain was raised.

Each frame's module (or, for faulthandler dumps, its file) is mapped to a layer through
the profile's ``layer_map``: the upstream table of ``base.toml`` (``torch._dynamo`` ->
dynamo, ``torch._inductor.lowering`` -> lowering, ...) and the backend's downstream table
(which ``torch_npu`` modules are lowering, codegen, ...). Two pieces of upstream knowledge
are code because they are about call structure, not module names:

* *generated code*: a file Inductor wrote into its cache (``c<hash>.py``, or any file
  under ``torchinductor_*``/``inductor_cache``) is the compiled program: ``runtime``;
* *called by generated code*: Dynamo/AOT frames (``runtime_wrappers``, dispatch modes)
  below a generated-code frame are the compiled program running: ``runtime``;
* *decomposition call sites*: a frame of a function that applies a decomposition table
  (``proxy_tensor.maybe_handle_decomp``, ``OpOverload.decompose``) hands control to a
  decomposition, so a failure below it that reaches no deeper layer than AOT's own
  tracing machinery is a ``decomposition`` failure.

The layer of a chain is the layer of the innermost known frame of the exception that was
raised first (the root of the chain); outer exceptions that only re-wrap it
(``BackendCompilerFailed``, ``InductorError``) do not move it. This module reads frames;
it does not read messages (``message_rules.py``) nor combine evidence (``classifier.py``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from instep.layers import Layer
from instep.profiles import Profile
from instep.run.exception_chain import module_from_path

#: Inductor's generated wrapper/kernel modules: ``<cache>/ab/cab12...xyz.py``.
_GENERATED_FILE = re.compile(r"/[a-z0-9]{2}/c[a-z0-9]{40,}\.py$")
#: Inductor's cache directories, as directories (``/tmp/torchinductor_<user>/``): upstream's
#: own ``test_torchinductor_opinfo.py`` is a test file, not generated code. A run's own
#: cache directory (``TORCHINDUCTOR_CACHE_DIR``) comes in as an extra root.
_GENERATED_DIR = re.compile(r"/torchinductor_[^/]+/|/inductor_cache/|/fxgraph/|/output_code")

#: (module, function) of frames that call into a decomposition.
DECOMPOSITION_CALL_SITES: frozenset[tuple[str, str]] = frozenset(
    {
        ("torch.fx.experimental.proxy_tensor", "maybe_handle_decomp"),
        ("torch.fx.experimental.proxy_tensor", "decompose"),
        ("torch._ops", "decompose"),
    }
)


@dataclass(frozen=True)
class FrameLayer:
    """The layer a chain points at and the frame that says so."""

    layer: Layer
    frame: str  # "module:function:line"
    exception_type: str
    reason: str  # "frame", "generated_code", "decomposition_call_site"

    def as_evidence(self) -> dict[str, Any]:
        return {
            "layer": str(self.layer),
            "frame": self.frame,
            "exception": self.exception_type,
            "reason": self.reason,
        }


def is_generated_code(path: str | None, extra_roots: tuple[str, ...] = ()) -> bool:
    """Whether ``path`` is a file Inductor generated (wrapper or kernel module)."""
    if not path:
        return False
    norm = path.replace("\\", "/")
    if _GENERATED_FILE.search(norm):
        return True
    return bool(_GENERATED_DIR.search(norm)) or any(r and norm.startswith(r) for r in extra_roots)


def frame_layer(
    frame: dict[str, Any], profile: Profile, generated_roots: tuple[str, ...] = ()
) -> tuple[Layer | None, str]:
    """The layer of one frame dict (file, module, function, line) and why."""
    path = frame.get("file")
    if is_generated_code(path, generated_roots):
        return Layer.RUNTIME, "generated_code"
    module = frame.get("module") or module_from_path(path or "")
    return profile.layer_for(module=module, path=None), "frame"


def _describe(frame: dict[str, Any]) -> str:
    module = frame.get("module") or module_from_path(frame.get("file") or "") or frame.get("file")
    return f"{module}:{frame.get('function')}:{frame.get('line')}"


def chain_layer(
    chain: list[dict[str, Any]], profile: Profile, generated_roots: tuple[str, ...] = ()
) -> FrameLayer | None:
    """The layer of the root exception of ``chain`` (outermost first, as stored).

    The root is the last exception of the chain that has a known frame: the chain lists
    the outer exception first and then what it wraps (``inner``/``cause``/``context``).
    """
    for exc in reversed(chain):
        found = frames_layer(exc.get("frames") or [], profile, generated_roots)
        if found is not None:
            layer, frame, reason = found
            return FrameLayer(layer, frame, str(exc.get("type") or ""), reason)
    return None


def frames_layer(
    frames: list[dict[str, Any]], profile: Profile, generated_roots: tuple[str, ...] = ()
) -> tuple[Layer, str, str] | None:
    """``(layer, frame, reason)`` of the innermost known frame of one traceback."""
    frames = [f for f in frames if "elided" not in f]
    for index in range(len(frames) - 1, -1, -1):
        frame = frames[index]
        module = frame.get("module") or module_from_path(frame.get("file") or "")
        if (module, frame.get("function")) in DECOMPOSITION_CALL_SITES:
            return Layer.DECOMPOSITION, _describe(frame), "decomposition_call_site"
        layer, reason = frame_layer(frame, profile, generated_roots)
        if layer is None:
            continue
        if layer.depth < Layer.KERNEL_COMPILE.depth and _under_generated_code(
            frames[:index], generated_roots
        ):  # Dynamo/AOT wrappers (runtime_wrappers, dispatch modes) called by compiled code
            return Layer.RUNTIME, _describe(frame), "under_generated_code"
        if layer is Layer.AOT:  # AOT's tracing machinery may be running a decomposition
            site = _enclosing_call_site(frames[:index], profile, generated_roots)
            if site is not None:
                return Layer.DECOMPOSITION, _describe(site), "decomposition_call_site"
        return layer, _describe(frame), reason
    return None


def _under_generated_code(outer: list[dict[str, Any]], generated_roots: tuple[str, ...]) -> bool:
    return any(is_generated_code(f.get("file"), generated_roots) for f in outer)


def _enclosing_call_site(
    outer: list[dict[str, Any]], profile: Profile, generated_roots: tuple[str, ...]
) -> dict[str, Any] | None:
    """A decomposition call site reached through nothing but AOT/unknown frames."""
    for frame in reversed(outer):
        module = frame.get("module") or module_from_path(frame.get("file") or "")
        if (module, frame.get("function")) in DECOMPOSITION_CALL_SITES:
            return frame
        layer, _ = frame_layer(frame, profile, generated_roots)
        if layer is not None and layer is not Layer.AOT:
            return None
    return None


def touches_compiler(chain: list[dict[str, Any]], profile: Profile) -> bool:
    """Whether any frame of ``chain`` ran inside a compile layer (dynamo or deeper)."""
    for exc in chain:
        for frame in exc.get("frames") or []:
            if "elided" in frame:
                continue
            layer, _ = frame_layer(frame, profile)
            if layer is not None and Layer.DYNAMO.depth <= layer.depth < Layer.NUMERICS.depth:
                return True
    return False
