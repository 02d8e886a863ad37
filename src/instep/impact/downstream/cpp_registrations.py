"""REGISTERED_KERNEL from C++ text: the ATen overloads a backend's C++ sources and headers
register, written out, read by a small scanner (no compiler, no libclang, no macro
expansion: registrations are read as they are written).

What is read, each at its ``file:line``:

* **kernels**: ``m.impl("op.overload", ...)``, ``m.impl(TORCH_SELECTIVE_NAME("aten::op"),
  TORCH_FN(f))`` inside ``TORCH_LIBRARY_IMPL(<ns>, <Key>, m) { ... }`` (also inside
  ``TORCH_LIBRARY``/``TORCH_LIBRARY_FRAGMENT`` blocks, and in a macro's body): role KERNEL,
  the dispatch key as ``where``; a kernel made by ``makeFallthrough`` or
  ``makeFromBoxedFunction`` is boxed (it reads its arguments from the stack by the schema,
  so no C++ signature has to match). A name without ``::`` is in the block's namespace; a
  name without ``.`` is the default overload (``aten::op``), as the dispatcher reads it.
  ``m.def(...)`` in the ``aten`` namespace defines an op of upstream's namespace: CUSTOM;
* **autocast policies**: ``KERNEL_*(op, policy)`` / ``KERNEL_*(op, overload, policy)``
  (``KERNEL_PRIVATEUSEONE``, ``KERNEL_CUDA``, ``KERNEL_MUSA``, upstream's ``KERNEL(DeviceType,
  op, policy)``...) inside a ``TORCH_LIBRARY_IMPL(aten, Autocast<...>, m)`` block:
  AUTOCAST, the policy as ``where``. ``KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_*(f,
  "op.overload", register_sig, redispatch_sig, policy)`` writes its C++ signature out
  (``explicit_signature``). A line of a ``#define`` (the macro being defined) is not a use;
  arguments built from ``__VA_ARGS__`` are not read;
* **boxed fallbacks**: ``m.fallback(...)`` in ``TORCH_LIBRARY_IMPL(_, <Key>, m)``;
* **op lists**: a string literal that is exactly ``"aten::op"`` or ``"aten::op.overload"``
  and no registration's name (a fallback list, an allow list): OP_LIST. A message that
  mentions an op inside other words is not one.

Comments are blanked and string literals masked before anything is searched (so a
commented-out registration is not read, and braces or parentheses inside strings do not
count); line continuations are whitespace. AOTI C shim declarations are read by
``upstream/c_shims.declarations`` (the same reader as upstream's headers), not here.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field

from instep.impact.downstream.kernel_records import BoxedFallback, KernelSource, RegisteredKernel
from instep.impact.model import KernelRole

# one token of C++ text that must not be searched as code: a comment, a raw string, a
# string (u8/L/u/U prefixes are identifier characters left in the code) or a character
# literal (not after an identifier character: 1'000'000 is a number)
_TOKENS = re.compile(
    r"""//[^\n]*|/\*.*?(?:\*/|\Z)|R"(?P<delim>[^()\\\s"]{0,16})\((?P<raw>.*?)\)(?P=delim)"|"(?:[^"\\\n]|\\.)*"|(?<![\w.])'(?:[^'\\\n]|\\.)*'|\\\r?\n""",
    re.S,
)
_BLOCK = re.compile(
    r"\b(?:STABLE_)?TORCH_LIBRARY(?P<impl>_IMPL|_FRAGMENT)?\s*\((?P<args>[^()]*)\)\s*\{"
)
_MACRO = re.compile(r"\b(KERNEL\w*)\s*\(")
_DEFINE = re.compile(r"#\s*define\s+$")
_OP_NAME = re.compile(r"(?:(?P<ns>\w+)::)?(?P<name>[A-Za-z_]\w*(?:\.\w+)?)")
_SELECTIVE = re.compile(r"TORCH_SELECTIVE_(?:NAME|SCHEMA)\s*\(\s*$")
_DISPATCH_KEY = re.compile(r"DispatchKey::(\w+)")
_IDENT = re.compile(r"[A-Za-z_]\w*")
_ADD_NS = re.compile(r"ADD_NS\s*\(\s*([A-Za-z_]\w*)\s*\)")
_STRING_OP = re.compile(r"aten::[A-Za-z_]\w*(?:\.\w+)?")
_BOXED = (
    "makeFallthrough",
    "makeFromBoxedFunction",
    "makeFromBoxedKernel",
    "makeNamedNotSupported",
)
# the words a line must hold to be worth scanning at all
HINTS = (b"TORCH_LIBRARY", b"KERNEL", b'"aten::')


