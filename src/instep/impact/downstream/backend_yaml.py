"""REGISTERED_KERNEL from a torchgen backend yaml: the ATen overloads an out-of-tree backend
asks torchgen's codegen to register its kernels for, each at the yaml line naming it.

Two shapes are read, recognised by content, never by one backend's path:

* **a backend yaml** (torchgen's ``gen_backend_stubs`` format: torch-npu's
  ``npu_native_functions*.yaml``, torch-xpu-ops' ``xpu_functions.yaml``): a mapping with
  ``backend:`` and ``cpp_namespace:``, whose list-valued keys are its sections
  (``supported``, ``autograd``, ``custom``, ``symint``, ``quant``, ``tocpu``, any other);
  an entry is a bare overload name (``abs.out``) or a mapping whose ``func:`` holds a
  name or a whole schema (the backend's own copy of the upstream schema), with keys such
  as ``impl_ns``, ``op_api``, ``dispatch``, ``exposed`` (not read). ``custom`` (and
  ``custom_autograd``) entries define the backend's own ops: role CUSTOM;
* **a list of ``- func:`` entries** (torchgen's ``native_functions.yaml`` format, kept by
  backends that generate from their own copy: torch_musa's ``musa_functions.yaml``,
  torch-xpu-ops' ``yaml/native/native_functions.yaml``), section ``functions``. A file at
  upstream's own schema path (a vendored PyTorch) is upstream's, not the backend's.

A bare name is one overload, as torchgen reads it (``OperatorName.parse``): ``abs`` is
``aten::abs``, the default overload, never the packet. Lines come from PyYAML's composed
nodes (``start_mark``; the C loader when libyaml is there): the line of the ``func:``
value, or of the bare name, whatever the entry's key order, quoting or flow style. A
line scan would have to re-implement YAML's quoting and flow collections to be right; the
composed tree costs about 0.05 CPU-s on torch-npu's 250 KB yaml.
"""

from __future__ import annotations

import logging
import re

import yaml

from instep.impact.downstream.kernel_records import (
    UPSTREAM_NAMESPACE,
    KernelSource,
    RegisteredKernel,
)
from instep.impact.model import KernelRole
from instep.impact.upstream.op_schemas import SCHEMA_FILES

try:  # libyaml's composer is several times faster; PyYAML wheels ship it
    from yaml import CSafeLoader as _Loader
except ImportError:  # pragma: no cover - depends on how PyYAML was built
    from yaml import SafeLoader as _Loader  # type: ignore[assignment]

log = logging.getLogger(__name__)

YAML_SUFFIXES = (".yaml", ".yml")
CUSTOM_SECTIONS = frozenset({"custom", "custom_autograd"})
LIST_SECTION = "functions"  # the section name of a list-shaped file
_NAME = re.compile(r"[A-Za-z_]\w*(?:\.\w+)?")
_MAPPING_HINT = re.compile(rb"^backend\s*:", re.M)
_LIST_HINT = re.compile(rb"^-\s*func\s*:", re.M)


def may_be_backend_yaml(path: str, data: bytes) -> bool:
    """A cheap test on the bytes before parsing: a top-level ``backend:`` with a
    ``cpp_namespace:``, or a top-level ``- func:`` entry outside upstream's schema path."""
    if not path.endswith(YAML_SUFFIXES):
        return False
    if _MAPPING_HINT.search(data) and b"cpp_namespace" in data:
        return True
    return _LIST_HINT.search(data) is not None and not path.endswith(SCHEMA_FILES)


def read_backend_yaml(path: str, text: str) -> list[RegisteredKernel] | None:
    """The overloads a backend yaml names, in file order; None when ``text`` is no backend
    yaml (another YAML file). A file that does not parse is warned about and read as none."""
    try:
        root = yaml.compose(text, Loader=_Loader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or exc
        log.warning(
            "%s%s: not valid YAML (%s); its kernel registrations are not read", path, at, problem
        )
        return None
    lines = text.splitlines()
    if isinstance(root, yaml.MappingNode):
        keys = {k.value: v for k, v in root.value if isinstance(k, yaml.ScalarNode)}
        backend, namespace = keys.get("backend"), keys.get("cpp_namespace")
        if not (isinstance(backend, yaml.ScalarNode) and isinstance(namespace, yaml.ScalarNode)):
            return None
        out: list[RegisteredKernel] = []
        for key, value in root.value:
            if isinstance(key, yaml.ScalarNode) and isinstance(value, yaml.SequenceNode):
                out += _section(path, lines, str(key.value), value)
        return out
    if isinstance(root, yaml.SequenceNode) and not path.endswith(SCHEMA_FILES):
        entries = _section(path, lines, LIST_SECTION, root)
        return entries if entries else None
    return None


def _section(
    path: str, lines: list[str], section: str, seq: yaml.SequenceNode
) -> list[RegisteredKernel]:
    role = KernelRole.CUSTOM if section in CUSTOM_SECTIONS else KernelRole.KERNEL
    out = []
    for item in seq.value:
        node = item
        if isinstance(item, yaml.MappingNode):
            node = next(
                (v for k, v in item.value if isinstance(k, yaml.ScalarNode) and k.value == "func"),
                None,
            )
        if not isinstance(node, yaml.ScalarNode) or not isinstance(node.value, str):
            continue
        written = node.value.strip()
        name = written.partition("(")[0].strip()
        if not _NAME.fullmatch(name):
            log.debug("%s:%d: %r names no overload; skipped", path, node.start_mark.line + 1, name)
            continue
        line = node.start_mark.line + 1
        out.append(
            RegisteredKernel(
                path=path,
                line=line,
                name=name,
                role=role,
                source=KernelSource.YAML,
                where=section,
                namespace="" if role is KernelRole.CUSTOM else UPSTREAM_NAMESPACE,
                snippet=lines[line - 1].strip()[:200] if line <= len(lines) else written[:200],
                schema=written if "(" in written else None,
            )
        )
    return out
