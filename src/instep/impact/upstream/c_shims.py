"""Static index of an upstream AOTInductor C shim header: the ``aoti_torch_*`` functions
it declares.

A backend's generated C++ wrapper code calls these shims by name
(``aoti_torch_get_numel``, ``aoti_torch_npu__cdist_backward``): the downstream index
finds the names in its strings (``coupling_index``, kind ``c_shim``, best effort). This
module gives the upstream side, so that a release or commit that adds, removes or
changes the parameters of a declaration couples to them.

Each ``AOTI_TORCH_EXPORT <type> aoti_torch_<name>(<params>);`` becomes a FUNCTION
:class:`~instep.impact.model.Symbol` named after the C function, with the parameter
list (whitespace normalised, comments dropped) as its signature and one registration
``c_shim:<name>``, the device part stripped (``aoti_torch_cpu_foo`` and
``aoti_torch_npu_foo`` are the same op's shim on two devices), the key the downstream
references carry. Declarations only; no C is parsed beyond them. Which header paths
are read: :func:`is_shim_header` (data/handles.toml, ``[c_shim] headers``).
"""

from __future__ import annotations

import re
from functools import lru_cache
from importlib import resources

from instep.pyindex.model import Registration, Symbol, SymbolKind
from instep.tomlfile import parse_toml

REGISTRAR = "c_shim"

_COMMENTS = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
_DECLARATION = re.compile(
    r"\bAOTI_TORCH_EXPORT\s+[\w:<>*&\s]+?\b(aoti_torch_\w+)\s*\(([^;{}()]*(?:\([^;{}()]*\)[^;{}()]*)*)\)\s*;"
)


@lru_cache(maxsize=1)
def _data() -> dict:
    text = (resources.files("instep.impact") / "data" / "handles.toml").read_text("utf-8")
    return parse_toml(text, "instep/impact/data/handles.toml").get("c_shim", {})


def shim_devices() -> list[str]:
    """Device names that C shim names carry (``aoti_torch_<device>_<op>``)."""
    return list(_data().get("devices", ["npu", "cuda", "cpu"]))


def shim_header_globs() -> list[str]:
    """Upstream paths of the C shim headers whose declarations are diffed."""
    return list(_data().get("headers", []))


@lru_cache(maxsize=1)
def shim_name_pattern() -> re.Pattern:
    """A C shim name, its op (the device part left out) as group 1; searched in the
    downstream's strings (coupling_index), matched whole on upstream declarations."""
    devices = "|".join(map(re.escape, shim_devices()))
    return re.compile(r"\baoti_torch_(?:(?:" + devices + r")_)?(\w+)")


@lru_cache(maxsize=1)
def _headers() -> re.Pattern:
    return re.compile("|".join(_glob_regex(g) for g in shim_header_globs()) or r"(?!)")


def _glob_regex(glob: str) -> str:
    """A path glob ('*' within a path part, '**/' any directories) as an anchored regex."""
    out = re.escape(glob).replace(r"\*\*/", "(?:[^/]+/)*").replace(r"\*", "[^/]*")
    return f"(?:^{out}$)"


def is_shim_header(path: str) -> bool:
    """Whether ``path`` (relative, posix) is a C shim header instep reads."""
    return path.endswith(".h") and _headers().match(path) is not None


def shim_key(name: str) -> str:
    """``aoti_torch_cuda_foo`` -> ``foo``; ``aoti_torch_get_numel`` -> ``get_numel``."""
    m = shim_name_pattern().fullmatch(name)
    return m.group(1) if m else name


def declarations(path: str, text: str) -> list[Symbol]:
    """The shims ``text`` declares, in order (a name declared twice keeps its first)."""
    code = _COMMENTS.sub(lambda m: "\n" * m.group().count("\n"), text)
    out: dict[str, Symbol] = {}
    for m in _DECLARATION.finditer(code):
        name = m.group(1)
        if name in out:
            continue
        line = code.count("\n", 0, m.start(1)) + 1
        end = line + code.count("\n", m.start(1), m.end())
        params = " ".join(m.group(2).split())
        out[name] = Symbol(
            path=path,
            qualname=name,
            kind=SymbolKind.FUNCTION,
            line=line,
            end_line=end,
            signature=params,
            registrations=(
                Registration(REGISTRAR, f"c_shim:{shim_key(name)}", None, path, line, name),
            ),
        )
    return list(out.values())


def parameter_types(signature: str) -> tuple[str, ...]:
    """The C types of a declaration's parameter list (``AtenTensorHandle grad, double p``
    -> ``('AtenTensorHandle', 'double')``): what a C caller binds by position; the names
    are left out (a parameter written without a name keeps its whole text)."""
    out = []
    for part in signature.split(","):
        part = " ".join(part.split())
        if not part:
            continue
        m = _PARAMETER_NAME.search(part)
        out.append(part[: m.start()].strip() if m and m.start() > 0 else part)
    return tuple(out)


# the name ending a C parameter declaration ('const int64_t* output_size' -> 'output_size')
_PARAMETER_NAME = re.compile(r"(?<=[\s*&])[A-Za-z_]\w*$")
