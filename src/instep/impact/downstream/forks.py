"""Find forks: downstream files and functions that are modified copies of upstream ones.

Two cheap fingerprints, no difflib:

* a function :class:`Fingerprint` is the set of hashes of its normalised lines
  (comments and all whitespace dropped, the def's own name replaced), so a renamed
  copy, re-indented (nested) copy or re-spaced line still matches while an edited line
  does not; computed from the file's line hashes, no per-token Python work;
* a file's :class:`LinesFingerprint` is the set of hashes of its normalised non-trivial
  lines; a downstream file is a fork of an upstream file when a large share of its lines
  occur in it.

Candidates are found through inverted indexes (gram -> upstream function, line ->
upstream file), so the cost grows with the matches, not with the product of the sides.
This module knows nothing about which upstream symbols changed; the caller passes them.
The fingerprints are records of the downstream index (``downstream/records.py``).
"""

from __future__ import annotations

import ast
import hashlib
import re
import zlib
from array import array
from collections import Counter, defaultdict
from itertools import chain, pairwise

from instep.impact.downstream.records import (
    DownstreamFunction,
    Fingerprint,
    LinesFingerprint,
    pack_hashes,
)
from instep.impact.model import CouplingKind, Reference
from instep.pyindex.model import Symbol, module_of

STOP_GRAM = 40  # a gram in more upstream functions than this is not used to find candidates
SAME_NAME_FACTOR = 0.75  # a same-name copy needs only 3/4 of the threshold (0.45 for 0.6)
assert array("I").itemsize == 4, "uint32 array needed for packed fingerprints"
MIN_GRAMS = 8  # functions smaller than this are too generic to call a fork
# A copy needs this many logical lines besides its def line and framework boilerplate
# (a super() or Base.__init__(self, ...) call, ``self.x = <name, constant, empty literal or
# argument-less call>``, ``pass``, a bare ``return``): every subclass __init__ is such
# lines, so two of them agree by construction, not because one was copied (issue #31: an
# __init__ calling super().__init__ and setting two fields matched Dynamo's
# InliningGeneratorInstructionTranslator.__init__ as a "stale copy"). Two, not one: a
# single shared statement is as likely a common idiom as a copy.
MIN_SUBSTANCE = 2
# A copy under the same name as the upstream function needs one such line: the name is
# the second witness (torch-npu 2.12.0's `inductor_randint.inner_fn`, one `return`
# that upstream 2.13.0 changed from `index_expr` to `value_expr` in its own copy, and its
# `_boundaries_helper`). Not for dunders: every `__init__` shares its name.
MIN_SUBSTANCE_SAME_NAME = 1
# A def line that declares this many named parameters besides self/cls counts as one
# line of substance: a copied interface (torch_musa's `_record_memory_history_legacy`,
# six parameters over one call into its own extension, a copy of torch.cuda's that
# upstream gave three more) is a copy, while an `__init__(self, *args, **kwargs)` or
# a one-argument constructor is no interface of its own.
MIN_SIGNATURE_PARAMS = 3
_BOILERPLATE = re.compile(
    r"(?:@.*|(?:async)?defN\(.*|pass|return|returnNone|[\"'].*"
    r"|(?:return)?super\(\)\.\w+\(.*\)|(?:return)?[\w.]+\.__init__\(self.*\)"
    r"|self\.\w+(?::[^=]+)?=(?:[\w.]+|-?\d+(?:\.\d+)?|\[\]|\{\}|\(\)|[\w.]+\(\)|[\"'].*))"
)
MIN_FILE_LINES = 15  # files with fewer distinct non-trivial lines are not compared
MIN_LINE_CHARS = 12

_COMMENT_BYTES = re.compile(rb"#[^\n]*")
_BLANK_BYTES = b" \t\r\f\v"  # the whitespace dropped, newlines kept
# a def's name: ``def`` + name found by its literal prefix (a search anchored at every
# line start, ``(?m)^[ \t]*...``, cost four times more), then kept only where the line
# before it is indentation and an optional ``async``
_DEF_NAME = re.compile(r"(def[ \t]+)\w+")
_DEF_LEAD = re.compile(r"[ \t]*(?:async[ \t]+)?")
MIN_FUNC_LINE_CHARS = 6
_TRAILING_COMMA = re.compile(r",([)\]}])")
_PIECE_SPLIT = re.compile(rb"[()\[\]{},:=]+")


