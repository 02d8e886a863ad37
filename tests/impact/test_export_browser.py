"""The impact HTML page in a real headless Chromium (Debian's ``chromium``, playwright).

The page of a real analysis (the end-to-end git fixture, release mode between two tags)
is opened from ``file://`` in a 1,024 and a 1,400 px window: nothing wider than the window
(a coupled line with an unbroken 400-character token included), Shim first, no console
error and no request leaving the page; the action, coupling-kind and search filters change
which units show and live in the URL's hash (a page opened with a hash starts filtered);
a column header sorts, and the sort order is in the hash too; the table draws one page
of rows, its page and page size in the hash; a unit's row opens its couplings; a
downstream snippet holding ``<script>`` shows as text (no dialog opens).
Skipped without Chromium or playwright unless ``INSTEP_REQUIRE_BROWSER=1`` (CI) makes that
a failure.
"""

from __future__ import annotations

from pathlib import Path

from tests.report.test_report_browser import CHROMIUM, SCREENSHOTS, _browser_or_skip

from instep.cli import run as cli_run

from .e2e_fixture import build_downstream, build_upstream


def test_impact_page_in_headless_chromium(tmp_path):
    _browser_or_skip()
    from playwright.sync_api import sync_playwright

    up = build_upstream(tmp_path / "pytorch")
    down = build_downstream(tmp_path / "torch_npu")
    # a coupled downstream line (a config write) that would run as markup
    config = Path(down) / "torch_npu" / "_inductor" / "config_patch.py"
    line = "config.fallback_random = True"
    config.write_text(
        config.read_text().replace(
            line, line + "  # </script><script>alert(1)</script> " + "n" * 400
        )
    )
    page_path = tmp_path / "impact.html"
    code = cli_run(
        [
            "impact",
            "--upstream-old",
            f"{up.path}@v1",
            "--upstream-new",
            f"{up.path}@v2",
            "--downstream",
            str(down),
            "--format",
            "html",
            "--out",
            str(page_path),
            "--no-cache",
        ]
    )
    assert code == 0
    errors: list[str] = []
    dialogs: list[str] = []
    outside: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        try:
            for width in (1024, 1400):
                page = browser.new_page(viewport={"width": width, "height": 900})
                page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
                page.on("pageerror", lambda exc: errors.append(str(exc)))
                page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
                page.route(
                    "**/*",
                    lambda route: (
                        route.continue_()
                        if route.request.url.startswith(("file:", "data:"))
                        else (outside.append(route.request.url), route.abort())
                    ),
                )
                page.goto(page_path.as_uri())
                units = page.locator("#rows tr.unit")
                assert units.first.get_attribute("data-action") == "Shim"
                # the widest row opened: the one holding the 400-character token
                page.fill("#q", "alert(1)")
                page.locator("#rows tr.unit").first.click()
                shown = page.locator("#rows").inner_text()
                assert "<script>alert(1)</script>" in shown  # text, never markup
                assert "n" * 40 in shown  # unbroken (the index keeps a snippet short)
                assert page.evaluate("document.documentElement.scrollWidth") <= width
                page.fill("#q", "")
                assert page.evaluate("document.documentElement.scrollWidth") <= width
                if width == 1400:
                    _filters_and_sorting(page, page_path)
                page.close()
        finally:
            browser.close()
    assert errors == []
    assert dialogs == []
    assert outside == []


def _filters_and_sorting(page, page_path: Path) -> None:
    units = page.locator("#rows tr.unit")
    total = units.count()
    assert total >= 4
    assert page.locator("#counts").inner_text().startswith(f"{total} / {total} ")

    # action filter: only Shim units left, and the hash says so
    for action in ("Check", "Test"):
        box = page.locator(f"#f-action input[value='{action}']")
        if box.count():
            box.uncheck()
    shim = units.count()
    assert 0 < shim < total
    assert all(units.nth(i).get_attribute("data-action") == "Shim" for i in range(shim))
    assert page.evaluate("location.hash") == "#action=Shim"
    for action in ("Check", "Test"):
        box = page.locator(f"#f-action input[value='{action}']")
        if box.count():
            box.check()
    assert units.count() == total and page.evaluate("location.hash") == ""

    # coupling-kind filter and search, each in the hash
    kinds = page.locator("#f-kind input")
    others = [kinds.nth(i) for i in range(kinds.count())]
    others = [box for box in others if box.get_attribute("value") != "registration"]
    for box in others:
        box.uncheck()
    assert page.evaluate("location.hash") == "#kind=registration"
    assert 0 < units.count() < total
    for box in others:
        box.check()
    assert units.count() == total
    page.fill("#q", "expand")
    assert 0 < units.count() < total and "q=expand" in page.evaluate("location.hash")
    row = page.locator("#rows tr.unit[data-id='torch/_inductor/lowering.py']")
    row.click()
    assert "torch_npu/_inductor/lowering_fx.py" in page.locator("#rows tr.detail").inner_text()
    page.fill("#q", "")

    # sorting: risk descending, then ascending; the order is in the hash
    rank = {"low": 0, "medium": 1, "high": 2}
    risk = page.locator("#units th[data-key='risk']")
    risk.click()
    assert risk.get_attribute("aria-sort") == "descending"
    seen = [rank[units.nth(i).get_attribute("data-risk")] for i in range(units.count())]
    assert seen == sorted(seen, reverse=True) and len(set(seen)) > 1
    risk.click()
    seen = [rank[units.nth(i).get_attribute("data-risk")] for i in range(units.count())]
    assert seen == sorted(seen)
    assert "sort=risk&dir=asc" in page.evaluate("location.hash")
    page.locator("#units th[data-key='id']").click()
    ids = [units.nth(i).get_attribute("data-id") for i in range(units.count())]
    assert ids == sorted(ids, key=str.lower) or ids == sorted(ids)

    # a link with filters and a sort order opens the page in that state
    page.goto(page_path.as_uri() + "#action=Test&sort=id&dir=desc")
    tests = [units.nth(i).get_attribute("data-id") for i in range(units.count())]
    assert tests and all(
        units.nth(i).get_attribute("data-action") == "Test" for i in range(len(tests))
    )
    assert not page.locator("#f-action input[value='Shim']").is_checked()
    assert page.locator("#units th[data-key='id']").get_attribute("aria-sort") == "descending"
    _paging(page, page_path, len(ids))
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "impact-page.png"), full_page=False)


def _paging(page, page_path: Path, total: int) -> None:
    """The table draws one page of rows; page and page size live in the hash."""
    units = page.locator("#rows tr.unit")
    page.goto(page_path.as_uri() + "#sort=id&dir=asc&per=2")
    first = [units.nth(i).get_attribute("data-id") for i in range(units.count())]
    assert len(first) == 2 and page.locator("#page").inner_text() == f"1–2 / {total}"
    assert page.locator("#prev").is_disabled() and not page.locator("#next").is_disabled()
    page.locator("#next").click()
    second = [units.nth(i).get_attribute("data-id") for i in range(units.count())]
    assert len(second) == 2 and not set(first) & set(second)
    assert "page=2" in page.evaluate("location.hash")
    # a filter starts again at page 1
    page.fill("#q", "expand")
    assert "page=" not in page.evaluate("location.hash")
    assert page.locator("#page").inner_text().startswith("1–")
