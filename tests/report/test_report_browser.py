"""The dashboard in a real headless Chromium (Debian's ``chromium`` driven by playwright).

Loads the report of a real run from ``file://``: no console error, the filters and the
search box change which rows are visible, a per-case page opens from the table, and the
``<script>`` payload of a test's message shows as text (no dialog ever opens). Leaves a
screenshot in ``<repo>/.ci/out/report-dashboard.png``. Skipped when Chromium or playwright
is missing, unless ``INSTEP_REQUIRE_BROWSER=1`` (CI) makes that a failure.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest
from tests.report.conftest import SCRIPT

from instep.cli import run as cli_run

CHROMIUM = Path("/usr/bin/chromium")
REPO = Path(__file__).resolve().parents[2]
SCREENSHOTS = REPO / ".ci" / "out"


def _browser_or_skip() -> None:
    missing = [
        what
        for what, there in (
            (str(CHROMIUM), CHROMIUM.exists()),
            ("the playwright package", importlib.util.find_spec("playwright") is not None),
        )
        if not there
    ]
    if not missing:
        return
    reason = f"real-browser test needs {' and '.join(missing)}"
    if os.environ.get("INSTEP_REQUIRE_BROWSER") == "1":
        pytest.fail(f"{reason} (INSTEP_REQUIRE_BROWSER=1)")
    pytest.skip(reason)


def test_dashboard_in_headless_chromium(report_store, tmp_path):
    _browser_or_skip()
    from playwright.sync_api import sync_playwright

    out = tmp_path / "report"
    assert cli_run(["report", "week2", "--db", str(report_store.db), "--out", str(out)]) == 0
    errors: list[str] = []
    dialogs: list[str] = []

    def on_console(message) -> None:  # type: ignore[no-untyped-def]
        if message.type == "error":
            errors.append(f"console: {message.text}")

    with sync_playwright() as p:
        # --no-sandbox: CI and the dev machines run as root, where Chromium's sandbox refuses
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.on("console", on_console)
            page.on("pageerror", lambda exc: errors.append(f"pageerror: {exc}"))

            def on_dialog(dialog) -> None:  # type: ignore[no-untyped-def]
                dialogs.append(dialog.message)
                dialog.dismiss()

            page.on("dialog", on_dialog)
            page.goto((out / "index.html").as_uri())
            page.wait_for_function("document.querySelectorAll('.chart .main-svg').length >= 4")
            rows = page.locator("#case-table tbody tr.case-row")
            total = rows.count()
            assert total == 11
            visible = page.locator("#case-table tbody tr.case-row:visible")
            assert visible.count() == total

            page.select_option("#f-status", "crashed")
            assert visible.count() == 1
            assert "test_crash" in visible.first.inner_text()
            assert page.locator("#shown-count").inner_text() == f"1 of {total} cases"

            page.click("#f-reset")
            page.fill("#f-search", "tensor-likes")
            assert visible.count() == 3
            page.fill("#f-search", "")
            assert visible.count() == total

            numerics = page.locator("#batch-table a[data-filter-batch]").first
            batch = numerics.get_attribute("data-filter-batch")
            numerics.click()
            assert page.locator("#f-batch").input_value() == batch
            assert visible.count() == 3

            page.click("#f-reset")
            page.locator('#layer-matrix a[data-filter-layer="untriaged"]').first.click()
            assert visible.count() == 1

            page.click("#f-reset")
            message_cell = page.locator("#case-table tr.case-row", has_text="test_script_message")
            assert SCRIPT in message_cell.locator("td.msg").inner_text()
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(SCREENSHOTS / "report-dashboard.png"), full_page=True)

            message_cell.locator("a").first.click()
            page.wait_for_url("**/cases/*.html")
            assert page.locator("h1").inner_text() == "test_demo.py::test_script_message"
            assert SCRIPT in page.locator("#message").inner_text()
            assert "<img src=x onerror=alert(2)>" in page.locator("#stdout").inner_text()
            assert page.locator("#exception-chain").is_visible()
            page.screenshot(path=str(SCREENSHOTS / "report-case.png"), full_page=True)
            page.go_back()
            page.wait_for_selector("#case-table")
        finally:
            browser.close()
    assert errors == []
    assert dialogs == []  # the payload never ran
    assert (SCREENSHOTS / "report-dashboard.png").stat().st_size > 10_000


def test_missing_browser_skips_unless_ci_requires_it(monkeypatch, tmp_path):
    import tests.report.test_report_browser as module

    monkeypatch.setattr(module, "CHROMIUM", tmp_path / "no-chromium")
    monkeypatch.delenv("INSTEP_REQUIRE_BROWSER", raising=False)
    with pytest.raises(pytest.skip.Exception, match="no-chromium"):
        module._browser_or_skip()
    monkeypatch.setenv("INSTEP_REQUIRE_BROWSER", "1")
    with pytest.raises(pytest.fail.Exception, match="INSTEP_REQUIRE_BROWSER=1"):
        module._browser_or_skip()
