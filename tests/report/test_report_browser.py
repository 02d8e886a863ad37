"""The dashboard in a real headless Chromium (Debian's ``chromium`` driven by playwright).

Loads the report of a real run from ``file://``: no console error, the filters and the
search box change which rows are visible, a per-case page opens from the table, and the
``<script>`` payload of a test's message shows as text (no dialog ever opens). The
acceptance test runs a file of ten failures in ten batches across layers and checks, at
1,024 and 1,400 px, that the first screen shows every failing batch, that no page is wider
than the window and that no request leaves ``file://``. Screenshots go to
``<repo>/.ci/out/screenshots/`` (CI keeps ``.ci/out``). Skipped when Chromium or
playwright is missing, unless ``INSTEP_REQUIRE_BROWSER=1`` (CI) makes that a failure.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests.report.conftest import NO_TORCH, SCRIPT

from instep.cli import run as cli_run

CHROMIUM = Path("/usr/bin/chromium")
REPO = Path(__file__).resolve().parents[2]
SCREENSHOTS = REPO / ".ci" / "out" / "screenshots"
#: Ten failures with ten signatures across layers (messages the cpu profile's rules file
#: under lowering, kernel_compile, numerics, dynamo...), one wrapped as torch wraps them.
TEN_FAILURES = """
import pytest

MESSAGES = [
    "MissingOperatorWithoutDecomp: aten.foo_" + "x" * 150,
    "CppCompileError: C++ compile error in the kernel",
    "Tensor-likes are not close! Mismatched elements: 1 / 4",
    "backend='inductor' raised:\\nLoweringException: AssertionError: expected a view",
    "Unsupported: graph break in user code at a data-dependent branch",
    "NotImplementedError: could not find kernel for aten.bar at dispatch key PrivateUse1",
    "RuntimeError: shape mismatch in the scheduler's fusion of buf0 and buf1",
    "ImportError: cannot import name 'gone' from 'torch._inductor.utils'",
    "RuntimeError: ACL error 507035 during the kernel's launch",
    "ValueError: a downstream helper refused an argument of type " + "Tensor" * 30,
]


@pytest.mark.parametrize("i", range(len(MESSAGES)))
def test_breaks(i):
    raise RuntimeError(MESSAGES[i])


def test_passes():
    pass
"""


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
        browser = _open_browser(p)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.on("console", on_console)
            page.on("pageerror", lambda exc: errors.append(f"pageerror: {exc}"))

            def on_dialog(dialog) -> None:  # type: ignore[no-untyped-def]
                dialogs.append(dialog.message)
                dialog.dismiss()

            page.on("dialog", on_dialog)
            page.goto((out / "index.html").as_uri())
            assert page.locator("figure.chart svg").count() == 2  # two runs: two trends
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

            numerics = page.locator("#failing-now-table tr", has_text="Tensor-likes").locator(
                "a[data-filter-batch]"
            )
            batch = numerics.get_attribute("data-filter-batch")
            numerics.click()
            assert page.locator("#f-batch").input_value() == batch
            assert visible.count() == 3

            page.click("#f-reset")
            page.locator('#layer-table a[data-filter-layer="untriaged"]').first.click()
            assert visible.count() == 1

            page.click("#f-reset")
            message_cell = page.locator("#case-table tr.case-row", has_text="test_script_message")
            assert SCRIPT in message_cell.locator("td.msg").inner_text()
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(SCREENSHOTS / "dashboard-two-runs.png"), full_page=True)

            message_cell.locator("a").first.click()
            page.wait_for_url("**/cases/*.html")
            assert page.locator("h1").inner_text() == "test_demo.py::test_script_message"
            assert SCRIPT in page.locator("#message").inner_text()
            assert "<img src=x onerror=alert(2)>" in page.locator("#stdout").inner_text()
            assert page.locator("#exception-chain").is_visible()
            page.screenshot(path=str(SCREENSHOTS / "case-script-message.png"), full_page=True)
            page.go_back()
            page.wait_for_selector("#case-table")
        finally:
            browser.close()
    assert errors == []
    assert dialogs == []  # the payload never ran
    assert (SCREENSHOTS / "dashboard-two-runs.png").stat().st_size > 10_000


def _open_browser(p):  # type: ignore[no-untyped-def]
    # --no-sandbox: CI and the dev machines run as root, where Chromium's sandbox refuses
    return p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])


FITS = "document.documentElement.scrollWidth <= window.innerWidth"
FAILING_ROWS_ON_FIRST_SCREEN = """() => {
  const rows = [...document.querySelectorAll('#failing-now-table tbody tr:not(.gone)')];
  return rows.map(r => [r.dataset.batch, r.getBoundingClientRect().bottom <= innerHeight]);
}"""


def test_first_screen_shows_every_failing_batch(tmp_path):
    _browser_or_skip()
    from playwright.sync_api import sync_playwright

    (tmp_path / "test_ten.py").write_text(TEN_FAILURES)
    db = tmp_path / "ten.db"
    argv = ["run", "test_ten.py", *NO_TORCH, "--run", "ten", "--db", str(db)]
    proc = subprocess.run(
        [sys.executable, "-m", "instep", *argv],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_COLOR": "1"},
        timeout=300,
    )
    assert proc.returncode == 1, proc.stderr  # the ten failures
    out = tmp_path / "report"
    assert cli_run(["report", "ten", "--db", str(db), "--out", str(out)]) == 0
    pages = [out / "index.html", *sorted((out / "cases").glob("*.html"))]
    assert len(pages) == 11
    external: list[str] = []

    def route(route) -> None:  # type: ignore[no-untyped-def]
        if route.request.url.startswith("file://"):
            route.continue_()
        else:
            external.append(route.request.url)
            route.abort()

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = _open_browser(p)
        try:
            for width, height in ((1024, 768), (1400, 900)):
                page = browser.new_page(viewport={"width": width, "height": height})
                page.route("**/*", route)
                page.goto(pages[0].as_uri())
                shown = page.evaluate(FAILING_ROWS_ON_FIRST_SCREEN)
                assert len(shown) == 10  # ten batches, all failing, none fixed
                assert [b for b, visible in shown if not visible] == [], (width, shown)
                text = page.locator("#failing-now-table").inner_text()
                assert "LoweringException: AssertionError: expected a view" in text
                assert "backend='inductor' raised" not in text  # the wrapper line is skipped
                page.screenshot(path=str(SCREENSHOTS / f"dashboard-{width}.png"))
                for path in pages:
                    page.goto(path.as_uri())
                    assert page.evaluate(FITS), (width, path.name)
                page.screenshot(path=str(SCREENSHOTS / f"case-{width}.png"), full_page=True)
                page.close()
        finally:
            browser.close()
    assert external == []
    assert (SCREENSHOTS / "dashboard-1024.png").stat().st_size > 10_000


def test_missing_browser_skips_unless_ci_requires_it(monkeypatch, tmp_path):
    import tests.report.test_report_browser as module

    monkeypatch.setattr(module, "CHROMIUM", tmp_path / "no-chromium")
    monkeypatch.delenv("INSTEP_REQUIRE_BROWSER", raising=False)
    with pytest.raises(pytest.skip.Exception, match="no-chromium"):
        module._browser_or_skip()
    monkeypatch.setenv("INSTEP_REQUIRE_BROWSER", "1")
    with pytest.raises(pytest.fail.Exception, match="INSTEP_REQUIRE_BROWSER=1"):
        module._browser_or_skip()
