"""The shape of a profile file, validated with pydantic.

A profile is *data* about one backend: which device it drives, which Dynamo backend it
compiles with, which env var pins a device, how to read its version matrix, which
modules belong to which compile layer, and which messages mean what. Generic code in
run/, triage/ and doctor/ reads it; nothing here executes a probe or classifies a message.
The format is documented in docs/profiles.md.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from instep.layers import Layer


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class VersionProbe(_Strict):
    """How to read one entry of the version matrix. Exactly one source is given."""

    name: str = Field(description="matrix key, e.g. 'torch', 'cann', 'driver'")
    module: str | None = Field(None, description="import this module in the user's Python")
    attribute: str = Field("__version__", description="dotted attribute read from `module`")
    python: str | None = Field(None, description="Python source run in the user's Python; stdout")
    command: list[str] | None = Field(None, description="argv run without a shell; stdout")
    file: str | None = Field(None, description="a file whose text (or `regex` match) is read")
    env: str | None = Field(None, description="an environment variable's value")
    regex: str | None = Field(None, description="first group (or whole match) of this regex")
    optional: bool = Field(True, description="absence is normal (no driver on a CPU host)")

    @model_validator(mode="after")
    def _one_source(self) -> VersionProbe:
        sources = [s for s in ("module", "python", "command", "file", "env") if getattr(self, s)]
        if len(sources) != 1:
            raise ValueError(
                f"probe '{self.name}' needs exactly one of module/python/command/file/env,"
                f" got {sources or 'none'}"
            )
        if self.regex is not None:
            _compile(self.regex, f"probe '{self.name}' regex")
        return self


class MessageRule(_Strict):
    """A message rule: when an exception's type/message matches, it names a category.

    ``layer`` is omitted for *manifestations* (timeout, crash): those take the layer of
    the stage that was running. ``examples`` are real messages (from the seed or from
    runs) that the rule must match; the test-suite checks every one of them.
    """

    category: str = Field(description="'layer.topic', e.g. 'lowering.missing_operator'")
    layer: Layer | None = None
    pattern: str = Field(description="regex searched in 'ExceptionType: message' text")
    exception: str | None = Field(None, description="exception class name that must match too")
    confidence: float = Field(0.6, ge=0.0, le=1.0)
    decisive: bool = Field(
        False,
        description="the message alone decides the layer, whatever the frames say (a fault"
        " of the environment, such as a device used after a fork)",
    )
    description: str = ""
    hint: str | None = Field(None, description="what to do; shown with the failure's batch")
    reference: str | None = Field(
        None, description="where the rule comes from, e.g. 'seed 000 6.2'"
    )
    examples: list[str] = Field(default_factory=list)

    @field_validator("pattern")
    @classmethod
    def _valid_regex(cls, value: str) -> str:
        _compile(value, "rule pattern")
        return value

    @field_validator("category")
    @classmethod
    def _dotted(cls, value: str) -> str:
        if not re.fullmatch(r"[a-z0-9_]+(\.[a-z0-9_]+)+", value):
            raise ValueError(f"category '{value}' must look like 'layer.topic' (lower case)")
        return value

    def compiled(self) -> re.Pattern[str]:
        return _compile(self.pattern, "rule pattern")


class DeviceRuntime(_Strict):
    """What the device runtime tolerates across ``fork()`` (docs/run.md, "Process models").

    ``any``: forking is always safe (CPU): worker hosts import the test modules once and
    fork each case from them. ``before_init``: a child forked after the runtime was
    initialised cannot use the device (CUDA, NPU): no process that forks ever imports a
    test module, which may touch the device at import. ``never``: not even a process that
    imported the backend may fork: case processes are fresh interpreters.
    """

    fork: Literal["any", "before_init", "never"] = "any"
    initialized: list[str] = Field(
        default_factory=list,
        description="dotted callables telling whether this process initialised the device"
        " (any true: it did), e.g. 'torch.cuda.is_initialized'; checked in worker hosts"
        " before they fork",
    )

    fatal_errors: list[str] = Field(
        default_factory=list,
        description="regular expressions: a failed case whose error matches one (a device"
        " error, out of memory) may have left its process unusable, which is then replaced",
    )
    healthy: list[str] = Field(
        default_factory=list,
        description="dotted callables telling whether the device still works in this process"
        " (all true: it does), e.g. 'instep.run.device_probes.cuda_healthy'; asked after a"
        " failed case in a process that initialised the device",
    )

    @field_validator("initialized", "healthy", mode="before")
    @classmethod
    def _one_or_more(cls, value: object) -> object:
        return [value] if isinstance(value, str) else value

    @field_validator("fatal_errors")
    @classmethod
    def _patterns_compile(cls, value: list[str]) -> list[str]:
        for pattern in value:
            _compile(pattern, "fatal_errors pattern")
        return value


class Profile(_Strict):
    """One backend profile, after ``extends`` has been resolved."""

    name: str
    description: str = ""
    extends: str | None = None
    device_type: str = Field(description="torch device type: 'cpu', 'cuda', 'npu', 'xpu', ...")
    dynamo_backend: str = Field("inductor", description="backend passed to torch.compile")
    backend_package: str | None = Field(None, description="Python package of the backend")
    visible_devices_env: str | None = Field(None, description="env var that pins a device")
    device_resource: str | None = Field(None, description="custom resource name for Ray")
    default_isolation: str = Field("worker", pattern="^(case|worker)$")
    runtime: DeviceRuntime = Field(default_factory=DeviceRuntime)
    env: dict[str, str] = Field(default_factory=dict, description="set for every test process")
    debug_env: dict[str, str] = Field(default_factory=dict, description="set for debug re-runs")
    version_probes: list[VersionProbe] = Field(default_factory=list)
    layer_map: dict[str, Layer] = Field(
        default_factory=dict,
        description="module prefix (dotted) or path prefix (with '/') -> layer",
    )
    rules: list[MessageRule] = Field(default_factory=list)

    def layer_for(self, module: str | None = None, path: str | None = None) -> Layer | None:
        """The layer of the longest matching ``layer_map`` key.

        Dotted keys match a module name on component boundaries (``torch._inductor.codegen``
        matches ``torch._inductor.codegen.triton``, not ``torch._inductor.codegenx``); keys
        holding a ``/`` match anywhere inside a file path (for generated code in caches).
        """
        norm_path = path.replace("\\", "/") if path else None
        best: tuple[int, Layer] | None = None
        for key, layer in self.layer_map.items():
            if "/" in key:
                hit = norm_path is not None and key in norm_path
            else:
                hit = module is not None and (module == key or module.startswith(key + "."))
            if hit and (best is None or len(key) > best[0]):
                best = (len(key), layer)
        return best[1] if best else None


_REGEX_CACHE: dict[str, re.Pattern[str]] = {}


def _compile(pattern: str, what: str) -> re.Pattern[str]:
    if pattern not in _REGEX_CACHE:
        try:
            _REGEX_CACHE[pattern] = re.compile(pattern)
        except re.error as exc:
            raise ValueError(
                f"{what} {pattern!r} is not a valid regular expression: {exc}"
            ) from exc
    return _REGEX_CACHE[pattern]