@dataclass
class Masked:
    """C++ text with comments blanked and string contents masked, same length and lines."""

    text: str
    code: str
    strings: dict[int, str] = field(default_factory=dict)  # opening quote offset -> value
    newlines: list[int] = field(default_factory=list)  # offsets of the newlines, in order

    def line_of(self, offset: int) -> int:
        if not self.newlines and "\n" in self.text:
            self.newlines = [m.start() for m in re.finditer("\n", self.text)]
        return bisect.bisect_left(self.newlines, offset) + 1

    def string_at(self, offset: int) -> str | None:
        """The value of the string literal starting at or after ``offset`` (spaces
        skipped), when the next code there is one."""
        i = offset
        while i < len(self.code) and self.code[i] in " \t\r\n":
            i += 1
        return self.strings.get(i)


def mask(text: str) -> Masked:
    """Comments to spaces, string and character contents to spaces (quotes kept),
    line continuations to a space; newlines are kept so offsets and lines still match."""
    parts: list[str] = []
    strings: dict[int, str] = {}
    pos = 0
    for m in _TOKENS.finditer(text):
        parts.append(text[pos : m.start()])
        tok = m.group()
        if tok.startswith(("//", "/*")) or tok.startswith("\\"):
            parts.append(re.sub(r"[^\n]", " ", tok))
        elif m.group("delim") is not None:  # R"d(...)d"
            strings[m.start() + 1] = m.group("raw")
            parts.append("R" + '"' + re.sub(r"[^\n]", " ", tok[2:-1]) + '"')
        else:
            if tok[0] == '"':
                strings[m.start()] = re.sub(r"\\(.)", r"\1", tok[1:-1])
            parts.append(tok[0] + re.sub(r"[^\n]", " ", tok[1:-1]) + tok[-1])
        pos = m.end()
    parts.append(text[pos:])
    return Masked(text, "".join(parts), strings)


def _closing(code: str, open_at: int, pair: str) -> int:
    """The offset of the bracket closing the one at ``open_at`` (len(code) if none)."""
    opening, closing = pair
    depth = 0
    for i in range(open_at, len(code)):
        ch = code[i]
        if ch == opening:
            depth += 1
        elif ch == closing:
            depth -= 1
            if depth == 0:
                return i
    return len(code)


def _arguments(code: str, open_at: int) -> list[tuple[int, int]]:
    """The (start, end) spans of the top-level arguments of the call whose ``(`` is at
    ``open_at``."""
    end = _closing(code, open_at, "()")
    spans, depth, start = [], 0, open_at + 1
    for i in range(open_at + 1, end):
        ch = code[i]
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            spans.append((start, i))
            start = i + 1
    if code[start:end].strip():
        spans.append((start, end))
    return spans


@dataclass
class CppScan:
    """What one C++ file registers."""

    kernels: list[RegisteredKernel] = field(default_factory=list)
    fallbacks: list[BoxedFallback] = field(default_factory=list)


