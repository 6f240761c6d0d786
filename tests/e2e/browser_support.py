"""A real browser for the e2e tests: Debian's headless Chromium driven with Playwright, and
the console's login form as a person fills it in."""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

from actors import PASSWORD
from playwright.async_api import Browser, Page, async_playwright, expect

# what a person sees may take a while on a busy 2-core machine: wait up to 20 s for it
expect.set_options(timeout=20_000)
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# Screenshots go outside the repository's tree (tests never write there: tests/tree_guard.py):
# to `CAIRN_TEST_ARTIFACTS` when set (CI keeps them), else to the machine's temp dir.
ARTIFACTS = Path(
    os.environ.get("CAIRN_TEST_ARTIFACTS") or Path(tempfile.gettempdir()) / "cairn-test-artifacts"
)


@contextlib.asynccontextmanager
async def chromium(artifacts: Path) -> AsyncIterator[Browser]:
    """Chromium with a fresh temporary profile (launch() makes one per run); screenshots of the
    tests that use it go to `artifacts` (under `ARTIFACTS`)."""
    await asyncio.to_thread(artifacts.mkdir, parents=True, exist_ok=True)
    print(f"\nscreenshots: {artifacts}")
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            await browser.close()


async def log_in(page: Page, email: str, password: str = PASSWORD) -> None:
    """Type the credentials into the console's login form and submit it."""
    await expect(page.locator("#login")).to_be_visible()
    await page.fill("#email", email)
    await page.fill("#password", password)
    await page.click("#login button")
