"""The console in a real browser: Debian's Chromium through Playwright, a human logged in by
their session cookie (or through the login form), and axe-core on every page.

`audit(page, name)` runs the pinned axe-core (tests/console-axe, from npm) in the page and
fails on any serious or critical violation; it also keeps a screenshot of the page as
`console/<name>.png` under `browser_support.ARTIFACTS` (the README's pictures come from
there: `make screenshots`)."""

from __future__ import annotations

import asyncio
import json
from functools import cache
from pathlib import Path
from typing import Any

from actors import Actor
from browser_support import ARTIFACTS
from playwright.async_api import Browser, BrowserContext, Page

from api.auth import SESSION_COOKIE

AXE = Path(__file__).resolve().parents[1] / "console-axe/node_modules/axe-core/axe.min.js"
SCREENSHOTS = ARTIFACTS / "console"
BLOCKING = ("serious", "critical")
VIEWPORT = {"width": 1280, "height": 860}


@cache
def _axe_source() -> str:
    return AXE.read_text(encoding="utf-8")


async def logged_in(browser: Browser, base_url: str, human: Actor) -> BrowserContext:
    """A browser context holding `human`'s session cookie, as the login form would set it."""
    context = await browser.new_context(viewport=VIEWPORT, base_url=base_url)
    await context.add_cookies(
        [
            {
                "name": SESSION_COOKIE,
                "value": human.auth["X-Session-Token"],
                "url": base_url,
                "httpOnly": True,
                "sameSite": "Lax",
            }
        ]
    )
    return context


async def violations(page: Page) -> list[dict[str, Any]]:
    """axe-core's serious and critical violations on the page as it is now."""
    if not await page.evaluate("typeof window.axe !== 'undefined'"):
        await page.evaluate(_axe_source())  # through the debugger: the page's CSP stays strict
    found: list[dict[str, Any]] = await page.evaluate(
        "async () => (await axe.run(document, {resultTypes: ['violations']})).violations"
    )
    return [v for v in found if v.get("impact") in BLOCKING]


async def audit(page: Page, name: str) -> None:
    """No serious or critical accessibility violation on the page; its screenshot is kept."""
    await page.wait_for_load_state("load")
    blocking = await violations(page)
    summary = [
        {"id": v["id"], "impact": v["impact"], "nodes": [n["target"] for n in v["nodes"][:5]]}
        for v in blocking
    ]
    assert not blocking, f"axe on {name} ({page.url}): {json.dumps(summary, indent=1)}"
    await asyncio.to_thread(SCREENSHOTS.mkdir, parents=True, exist_ok=True)
    await page.screenshot(path=SCREENSHOTS / f"{name}.png", full_page=True)