class _Scanner:
    def __init__(self, path: str, text: str) -> None:
        self.path = path
        self.m = mask(text)
        self.lines = text.split("\n")
        self.out = CppScan()
        self.named: set[int] = set()  # string offsets read as registration names

    def snippet(self, line: int) -> str:
        return self.lines[line - 1].strip()[:200] if line <= len(self.lines) else ""

    def run(self) -> CppScan:
        code = self.m.code
        for b in _BLOCK.finditer(code):
            args = [a.strip() for a in b.group("args").split(",")]
            if b.group("impl") == "_IMPL":
                if len(args) != 3:
                    continue
                ns, key, var = args
            else:
                if len(args) != 2:
                    continue
                (ns, var), key = args, ""
            if not (_IDENT.fullmatch(ns) and _IDENT.fullmatch(var)):
                continue  # a macro's parameters (TORCH_LIBRARY_IMPL(lib, key, m)): not read
            body_open = b.end() - 1
            body_end = _closing(code, body_open, "{}")
            self.block(ns, key, var, body_open, body_end)
        self.op_lists()
        self.out.kernels.sort(key=lambda k: k.line)  # in file order (stable within a line)
        return self.out

    def block(self, ns: str, key: str, var: str, start: int, end: int) -> None:
        code = self.m.code
        call = re.compile(rf"\b{re.escape(var)}\s*\.\s*(impl|fallback|def)\s*\(")
        for c in call.finditer(code, start, end):
            verb, open_at = c.group(1), c.end() - 1
            spans = _arguments(code, open_at)
            line = self.m.line_of(c.start())
            if verb == "fallback":
                if ns == "_":
                    close = _closing(code, open_at, "()")
                    kernel = " ".join(self.m.text[open_at + 1 : close].split())
                    self.out.fallbacks.append(BoxedFallback(self.path, line, key, kernel[:120]))
                continue
            if not spans:
                continue
            name = self.name_of(*spans[0])
            if name is None:
                continue
            op_ns, op_name = name
            if verb == "def":
                if (op_ns or ns) == "aten":
                    self.add(line, op_name, KernelRole.CUSTOM, "def", "aten")
                continue
            rest = code[spans[1][0] : spans[-1][1]] if len(spans) > 1 else ""
            where = key
            if len(spans) > 2:  # m.impl("op", c10::DispatchKey::CPU, fn)
                k = _DISPATCH_KEY.search(code[spans[1][0] : spans[1][1]])
                where = k.group(1) if k else key
            self.add(
                line,
                op_name,
                KernelRole.KERNEL,
                where,
                op_ns or ns,
                boxed=any(word in rest for word in _BOXED),
            )
        if ns == "aten" and key.startswith("Autocast"):
            for mac in _MACRO.finditer(code, start, end):
                self.autocast(mac, key)

    def name_of(self, start: int, end: int) -> tuple[str, str] | None:
        """(namespace or '', 'op.overload') of a registration's first argument: a string
        literal, or TORCH_SELECTIVE_NAME/SCHEMA("..."); a schema is cut at its ``(``."""
        code = self.m.code
        arg = code[start:end].strip()
        offset = start + (len(code[start:end]) - len(code[start:end].lstrip()))
        if arg.startswith("TORCH_SELECTIVE_"):
            paren = code.find("(", offset, end)
            if paren < 0:
                return None
            offset = paren + 1
        value = self.m.string_at(offset)
        if value is None:
            return None
        at = offset
        while code[at] in " \t\r\n":
            at += 1
        self.named.add(at)
        m = _OP_NAME.fullmatch(value.partition("(")[0].strip())
        if m is None:
            return None  # a template placeholder ("${name}") or a computed name
        return m.group("ns") or "", m.group("name")

    def autocast(self, mac: re.Match, key: str) -> None:
        code, text = self.m.code, self.m.text
        line_start = code.rfind("\n", 0, mac.start()) + 1
        if _DEFINE.search(code[line_start : mac.start()]):
            return  # the macro being defined, not a use
        spans = _arguments(code, mac.end() - 1)
        args = [code[s:e].strip() for s, e in spans]
        if not args or any("__VA_ARGS__" in a or "#" in a for a in args):
            return
        line = self.m.line_of(mac.start())
        strings = [(s, self.m.string_at(s)) for s, _ in spans]
        named = [(s, v) for s, v in strings if v is not None]
        if named:  # KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_X(f, "op.overload", sig, sig, policy)
            s, value = named[0]
            m = _OP_NAME.fullmatch(value)
            if m is None:
                return
            at = s
            while code[at] in " \t\r\n":
                at += 1
            self.named.add(at)
            i = next(k for k, (st, _) in enumerate(spans) if st == s)
            signature = None
            if i + 1 < len(spans):  # the register signature follows the name
                signature = " ".join(text[spans[i + 1][0] : spans[i + 1][1]].split())
            self.add(
                line,
                m.group("name"),
                KernelRole.AUTOCAST,
                args[-1] if _IDENT.fullmatch(args[-1]) else key,
                "aten",
                schema=signature,
                explicit_signature="SIGNATURE" in mac.group(1),
            )
            return
        if args and ("::" in args[0] or "DeviceType" in args[0]):
            args = args[1:]  # upstream's KERNEL(c10::DeviceType::CUDA, op, ..., policy)
        if len(args) not in (2, 3):
            return
        *names, policy = args
        ident = [_ADD_NS.sub(r"\1", n) for n in names]
        if not all(_IDENT.fullmatch(n) for n in ident) or not _IDENT.fullmatch(policy):
            return
        self.add(line, ".".join(ident), KernelRole.AUTOCAST, policy, "aten")

    def op_lists(self) -> None:
        for offset, value in self.m.strings.items():
            if offset in self.named or not _STRING_OP.fullmatch(value):
                continue
            line = self.m.line_of(offset)
            self.add(line, value.split("::", 1)[1], KernelRole.OP_LIST, "string", "aten")

    def add(
        self,
        line: int,
        name: str,
        role: KernelRole,
        where: str,
        namespace: str,
        *,
        boxed: bool = False,
        schema: str | None = None,
        explicit_signature: bool = False,
    ) -> None:
        self.out.kernels.append(
            RegisteredKernel(
                path=self.path,
                line=line,
                name=name,
                role=role,
                source=KernelSource.CPP,
                where=where,
                namespace=namespace,
                snippet=self.snippet(line),
                schema=schema,
                boxed=boxed,
                explicit_signature=explicit_signature,
            )
        )


def may_register(data: bytes) -> bool:
    """A cheap test on the bytes: does the file name anything this scanner reads?"""
    return any(h in data for h in HINTS)


def scan_cpp(path: str, text: str) -> CppScan:
    """The registrations, autocast policies, boxed fallbacks and op lists of one file."""
    return _Scanner(path, text).run()
