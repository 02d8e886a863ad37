"""Index one file of an upstream or downstream tree: Python through ``instep.pyindex``,
an upstream C shim header (``.h``) through :mod:`instep.impact.upstream.c_shims`, the
ATen operator schema file (``native_functions.yaml``) through
:mod:`instep.impact.upstream.op_schemas`.

The same three entry points as :mod:`instep.pyindex.symbols` (``index_text``,
``index_source``, ``index_against``), dispatching on the path; a header is never indexed
against a previous version (it is read whole). Nothing here parses Python or C itself.
"""

from __future__ import annotations

from instep.impact.upstream.c_shims import declarations
from instep.impact.upstream.op_schemas import index_schema_file, is_schema_file
from instep.pyindex import symbols
from instep.pyindex.symbols import FileIndex, ReuseStats, decode_or_error


def index_text(path: str, text: str) -> FileIndex:
    """Index decoded text; a C shim header gives its ``aoti_torch_*`` declarations."""
    if path.endswith(".h"):
        return symbols.index_of_declarations(path, text, declarations(path, text))
    if is_schema_file(path):
        return index_schema_file(path, text)
    return symbols.index_text(path, text)


def index_source(path: str, data: bytes) -> FileIndex:
    """Index one file's bytes. Bad input gives an empty index with ``error`` (and a warning)."""
    text, failed = decode_or_error(path, data)
    return failed if text is None else index_text(path, text)  # type: ignore[return-value]


def index_against(
    path: str,
    text: str,
    reference: FileIndex,
    reference_text: str,
    stats: ReuseStats | None = None,
) -> FileIndex:
    """:func:`instep.pyindex.symbols.index_against`; a header is indexed whole."""
    if path.endswith(".h") or is_schema_file(path):
        if stats is not None:
            stats.full_parse = True
        return index_text(path, text)
    return symbols.index_against(path, text, reference, reference_text, stats)
