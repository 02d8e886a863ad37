"""Benchmark: size and load time of `instep impact` HTML pages in headless Chromium.

Opens each page given on the command line from ``file://`` in a 1,024 and a 1,400 px
window (playwright driving Debian's ``/usr/bin/chromium``, or ``--chromium PATH``), three
times each, and prints the page's size, the median and each ``loadEventEnd`` of the
navigation, and the document's scroll width (targets, issue #19: under 3 MB, under 1 s,
no wider than the window). Make the pages first, e.g.::

    instep impact --upstream-old torch==2.13.0 --upstream-new torch==2.14.1 \\
        --downstream torch-npu==2.13.0 --format html --all --out all.html
    python benchmarks/impact_page_load.py all.html

Nothing here makes a report or asserts a figure.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

LOAD_END = "performance.getEntriesByType('navigation')[0].loadEventEnd"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("pages", nargs="+", type=Path)
    ap.add_argument("--chromium", type=Path, default=Path("/usr/bin/chromium"))
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args(argv)
    from playwright.sync_api import sync_playwright  # optional: only this benchmark needs it

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(args.chromium), args=["--no-sandbox"])
        try:
            for path in args.pages:
                parts = []
                for width in (1024, 1400):
                    times, wide = [], 0
                    for _ in range(args.runs):
                        page = browser.new_page(viewport={"width": width, "height": 900})
                        page.goto(path.resolve().as_uri())
                        page.wait_for_load_state("load")
                        times.append(page.evaluate(LOAD_END))
                        wide = page.evaluate("document.documentElement.scrollWidth")
                        page.close()
                    each = ", ".join(f"{t:.0f}" for t in times)
                    parts.append(
                        f"{width} px: {statistics.median(times):.0f} ms ({each}), {wide} px wide"
                    )
                print(f"{path}: {path.stat().st_size:,} B; " + "; ".join(parts))
        finally:
            browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