def _def_name_to_n(m: re.Match[str]) -> str:
    """``def name`` -> ``def N`` where ``def`` starts the line's code, else unchanged."""
    s, start = m.string, m.start()
    if _DEF_LEAD.fullmatch(s, s.rfind("\n", 0, start) + 1, start):
        return m.group(1) + "N"
    return m.group(0)


def normalised_lines(source: str) -> list[str]:
    """One entry per source line: comments and all whitespace removed, def names -> N.

    Regexes and a translate (a Python call per ``def`` only): cheap enough for a whole
    tree. A '#' inside a string also starts a "comment" here; both sides are normalised
    alike.
    """
    named = _DEF_NAME.sub(_def_name_to_n, source) if "def" in source else source
    # comments and whitespace go on the UTF-8 bytes (``#``, the newline and the blanks are
    # ASCII, which no multi-byte character contains): a byte ``translate`` deletes the
    # blanks four times faster than a regex substitution per run of them; surrogatepass
    # brings back any lone surrogate as it was
    data = _COMMENT_BYTES.sub(b"", named.encode("utf-8", "surrogatepass"))
    text = data.translate(None, _BLANK_BYTES).decode("utf-8", "surrogatepass")
    return text.split("\n")


def logical_lines(lines: list[str]) -> list[str]:
    """Each *logical* line's text, at the index of its first physical line.

    Lines inside open brackets are joined first (and a trailing comma before a closing
    bracket dropped), so a call exploded over several lines by a formatter hashes like
    the one-line call. Continuation lines and trivial lines (``else:``, blank) get "".
    """
    out = [""] * len(lines)
    depth = 0
    start = 0
    buf: list[str] = []
    for i, line in enumerate(lines):
        if not buf:  # (depth is 0 here)
            if not (
                "(" in line
                or ")" in line
                or "[" in line
                or "]" in line
                or "{" in line
                or "}" in line
            ):  # most lines: a logical line of its own, no bracket to count
                if len(line) >= MIN_FUNC_LINE_CHARS:
                    out[i] = line
                continue
            start = i
        buf.append(line)
        if "(" in line or ")" in line or "[" in line or "]" in line or "{" in line or "}" in line:
            depth += (
                line.count("(")
                + line.count("[")
                + line.count("{")
                - line.count(")")
                - line.count("]")
                - line.count("}")
            )
        if depth > 0 and i - start < 200:
            continue
        depth = 0
        text = buf[0] if len(buf) == 1 else _TRAILING_COMMA.sub(r"\1", "".join(buf))
        buf = []
        if len(text) >= MIN_FUNC_LINE_CHARS:
            out[start] = text
    return out


def line_grams(lines: list[str]) -> list[tuple[int, ...]]:
    """Per physical line, the grams of the logical line starting there (else empty).

    A logical line is cut at brackets, commas and operators into pieces; a gram is the
    hash of two consecutive pieces, so one edited argument changes a few grams, not the
    whole line.

    Works on the UTF-8 bytes (the separators are ASCII, which no multi-byte character
    contains): the pieces are cut and joined as bytes, never encoded one by one.
    """
    out: list[tuple[int, ...]] = []
    append = out.append
    split = _PIECE_SPLIT.split
    crc32 = zlib.crc32
    for text in logical_lines(lines):
        if not text:
            append(())
            continue
        data = text.encode()
        pieces = split(data)  # empty pieces only at the ends (the pattern takes runs)
        if not pieces[-1]:
            pieces.pop()
        if pieces and not pieces[0]:
            del pieces[0]
        if len(pieces) == 1:
            append((crc32(data),))
            continue
        append(tuple(map(crc32, map(b"\x1f".join, pairwise(pieces)))))
    return out


def fingerprint_of_lines(grams: list[tuple[int, ...]], substance: int = -1) -> Fingerprint:
    """Fingerprint of a span of :func:`line_grams` (a function's lines)."""
    return Fingerprint.of(chain.from_iterable(grams), sum(1 for g in grams if g), substance)


def substantial_lines(lines: list[str]) -> int:
    """How many logical lines of a function's normalised lines are not boilerplate
    (:data:`MIN_SUBSTANCE`)."""
    return sum(
        1
        for t in logical_lines(lines)
        if t and (not _BOILERPLATE.fullmatch(t) or _named_parameters(t) >= MIN_SIGNATURE_PARAMS)
    )


