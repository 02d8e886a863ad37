"""Are two `instep impact --format json` reports the same, apart from when and how fast?

    python validation/impact_same.py BASE.json HEAD.json [--ignore KEY ...] [--show N]

A refactoring of the impact engine must not change what it reports. This script reads two
reports and compares them with ``generated_at`` and ``stats.timings_s`` left out (they
change on every run), plus any ``--ignore`` key (dotted, ``stats.report_memo``), in two
ways:

* **bytes**: the two files' texts with those keys taken out of the document and the rest
  written back in its own order, compared as text: what a reader of the file sees;
* **content**: the two documents compared as data (dictionaries without their key order,
  lists in order).

Exit status 0 when both are the same, 1 when they differ (the first ``--show`` differences
are printed as ``path: base -> head``, paths like ``units[12].couplings[0].rule``), 2 when a
file is missing or not JSON. When only the bytes differ (the content is the same), the
keys whose order differs are named: ``stats`` is filled by two threads at once, so its
key order can change from one run of the same code to the next (the upstream symbol diff
and the downstream index each add their counts when they end); ``--key-order-free stats``
accepts that for the keys named. Nothing is imported from instep: the script reads the
files only, so it compares reports of any two versions.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ALWAYS_IGNORED = ("generated_at", "stats.timings_s")


def _load(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        sys.exit(f"impact_same: cannot read {path} as an impact JSON report ({e})")


def _drop(doc: Any, dotted: str) -> None:
    """Remove ``dotted`` (``a.b.c``) from the document, if it is there."""
    *parents, last = dotted.split(".")
    here = doc
    for key in parents:
        if not isinstance(here, dict) or key not in here:
            return
        here = here[key]
    if isinstance(here, dict):
        here.pop(last, None)


def differences(base: Any, head: Any, path: str = "") -> list[str]:
    """Where two JSON values differ, as ``path: base -> head`` (dict key order ignored)."""
    if isinstance(base, dict) and isinstance(head, dict):
        out = []
        for key in list(base) + [k for k in head if k not in base]:
            where = f"{path}.{key}" if path else key
            if key not in head:
                out.append(f"{where}: {_short(base[key])} -> (absent)")
            elif key not in base:
                out.append(f"{where}: (absent) -> {_short(head[key])}")
            else:
                out += differences(base[key], head[key], where)
        return out
    if isinstance(base, list) and isinstance(head, list):
        out = []
        for k, (a, b) in enumerate(zip(base, head, strict=False)):
            out += differences(a, b, f"{path}[{k}]")
        if len(base) != len(head):
            out.append(f"{path}: {len(base)} items -> {len(head)} items")
        return out
    if base != head or type(base) is not type(head):
        return [f"{path}: {_short(base)} -> {_short(head)}"]
    return []


def key_order_differences(base: Any, head: Any, path: str = "") -> list[str]:
    """Paths of the dicts whose keys are the same but in another order."""
    out = []
    if isinstance(base, dict) and isinstance(head, dict):
        if list(base) != list(head) and set(base) == set(head):
            out.append(path or "(top level)")
        for key in base:
            if key in head:
                out += key_order_differences(base[key], head[key], f"{path}.{key}" if path else key)
    elif isinstance(base, list) and isinstance(head, list):
        for k, (a, b) in enumerate(zip(base, head, strict=False)):
            out += key_order_differences(a, b, f"{path}[{k}]")
    return out


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 120 else text[:117] + "..."


def _sorted_keys(doc: Any, paths: set[str], path: str = "") -> Any:
    """``doc`` with the keys of the dicts at ``paths`` sorted."""
    if isinstance(doc, dict):
        items = sorted(doc.items()) if path in paths else doc.items()
        return {k: _sorted_keys(v, paths, f"{path}.{k}" if path else k) for k, v in items}
    if isinstance(doc, list):
        return [_sorted_keys(v, paths, f"{path}[{k}]") for k, v in enumerate(doc)]
    return doc


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("base", type=Path)
    ap.add_argument("head", type=Path)
    ap.add_argument("--ignore", action="append", default=[], help="another dotted key to leave out")
    ap.add_argument(
        "--key-order-free",
        action="append",
        default=[],
        help="a dotted key whose dict may list its keys in another order (e.g. stats)",
    )
    ap.add_argument("--show", type=int, default=20, help="differences printed (default 20)")
    args = ap.parse_args(argv)
    docs = [_load(p) for p in (args.base, args.head)]
    for doc in docs:
        for key in (*ALWAYS_IGNORED, *args.ignore):
            _drop(doc, key)
    base, head = (_sorted_keys(d, set(args.key_order_free)) for d in docs)
    found = differences(base, head)
    if found:
        print(f"DIFFERENT: {len(found)} difference(s) between {args.base} and {args.head}")
        for line in found[: args.show]:
            print("  " + line)
        return 1
    texts = [json.dumps(d, ensure_ascii=False, indent=1) for d in (base, head)]
    if texts[0] != texts[1]:
        order = key_order_differences(base, head)
        print(f"SAME CONTENT, other key order in: {', '.join(order)}")
        return 1
    units = len(base.get("units", [])) if isinstance(base, dict) else 0
    print(f"IDENTICAL ({units} units; {', '.join((*ALWAYS_IGNORED, *args.ignore))} left out)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
