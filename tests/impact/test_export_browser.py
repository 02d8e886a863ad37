"""The impact HTML page in a real headless Chromium (Debian's ``chromium``, playwright).

The page of a real analysis (the end-to-end git fixture, release mode between two tags)
is opened from ``file://``: no console error; the action, coupling-kind and search
filters change which units show; a unit's row opens its couplings; the hotspots table
lists downstream symbols; and a downstream snippet holding ``<script>`` shows as text
(no dialog opens). Skipped without Chromium or playwright unless
``INSTEP_REQUIRE_BROWSER=1`` (CI) makes that a failure.
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
        config.read_text().replace(line, line + "  # </script><script>alert(1)</script>")
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
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
            page.goto(page_path.as_uri())
            units = page.locator("#rows tr.unit")
            total = units.count()
            assert total >= 4
            counts = page.locator("#counts")
            assert counts.inner_text() == f"{total} / {total} units"

            # action filter: only Shim units left
            for action in ("Check", "Test"):
                box = page.locator(f"#f-action input[value='{action}']")
                if box.count():
                    box.uncheck()
            shim = units.count()
            assert 0 < shim < total
            assert all(units.nth(i).get_attribute("data-action") == "Shim" for i in range(shim))
            for action in ("Check", "Test"):
                box = page.locator(f"#f-action input[value='{action}']")
                if box.count():
                    box.check()
            assert units.count() == total

            # coupling-kind filter: units without couplings go with "(none)"
            page.locator("#f-kind input[value='(none)']").uncheck()
            coupled = units.count()
            assert 0 < coupled < total
            page.locator("#f-kind input[value='(none)']").check()

            # search, then the row opens its couplings
            page.fill("#q", "expand")
            assert 0 < units.count() < total
            row = page.locator("#rows tr.unit[data-id='torch/_inductor/lowering.py']")
            row.click()
            detail = page.locator("#rows tr.detail:visible")
            assert "torch_npu/_inductor/lowering_fx.py" in detail.inner_text()
            page.fill("#q", "")

            # hotspots: downstream symbols, never an import line
            page.locator("#hotspots summary").click()
            spots = page.locator("#hotspot-rows tr")
            assert spots.count() >= 2  # a header and at least one symbol
            text = page.locator("#hotspot-rows").inner_text()
            assert "::" in text and "<module>" not in text

            # the snippet is text: the script tag shows, no dialog ever opened
            page.fill("#q", "alert(1)")
            page.locator("#rows tr.unit").first.click()
            assert "<script>alert(1)</script>" in page.locator("#rows").inner_text()
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            page.fill("#q", "")
            page.screenshot(path=str(SCREENSHOTS / "impact-page.png"), full_page=False)
        finally:
            browser.close()
    assert errors == []
    assert dialogs == []
