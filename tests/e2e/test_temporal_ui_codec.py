"""An operator reads a sealed run in the real Temporal UI (issue 31 §1), end to end: the dev
server's UI is started as `cairn dev` starts it (`--ui-codec-endpoint` at the API's `/codec`), an
entry is written, its text is nowhere in the run's raw history, and an operator logged into the
console in Chromium opens the run in the UI and reads the text, decoded by the codec endpoint
with the session the UI sends along ("include cross-origin credentials"). The same page for a
human who is no operator shows no text: the endpoint refuses the UI's decode call."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import aiohttp
import pytest
from actors import PASSWORD, Actor, Actors, new_diary
from browser_support import ARTIFACTS, chromium, log_in
from faultstack import FaultStack, fault_settings, fault_stack
from playwright.async_api import Browser, Page, expect
from waiting import wait_until

from api.routes.codec import CODEC_PATH
from infra.devstack import TemporalDevServer, free_port, venv_binary, wait_for_port
from workflows.entries import entry_create_workflow_id

SCREENSHOTS = ARTIFACTS / "temporal-ui"
# the UI's own keys for its "Codec Server" settings (what its dialog stores in the browser)
UI_CODEC_SETTINGS = """([endpoint]) => {
    localStorage.setItem("endpoint", JSON.stringify(endpoint));
    localStorage.setItem("includeCredentials", "true");
    localStorage.setItem("overrideRemoteCodecConfiguration", "true");
}"""


@dataclasses.dataclass
class UiStack:
    stack: FaultStack
    temporal: TemporalDevServer
    operator_email: str

    @property
    def ui_url(self) -> str:
        assert self.temporal.ui_url is not None
        return self.temporal.ui_url


@pytest.fixture(scope="module")
async def ui_stack(database_url: str, s3: Any, tmp_path: Path) -> AsyncIterator[UiStack]:
    settings = fault_settings(database_url, "", s3)
    temporal = TemporalDevServer(
        db_file=None,
        port=free_port(),
        ui_port=free_port(),
        log_path=tmp_path / "temporal.log",
        codec_endpoint=settings.base_url + CODEC_PATH,
    )
    await asyncio.to_thread(temporal.start)
    try:
        assert temporal.ui_port is not None
        await asyncio.to_thread(wait_for_port, temporal.ui_port, timeout=60, process=None)
        operator_email = f"operator-{uuid.uuid4().hex[:8]}@example.org"
        settings = settings.model_copy(
            update={
                "temporal_address": temporal.address,
                "temporal_ui_url": temporal.ui_url,
                "operators": operator_email,
            }
        )
        async with fault_stack(settings) as stack:
            yield UiStack(stack, temporal, operator_email)
    finally:
        temporal.stop()


@pytest.fixture(scope="module")
def tmp_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("temporal-ui")


@pytest.fixture(scope="module")
async def browser() -> AsyncIterator[Browser]:
    async with chromium(SCREENSHOTS) as launched:
        yield launched


async def register(http: aiohttp.ClientSession, email: str) -> None:
    credentials = {"email": email, "password": PASSWORD}
    async with http.post("/self-service/registration", json=credentials) as response:
        assert response.status == 201, await response.text()


async def written_entry(ui: UiStack, text: str) -> str:
    """An entry written by an agent; the id of the run that created it."""
    async with aiohttp.ClientSession(base_url=ui.stack.base_url) as http:
        agent: Actor = await Actors(ui.stack, http).agent()
        diary = await new_diary(agent)
        status, entry = await agent.call(
            "POST", f"/diaries/{diary['id']}/entries", json={"content": text}
        )
        assert status == 201, entry
    return entry_create_workflow_id(uuid.UUID(entry["id"]))


async def raw_history(ui: UiStack, workflow_id: str) -> str:
    process = await asyncio.create_subprocess_exec(
        str(venv_binary("temporal")),
        *("workflow", "show", "--output", "json", "--workflow-id", workflow_id),
        *("--address", ui.temporal.address),
        stdout=asyncio.subprocess.PIPE,
    )
    out, _ = await process.communicate()
    assert process.returncode == 0
    return out.decode()


async def open_run_in_the_ui(
    browser: Browser, ui: UiStack, email: str, run: str, decodes: list[int]
) -> Page:
    """Log `email` into the console, give the UI its codec settings as the person would in its
    "Codec Server" dialog, and open the run's page; `decodes` collects the status of every
    decode call the UI makes."""
    context = await browser.new_context(base_url=ui.stack.base_url)
    decode_url = ui.stack.base_url + CODEC_PATH + "/decode"
    context.on(
        "response",
        lambda response: (
            decodes.append(response.status)
            if response.url.split("?")[0] == decode_url and response.request.method == "POST"
            else None
        ),
    )
    page = await context.new_page()
    await page.goto("/console/")
    await log_in(page, email)
    await expect(page.get_by_test_id("whoami")).to_contain_text(email)
    await page.goto(ui.ui_url + "/")
    await page.evaluate(UI_CODEC_SETTINGS, [ui.stack.base_url + CODEC_PATH])
    await page.goto(f"{ui.ui_url}/namespaces/default/workflows/{quote(run, safe='')}")
    await expect(page.get_by_text(run).first).to_be_visible(timeout=60_000)
    return page


async def test_an_operator_reads_a_sealed_run_in_the_temporal_ui(
    ui_stack: UiStack, browser: Browser
) -> None:
    text = f"the operator reads this in the UI {uuid.uuid4().hex[:12]}"
    run = await written_entry(ui_stack, text)
    assert text not in await raw_history(ui_stack, run)
    async with aiohttp.ClientSession(base_url=ui_stack.stack.base_url) as http:
        await register(http, ui_stack.operator_email)

    decodes: list[int] = []
    page = await open_run_in_the_ui(browser, ui_stack, ui_stack.operator_email, run, decodes)
    await expect(page.get_by_text(text).first).to_be_visible(timeout=60_000)
    assert decodes and set(decodes) == {200}
    await page.screenshot(path=str(SCREENSHOTS / "operator-reads-run.png"), full_page=True)
    await page.context.close()


async def test_a_human_who_is_no_operator_sees_no_text(ui_stack: UiStack, browser: Browser) -> None:
    text = f"not for this human {uuid.uuid4().hex[:12]}"
    run = await written_entry(ui_stack, text)
    email = f"someone-{uuid.uuid4().hex[:8]}@example.org"
    async with aiohttp.ClientSession(base_url=ui_stack.stack.base_url) as http:
        await register(http, email)

    decodes: list[int] = []
    page = await open_run_in_the_ui(browser, ui_stack, email, run, decodes)
    await wait_until(lambda: bool(decodes), what="the UI's decode call")
    assert set(decodes) == {403}
    assert await page.get_by_text(text).count() == 0
    await page.context.close()
