"""The backend's C++ half, read once per downstream: which files are looked at, and what
they register (:class:`~instep.impact.downstream.kernel_records.KernelIndex`).

* ``*.yaml``/``*.yml``: torchgen backend yamls, recognised by content
  (:mod:`~instep.impact.downstream.backend_yaml`);
* C++ sources and headers (:data:`CPP_SUFFIXES`, CUDA's ``.cu`` and MUSA's ``.mu`` too):
  ``TORCH_LIBRARY*`` registrations, autocast ``KERNEL_*`` lists, boxed fallbacks, op
  lists (:mod:`~instep.impact.downstream.cpp_registrations`), and AOTI C shim
  declarations (``AOTI_TORCH_EXPORT ... aoti_torch_<device>_<op>(...)``, read by
  ``upstream/c_shims.declarations``, the reader of upstream's own shim headers): each is a
  C_SHIM reference (the existing kind, matched to upstream shim header changes) and a
  REGISTERED_KERNEL record of role C_SHIM (matched to the schema of the op it wraps).

A file whose bytes hold none of the words a reader looks for is not decoded. A wheel has
the yamls and headers it ships (torch-npu: the merged codegen yaml, the shim headers, no
``.cpp`` of its own); a source tree or git revision has everything. Nothing is compiled,
preprocessed or imported.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable
from pathlib import PurePosixPath

from instep.impact.downstream import backend_yaml, cpp_registrations
from instep.impact.downstream.kernel_records import KernelIndex, KernelSource, RegisteredKernel
from instep.impact.model import CouplingKind, KernelRole, Reference
from instep.impact.upstream import c_shims

log = logging.getLogger(__name__)

CPP_SUFFIXES = (
    ".cpp",
    ".cc",
    ".cxx",
    ".c++",
    ".cu",
    ".mu",
    ".h",
    ".hh",
    ".hpp",
    ".hxx",
    ".cuh",
    ".muh",
)
#: what this module reads: the downstream snapshot lists these beside ``*.py``
NATIVE_SOURCE_SUFFIXES = (*backend_yaml.YAML_SUFFIXES, *CPP_SUFFIXES)
_SHIM_HEADER = re.compile(r"c_shim_(\w+)\.h$")


def is_native_source(path: str) -> bool:
    """A downstream file this module may read (the snapshot lists these beside ``*.py``)."""
    return path.endswith(NATIVE_SOURCE_SUFFIXES)


def read_registered_kernels(
    paths: Iterable[str],
    read: Callable[[str], bytes],
    skip: Callable[[str], bool] = lambda path: False,
) -> KernelIndex:
    """Every registration of the native files among ``paths`` (``skip``: ``--exclude``)."""
    index = KernelIndex()
    for path in paths:
        if skip(path) or not is_native_source(path):
            continue
        try:
            data = read(path)
        except (OSError, KeyError) as exc:
            log.warning("cannot read %s: %s; its registrations are not read", path, exc)
            continue
        if path.endswith(backend_yaml.YAML_SUFFIXES):
            if backend_yaml.may_be_backend_yaml(path, data):
                found = backend_yaml.read_backend_yaml(path, data.decode("utf-8", "replace"))
                if found is not None:
                    index.backend_yamls.append(path)
                    index.kernels += found
            continue
        index.cpp_files_read += 1
        shims = b"AOTI_TORCH_EXPORT" in data
        if not (shims or cpp_registrations.may_register(data)):
            continue
        text = data.decode("utf-8", "replace")
        before = len(index.kernels) + len(index.fallbacks)
        if cpp_registrations.may_register(data):
            scan = cpp_registrations.scan_cpp(path, text)
            index.kernels += scan.kernels
            index.fallbacks += scan.fallbacks
        if shims:
            _add_shims(index, path, text)
        if len(index.kernels) + len(index.fallbacks) > before:
            index.cpp_files_registering += 1
    return index


def _add_shims(index: KernelIndex, path: str, text: str) -> None:
    """A shim header's declarations: C_SHIM references keyed like upstream's
    (``c_shim:<op>``, the device stripped) and C_SHIM-role kernel records named after the
    op and overload the shim wraps (``aoti_torch_npu_add_Tensor`` -> ``add_Tensor``)."""
    m = _SHIM_HEADER.search(PurePosixPath(path).name)
    device = f"aoti_torch_{m.group(1)}_" if m else None
    lines = text.split("\n")
    for sym in c_shims.declarations(path, text):
        name = sym.qualname
        key = name[len(device) :] if device and name.startswith(device) else c_shims.shim_key(name)
        snippet = lines[sym.line - 1].strip()[:200] if sym.line <= len(lines) else name
        index.shim_references.append(
            Reference(
                CouplingKind.C_SHIM,
                f"c_shim:{key}",
                path,
                sym.line,
                snippet,
                detail=f"C shim declared in a header ({sym.signature})",
                signature=sym.signature,
            )
        )
        index.kernels.append(
            RegisteredKernel(
                path=path,
                line=sym.line,
                name=key,
                role=KernelRole.C_SHIM,
                source=KernelSource.CPP,
                where=m.group(1) if m else "",
                snippet=snippet,
                schema=sym.signature,
            )
        )
