"""Copies of wheels holding only what ``instep impact`` reads, for a machine with little room.

    python benchmarks/slim_wheels.py --out .bench ~/.cache/instep/wheels/torch-2.13.0-*/*.whl \
        ~/.cache/instep/wheels/torch-2.14.1-*/*.whl ~/.cache/instep/wheels/torch-npu-2.13.0-*/*.whl

A release analysis reads a wheel's ``.py`` sources, the extension stubs (``.pyi``), torchgen's
``native_functions.yaml`` and the ``.dist-info`` (version, RECORD digests). Everything else
(shared libraries, headers, CMake files) is left out, which takes torch 2.14.1 from about
900 MB to 13 MB, so three wheels fit in what the device machine carries (64 MiB). The copy
keeps the file name, so the version read from it is the same; the script then checks that
every ``.py`` member reads back byte for byte.
"""

from __future__ import annotations

import argparse
import sys
import zipfile
from pathlib import Path

KEPT_SUFFIXES = (".py", ".pyi", ".yaml")


def kept(name: str) -> bool:
    """Whether a wheel member is one the analysis reads."""
    top = name.split("/", 1)[0]
    return top.endswith(".dist-info") or name.endswith(KEPT_SUFFIXES)


def slim(wheel: Path, out_dir: Path) -> Path:
    """Write ``out_dir/<wheel's name>`` with only the kept members; return its path."""
    out = out_dir / wheel.name
    if out.resolve() == wheel.resolve():
        raise SystemExit(f"{wheel}: --out must not be the wheel's own folder")
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            if not info.is_dir() and kept(info.filename):
                dst.writestr(info.filename, src.read(info))
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(out) as dst:
        names = [n for n in src.namelist() if n.endswith(".py")]
        if sorted(names) != sorted(n for n in dst.namelist() if n.endswith(".py")):
            raise SystemExit(f"{out}: the .py members differ from {wheel}'s")
        for n in names:
            if src.read(n) != dst.read(n):
                raise SystemExit(f"{out}: {n} differs from {wheel}'s")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("wheels", nargs="+", type=Path, help="wheel files (.whl)")
    ap.add_argument("--out", type=Path, required=True, help="folder for the copies")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for wheel in args.wheels:
        if wheel.suffix != ".whl" or not zipfile.is_zipfile(wheel):
            print(f"{wheel}: expected a wheel file (.whl)", file=sys.stderr)
            return 2
        out = slim(wheel, args.out)
        mib = out.stat().st_size / 2**20, wheel.stat().st_size / 2**20
        print(f"{out}: {mib[0]:.1f} MiB (from {mib[1]:.0f} MiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
