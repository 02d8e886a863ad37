"""The records of the backend's C++ half that REGISTERED_KERNEL couplings are made of: one
:class:`RegisteredKernel` per place that names an ATen overload (a backend yaml entry, an
``m.impl``, an autocast ``KERNEL_*`` line, a C shim declaration, a C++ string), one
:class:`BoxedFallback` per ``m.fallback``, and :class:`KernelIndex`, what was read.

Data only: ``backend_yaml`` and ``cpp_registrations`` fill these, ``registered_kernels``
gathers them, ``join/kernel_couplings`` matches them. Nothing here reads or decides.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from instep.impact.model import KernelRole, Reference
from instep.pyindex.model import Vocab

UPSTREAM_NAMESPACE = "aten"


class KernelSource(Vocab):
    """Where a record was read from."""

    YAML = "backend_yaml"  # a torchgen backend yaml
    CPP = "cpp"  # C++ source or header text


@dataclass(frozen=True)
class RegisteredKernel:
    """One place of the backend's C++ half that names an ATen overload."""

    path: str
    line: int
    name: str  # 'sum.dim_IntList', 'abs' (the default overload); c_shim: 'add_Tensor'
    role: KernelRole
    source: KernelSource
    where: str  # yaml section, dispatch key, autocast policy, or the shim header's device
    namespace: str = UPSTREAM_NAMESPACE  # '' for a backend yaml's own (custom) op
    snippet: str = ""
    schema: str | None = None  # yaml: the `func:` copy of the schema; autocast: the
    # register signature written in KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_*
    boxed: bool = False  # m.impl of a fallthrough or boxed kernel: no C++ signature
    explicit_signature: bool = False  # autocast with its C++ signature written out

    @property
    def op(self) -> str:
        return self.name.partition(".")[0]

    @property
    def overload(self) -> str:
        """'' for the default overload (a bare name is ``aten::x``, not every overload)."""
        return self.name.partition(".")[2]

    @property
    def at(self) -> str:
        return f"{self.path}:{self.line}"

    def describe(self) -> str:
        """``kernel supported sum.dim_DimnameList`` (role, where, what is named)."""
        return " ".join(p for p in (str(self.role), self.where, self.name) if p)


@dataclass(frozen=True)
class BoxedFallback:
    """``TORCH_LIBRARY_IMPL(_, <key>, m) { m.fallback(...) }``: one kernel for every op
    without its own under that key; it names no overload, so it couples to none."""

    path: str
    line: int
    key: str
    kernel: str  # the argument as written, shortened


@dataclass
class KernelIndex:
    """Everything read from the backend's yaml and C++ files."""

    kernels: list[RegisteredKernel] = field(default_factory=list)
    fallbacks: list[BoxedFallback] = field(default_factory=list)
    # C_SHIM references of the shim headers' declarations (the existing c_shim kind)
    shim_references: list[Reference] = field(default_factory=list)
    backend_yamls: list[str] = field(default_factory=list)
    cpp_files_read: int = 0
    cpp_files_registering: int = 0

    def registered_overloads(self) -> set[str]:
        """The overloads the backend registers a kernel for (yaml entries of every section,
        ``m.impl``, autocast), by name: an overload in several sections or files is one.
        A C++ registration outside ``aten`` keeps its namespace (``npu::x``)."""
        roles = (KernelRole.KERNEL, KernelRole.CUSTOM, KernelRole.AUTOCAST)
        return {
            k.name if k.namespace in ("", UPSTREAM_NAMESPACE) else f"{k.namespace}::{k.name}"
            for k in self.kernels
            if k.role in roles
        }

    def stats(self) -> dict[str, object]:
        """``registered_kernels`` and its parts, for the report's scope (absent when
        nothing was read: the caller leaves them out)."""

        def distinct(role: KernelRole, source: KernelSource | None = None) -> int:
            return len(
                {
                    (k.namespace, k.name)
                    for k in self.kernels
                    if k.role is role and (source is None or k.source is source)
                }
            )

        yaml_names = {
            k.name
            for k in self.kernels
            if k.source is KernelSource.YAML and k.role in (KernelRole.KERNEL, KernelRole.CUSTOM)
        }
        return {
            "registered_kernels": len(self.registered_overloads()),
            "registered_kernels_by_source": {
                "backend_yaml": len(yaml_names),
                "backend_yaml_custom": distinct(KernelRole.CUSTOM, KernelSource.YAML),
                "cpp_impl": distinct(KernelRole.KERNEL, KernelSource.CPP),
                "autocast": distinct(KernelRole.AUTOCAST),
                "c_shim": distinct(KernelRole.C_SHIM),
                "op_list": distinct(KernelRole.OP_LIST),
                "fallback": len(self.fallbacks),
            },
            "registered_kernel_files": {
                "backend_yaml": list(self.backend_yamls),
                "cpp_read": self.cpp_files_read,
                "cpp_registering": self.cpp_files_registering,
            },
        }