def _named_parameters(line: str) -> int:
    """Named parameters besides self/cls of a normalised def line (``defN(a,b:int=1):``;
    0 for any other line or one that does not parse)."""
    head = re.match(r"(async)?defN\(", line)
    if head is None:
        return 0
    try:
        tree = ast.parse(f"{head.group(1) or ''} def N({line[head.end() :]} pass".lstrip())
    except SyntaxError:
        return 0
    fn = tree.body[0]
    assert isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
    args = fn.args
    names = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]
    return sum(1 for n in names if n not in ("self", "cls"))


def fingerprint(source: str) -> Fingerprint:
    """Fingerprint of one function's (or any snippet's) source."""
    return fingerprint_of_lines(line_grams(normalised_lines(source)))


def body_hash_of_lines(lines: list[str]) -> str:
    return hashlib.blake2b("\n".join(lines).encode(), digest_size=10).hexdigest()


def body_hash(source: str) -> str:
    """Hash of a body with comments and whitespace removed (names kept)."""
    return body_hash_of_lines(normalised_lines(source))


def similarity(a: Fingerprint, b: Fingerprint) -> float:
    """Dice coefficient of the two gram sets (1.0 = same code modulo names/format)."""
    return _dice(a.grams, b.grams)


def _dice(a: frozenset[int], b: frozenset[int]) -> float:
    if not a or not b:
        return 0.0
    return 2.0 * len(a & b) / (len(a) + len(b))


def lines_fingerprint(text: str) -> LinesFingerprint:
    """Hashes of the distinct normalised lines of a file (short/trivial lines dropped)."""
    return lines_fingerprint_of(normalised_lines(text))


def lines_fingerprint_of(lines: list[str]) -> LinesFingerprint:
    kept = [line for line in lines if len(line) >= MIN_LINE_CHARS]
    return LinesFingerprint(pack_hashes(map(zlib.crc32, map(str.encode, kept))))


def find_forked_functions(
    functions: list[DownstreamFunction],
    upstream: list[tuple[Symbol, str | Fingerprint | None, str | Fingerprint | None]],
    threshold: float = 0.6,
) -> list[Reference]:
    """Downstream functions that are near-copies of an upstream function (any name).

    ``upstream`` holds (symbol, old source, new source) -- sources may already be
    fingerprints (computed in parallel by the caller); each downstream function gets at
    most one FORK reference, to its best match, with the upstream version it matches best
    ('old' on ties: the copy predates the change).
    """
    prints: list[tuple[Symbol, str, Fingerprint]] = []
    for sym, old, new in upstream:
        for version, src in (("old", old), ("new", new)):
            if src:
                fp = fingerprint(src) if isinstance(src, str) else src
                if len(fp) >= MIN_GRAMS:
                    prints.append((sym, version, fp))
    if not prints:
        return []
    inverted: dict[int, list[int]] = defaultdict(list)
    by_symbol: dict[int, list[int]] = defaultdict(list)
    for idx, (sym, _, fp) in enumerate(prints):
        by_symbol[id(sym)].append(idx)
        for g in fp.grams:
            inverted[g].append(idx)
    # grams shared by many upstream functions (`return None`, `self.x = x`) find nothing
    inverted = {g: c for g, c in inverted.items() if len(c) <= STOP_GRAM}
    found: list[tuple[DownstreamFunction, Reference]] = []
    for fn in functions:
        ref = _best_fork(fn, prints, inverted, by_symbol, threshold)
        if ref is not None:
            found.append((fn, ref))
    return _innermost(found)


def _best_fork(
    fn: DownstreamFunction,
    prints: list[tuple[Symbol, str, Fingerprint]],
    inverted: dict[int, list[int]],
    by_symbol: dict[int, list[int]],
    threshold: float,
) -> Reference | None:
    """The FORK reference of one downstream function to its best upstream match, if any."""
    fp = fn.fingerprint
    if len(fp) < MIN_GRAMS or 0 <= fp.substance < MIN_SUBSTANCE_SAME_NAME:
        return None
    name = fn.qualname.rsplit(".", 1)[-1]
    thin = 0 <= fp.substance < MIN_SUBSTANCE  # then only a same-name match counts
    if thin and name.startswith("__"):
        return None
    grams = fp.gram_set()  # not kept on the downstream record (its gram_set says why)
    hits: Counter[int] = Counter()
    for g in grams:
        cands = inverted.get(g)
        if cands:
            hits.update(cands)
    if not hits:
        return None
    best: tuple[float, int, int] | None = None  # (sim, same-name, -idx)
    for idx, _ in hits.most_common(8):
        usym, _, ufp = prints[idx]
        sim = _dice(grams, ufp.grams)
        same = usym.qualname.rsplit(".", 1)[-1] == name
        if sim < (threshold * SAME_NAME_FACTOR if same else threshold) or (thin and not same):
            continue
        key = (round(sim, 6), int(same), -idx)
        if best is None or key > best:
            best = key
    if best is None:
        return None
    usym, version, _ = prints[-best[2]]
    # when both versions match equally, prefer 'old' (the copy predates the change)
    sims = {prints[j][1]: _dice(grams, prints[j][2].grams) for j in by_symbol[id(usym)]}
    if sims.get("old", -1) >= sims.get("new", -1):
        version = "old" if "old" in sims else version
    sim = max(sims.values())
    return Reference(
        CouplingKind.FORK,
        usym.dotted,
        fn.path,
        fn.line,
        fn.snippet,
        detail=f"function: {sim:.0%} similar to {usym.ref} ({version})",
        owner=fn.qualname,
        signature=fn.signature,
        body_hash=fn.body_hash,
        similarity=round(sim, 3),
        matched_version=version,
    )


def _innermost(found: list[tuple[DownstreamFunction, Reference]]) -> list[Reference]:
    """A def that only matches because a nested def is the copy: keep the nested one."""
    spans: dict[tuple[str, str], list[tuple[int, int]]] = defaultdict(list)
    for fn, r in found:
        spans[(fn.path, r.target)].append((fn.line, fn.end_line))
    out = []
    for fn, r in found:
        inner = [
            (a, b)
            for a, b in spans[(fn.path, r.target)]
            if fn.line <= a and b <= fn.end_line and (a, b) != (fn.line, fn.end_line)
        ]
        if not inner:
            out.append(r)
    return out


def fingerprint_pairs(
    pairs: list[tuple[str | None, str | None]],
) -> list[tuple[Fingerprint | None, Fingerprint | None]]:
    """Fingerprints of (old, new) source pairs; a top-level function for process pools."""
    return [(fingerprint(o) if o else None, fingerprint(n) if n else None) for o, n in pairs]


def find_forked_files(
    downstream: dict[str, LinesFingerprint],
    upstream: dict[str, tuple[str | None, str | None]],
    threshold: float = 0.3,
) -> list[Reference]:
    """Downstream files whose lines come largely from one upstream file.

    Similarity is the share of the downstream file's distinct non-trivial lines found in
    the upstream file; each downstream file is reported once, against its best match.
    """
    ufps: list[tuple[str, str, frozenset[int]]] = []
    for path, (old, new) in upstream.items():
        for version, text in (("old", old), ("new", new)):
            if text:
                ufps.append((path, version, lines_fingerprint(text).lines))
    inverted: dict[int, list[int]] = defaultdict(list)
    for idx, (_, _, lines) in enumerate(ufps):
        for h in lines:
            inverted[h].append(idx)
    out: list[Reference] = []
    for dpath, dfp in sorted(downstream.items()):
        if len(dfp) < MIN_FILE_LINES:
            continue
        lines = dfp.lines
        if len(lines) < MIN_FILE_LINES:
            continue
        hits: Counter[int] = Counter()
        for h in lines:
            cands = inverted.get(h)
            if cands:
                hits.update(cands)
        if not hits:
            continue
        best = max(hits.items(), key=lambda kv: (kv[1], ufps[kv[0]][1] == "old"))
        idx, n = best
        sim = n / len(lines)
        if sim < threshold:
            continue
        upath, version, _ = ufps[idx]
        out.append(
            Reference(
                CouplingKind.FORK,
                module_of(upath),
                dpath,
                1,
                f"{dpath} ({len(lines)} distinct lines)",
                detail=f"file: {sim:.0%} of its lines from {upath} ({version})",
                similarity=round(sim, 3),
                matched_version=version,
            )
        )
    return out
