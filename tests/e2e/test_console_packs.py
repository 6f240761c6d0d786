"""The console's packs in a real browser (issue 24, "Packs"): a diary's packs paged; a pack
page with its entries (by title, linked), compression and tokens, CID, pin and expiry; render
it and read the Markdown; pin and unpin; provenance and a diff against another pack. Both ways
where a permission decides: a team manager may write the diary, a member may only read it and
sees the API's refusal beside the form; a stranger gets the page's 404. axe-core on every page.

Packs are made by an agent of the team through the REST API, as agents make them."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
from actors import Actor, join_team
from browser_support import chromium
from console_support import SCREENSHOTS, audit, logged_in
from playwright.async_api import Browser, Page, expect

from api.console.packs import PAGE

LONG = (
    "Blue-green deploys halve our rollback time. We keep two fleets warm at all times. "
    "Traffic moves with one switch at the balancer. The old fleet stays for an hour. "
    "Rollbacks are a second switch, nothing more. Database migrations go out first, "
    "always backwards compatible. Feature flags gate the risky paths. "
)


@dataclass
class World:
    owner: Actor  # an agent owning the team: it writes the entries and makes the packs
    manager: Actor  # a human who may write the diary
    member: Actor  # a human who may only read it
    diary: dict[str, Any]
    notes: list[dict[str, Any]]


@pytest.fixture(scope="module")
async def browser() -> AsyncIterator[Browser]:
    async with chromium(SCREENSHOTS) as launched:
        yield launched


@pytest.fixture(scope="module")
async def world(actors: Any) -> World:
    owner: Actor = await actors.agent()
    manager: Actor = await actors.human("Grace Hopper")
    member: Actor = await actors.human()
    status, team = await owner.call(
        "POST", "/teams", json={"name": f"Packs {uuid.uuid4().hex[:4]}"}
    )
    assert status == 201, team
    await join_team(owner, team["id"], manager, "manager")
    await join_team(owner, team["id"], member, "member")
    diary = await new_diary(owner, team["id"], "Operations")
    notes = [
        await new_entry(owner, diary["id"], LONG, title="Deploys"),
        await new_entry(owner, diary["id"], "Short note on caching layers and TTLs."),
        await new_entry(owner, diary["id"], LONG + " Also canaries.", title="Canaries"),
    ]
    return World(owner, manager, member, diary, notes)


async def new_diary(owner: Actor, team_id: str, name: str) -> dict[str, Any]:
    body = {"name": f"{name} {uuid.uuid4().hex[:4]}", "visibility": "private"}
    status, diary = await owner.call("POST", "/diaries", json=body, team=team_id)
    assert status == 201, diary
    return dict(diary)


async def new_entry(actor: Actor, diary_id: str, content: str, **body: Any) -> dict[str, Any]:
    path = f"/diaries/{diary_id}/entries"
    status, entry = await actor.call("POST", path, json={"content": content, **body})
    assert status == 201, entry
    return dict(entry)


async def new_pack(
    owner: Actor, diary_id: str, entries: list[dict[str, Any]], **body: Any
) -> dict[str, Any]:
    selection = [{"entryId": e["id"], "rank": i + 1} for i, e in enumerate(entries)]
    path = f"/diaries/{diary_id}/packs"
    status, pack = await owner.call("POST", path, json={"entries": selection, **body})
    assert status == 201, pack
    return dict(pack)


async def rest(actor: Actor, method: str, path: str, **kwargs: Any) -> Any:
    status, body = await actor.call(method, path, **kwargs)
    assert status == 200, body
    return body


async def open_page(browser: Browser, base_url: str, human: Actor, path: str) -> Page:
    context = await logged_in(browser, base_url, human)
    page = await context.new_page()
    await page.goto(path)
    return page


# --- 1. a diary's packs ------------------------------------------------------------------------


async def test_a_diarys_packs_are_listed_newest_first_a_page_at_a_time(
    stack: Any, world: World, browser: Browser
) -> None:
    diary = await new_diary(world.owner, world.diary["teamId"], "Paged")
    entry = await new_entry(world.owner, diary["id"], "One note, packed many ways.", title="Note")
    await asyncio.gather(
        *(new_pack(world.owner, diary["id"], [entry], params={"n": n}) for n in range(PAGE + 1))
    )
    listed = await rest(world.owner, "GET", f"/diaries/{diary['id']}/packs")
    newest = listed["items"][0]
    await rest(world.owner, "PATCH", f"/packs/{newest['id']}", json={"pinned": True})

    page = await open_page(
        browser, stack.base_url, world.member, f"/console/diaries/{diary['id']}/packs"
    )
    await expect(page.get_by_role("heading", level=1)).to_contain_text(diary["name"])
    rows = page.get_by_test_id("pack-row")
    await expect(rows).to_have_count(PAGE)
    first = rows.first
    assert await first.get_attribute("data-pack") == newest["id"]
    await expect(first.locator("code")).to_have_attribute("title", newest["packCid"])
    await expect(first.locator("code")).to_contain_text(newest["packCid"][-8:])
    await expect(first).to_contain_text("pinned")
    await expect(first).to_contain_text("never")
    second = listed["items"][1]
    row = rows.nth(1)
    await expect(row.locator("td").nth(2)).to_have_text("no")
    await expect(row.locator("td").nth(4)).to_have_text(str(second["entryCount"]))
    await expect(row.locator("time")).to_have_attribute(
        "datetime", second["expiresAt"].replace("Z", "+00:00")
    )
    await expect(page.locator("nav[aria-label=Sections] a[aria-current=page]")).to_have_text(
        "Packs"
    )
    await audit(page, "packs-list")

    await page.get_by_test_id("older").click()
    await expect(rows).to_have_count(1)
    oldest = await rest(
        world.owner, "GET", f"/diaries/{diary['id']}/packs", params={"offset": PAGE}
    )
    assert await rows.first.get_attribute("data-pack") == oldest["items"][0]["id"]
    await page.get_by_test_id("newer").click()
    await expect(rows).to_have_count(PAGE)
    await rows.first.get_by_test_id("pack-link").click()
    await expect(page).to_have_url(f"{stack.base_url}/console/packs/{newest['id']}")
    await page.context.close()


# --- 2. a pack ------------------------------------------------------------------------------


async def test_a_pack_page_shows_its_entries_by_title_with_compression_and_tokens(
    stack: Any, world: World, browser: Browser
) -> None:
    made = await new_pack(world.owner, world.diary["id"], world.notes, tokenBudget=130)
    pack = await rest(world.owner, "GET", f"/packs/{made['packId']}", params={"expand": "entries"})
    assert {e["compressionLevel"] for e in pack["entries"]} != {"full"}  # the budget compressed

    page = await open_page(
        browser, stack.base_url, world.member, f"/console/packs/{made['packId']}"
    )
    await expect(page.get_by_test_id("pack-cid")).to_have_text(pack["packCid"])
    await expect(page.get_by_role("button", name="Copy CID")).to_be_visible()
    await expect(page.get_by_test_id("pack-pinned")).to_have_text("no")
    await expect(page.get_by_test_id("pack-expiry").locator("time")).to_have_attribute(
        "datetime", pack["expiresAt"].replace("Z", "+00:00")
    )
    await expect(page.get_by_test_id("pack-tokens")).to_contain_text(str(pack["totalTokens"]))
    rows = page.get_by_test_id("pack-entry")
    await expect(rows).to_have_count(3)
    for row_index, entry in enumerate(pack["entries"]):
        row = rows.nth(row_index)
        cells = row.locator("td")
        await expect(cells.nth(0)).to_have_text(str(entry["rank"]))
        await expect(cells.nth(2)).to_have_text(entry["compressionLevel"])
        await expect(cells.nth(3)).to_have_text(str(entry["packedTokens"]))
        await expect(cells.nth(4)).to_have_text(str(entry["originalTokens"]))
        link = row.get_by_test_id("entry-link")
        await expect(link).to_have_attribute("href", f"/console/entries/{entry['entryId']}")
        await expect(link).to_contain_text(entry.get("title") or "Untitled entry")
    assert str(world.owner.subject_id) not in await page.locator("main").inner_text()
    await audit(page, "packs-pack")
    await page.context.close()


async def test_a_stranger_gets_the_pages_not_found(
    stack: Any, actors: Any, world: World, browser: Browser
) -> None:
    stranger: Actor = await actors.human()
    made = await new_pack(world.owner, world.diary["id"], world.notes[:1], params={"s": 1})
    page = await open_page(browser, stack.base_url, stranger, f"/console/packs/{made['packId']}")
    await expect(page.get_by_test_id("problem")).to_contain_text("No such pack")
    await page.goto(f"/console/diaries/{world.diary['id']}/packs")
    await expect(page.get_by_test_id("problem")).to_be_visible()
    await audit(page, "packs-not-found")
    await page.context.close()


# --- 3. render -------------------------------------------------------------------------------


async def test_a_manager_renders_a_pack_and_reads_its_markdown(
    stack: Any, world: World, browser: Browser
) -> None:
    made = await new_pack(world.owner, world.diary["id"], world.notes[:2], params={"r": 1})
    deploys_head = LONG[:40]  # the entries' own text, rendered
    page = await open_page(
        browser, stack.base_url, world.manager, f"/console/packs/{made['packId']}"
    )
    await expect(page.get_by_test_id("no-renderings")).to_be_visible()
    await page.fill("#description", "for the on-call agent")
    await page.locator("#render button[type=submit]").click()
    await expect(page.get_by_test_id("notice")).to_contain_text("rendered")
    listed = await rest(
        world.owner,
        "GET",
        f"/diaries/{world.diary['id']}/rendered-packs",
        params={"sourcePackId": made["packId"]},
    )
    (rendering,) = listed["items"]
    assert page.url.startswith(f"{stack.base_url}/console/rendered/{rendering['id']}")
    stored = await rest(world.owner, "GET", f"/rendered-packs/{rendering['id']}")
    await expect(page.get_by_test_id("rendered-cid")).to_have_text(stored["packCid"])
    await expect(page.get_by_test_id("rendered-method")).to_have_text("server:pack-to-docs-v1")
    await expect(page.get_by_test_id("rendered-description")).to_have_text("for the on-call agent")
    shown = await page.get_by_test_id("markdown").inner_text()
    assert shown.strip() == stored["content"].strip() and deploys_head in shown
    await audit(page, "packs-rendered")

    await page.get_by_test_id("source-pack").click()
    links = page.get_by_test_id("rendering-link")
    await expect(links).to_have_count(1)
    await expect(links.first).to_have_attribute("href", f"/console/rendered/{rendering['id']}")

    # a method of the agent's own stores the Markdown given; shown as text, never as markup
    own = "# Ops\n\n<script>document.title = 'owned'</script> **bold**"
    await page.fill("#renderMethod", "agent:ops-brief")
    await page.fill("#renderedMarkdown", own)
    await page.locator("#render button[type=submit]").click()
    await expect(page.get_by_test_id("notice")).to_contain_text("rendered")
    await expect(page.get_by_test_id("markdown")).to_have_text(own)
    assert await page.title() != "owned"
    await page.context.close()


async def test_a_render_the_api_refuses_is_shown_beside_the_form(
    stack: Any, world: World, browser: Browser
) -> None:
    made = await new_pack(world.owner, world.diary["id"], world.notes[:1], params={"r": 2})
    path = f"/console/packs/{made['packId']}"
    page = await open_page(browser, stack.base_url, world.member, path)
    await page.locator("#render button[type=submit]").click()
    problem = page.get_by_test_id("problem-render")
    await expect(problem).to_contain_text("lack 'write'")
    await page.context.close()

    # a server method takes no Markdown of the caller's: a 400, with what was typed kept
    page = await open_page(browser, stack.base_url, world.manager, path)
    await page.fill("#renderedMarkdown", "# mine")
    await page.locator("#render button[type=submit]").click()
    await expect(page.get_by_test_id("problem-render")).to_be_visible()
    await expect(page.locator("#renderedMarkdown")).to_have_value("# mine")
    await audit(page, "packs-render-refused")
    listed = await rest(
        world.owner,
        "GET",
        f"/diaries/{world.diary['id']}/rendered-packs",
        params={"sourcePackId": made["packId"]},
    )
    assert listed["total"] == 0
    await page.context.close()


# --- 4. pin and unpin --------------------------------------------------------------------------


async def test_a_manager_pins_and_unpins_a_pack_and_a_member_is_refused(
    stack: Any, world: World, browser: Browser
) -> None:
    made = await new_pack(world.owner, world.diary["id"], world.notes[1:], params={"p": 1})
    path = f"/console/packs/{made['packId']}"
    page = await open_page(browser, stack.base_url, world.member, path)
    await page.get_by_role("button", name="Pin", exact=True).click()
    await expect(page.get_by_test_id("problem-pin")).to_contain_text("lack 'write'")
    await expect(page.get_by_test_id("pack-pinned")).to_have_text("no")
    await page.context.close()
    assert (await rest(world.owner, "GET", f"/packs/{made['packId']}"))["pinned"] is False

    page = await open_page(browser, stack.base_url, world.manager, path)
    await page.get_by_role("button", name="Pin", exact=True).click()
    await expect(page.get_by_test_id("notice")).to_contain_text("pinned")
    await expect(page.get_by_test_id("pack-pinned")).to_have_text("yes")
    await expect(page.get_by_test_id("pack-expiry")).to_have_text("never")
    pinned = await rest(world.owner, "GET", f"/packs/{made['packId']}")
    assert pinned["pinned"] is True and "expiresAt" not in pinned

    await page.fill("#expiresAt", "2099-01-02T03:04")
    await page.get_by_role("button", name="Unpin").click()
    await expect(page.get_by_test_id("notice")).to_contain_text("unpinned")
    await expect(page.get_by_test_id("pack-pinned")).to_have_text("no")
    await expect(page.get_by_test_id("pack-expiry")).to_have_text("2099-01-02 03:04 UTC")
    unpinned = await rest(world.owner, "GET", f"/packs/{made['packId']}")
    assert unpinned["pinned"] is False and unpinned["expiresAt"].startswith("2099-01-02T03:04")
    await page.context.close()


# --- 5. provenance and diff --------------------------------------------------------------------


async def test_provenance_follows_the_packs_a_pack_supersedes(
    stack: Any, world: World, browser: Browser
) -> None:
    deploys, note, canaries = world.notes
    first = await new_pack(world.owner, world.diary["id"], [deploys], params={"v": 1})
    second = await new_pack(
        world.owner,
        world.diary["id"],
        [deploys, note],
        params={"v": 2},
        supersedesPackId=first["packId"],
    )
    third = await new_pack(
        world.owner,
        world.diary["id"],
        [note, canaries],
        params={"v": 3},
        supersedesPackId=second["packId"],
    )
    page = await open_page(
        browser, stack.base_url, world.member, f"/console/packs/{third['packId']}"
    )
    await page.get_by_test_id("provenance-link").click()
    chain = page.get_by_test_id("provenance-pack")
    await expect(chain).to_have_count(3)
    for depth, made in enumerate((third, second, first)):
        item = page.locator(f"[data-testid=provenance-pack][data-depth='{depth}']")
        link = item.get_by_test_id("provenance-pack-link").first
        await expect(link).to_have_attribute("href", f"/console/packs/{made['packId']}")
        await expect(link.locator("code")).to_have_attribute("title", made["packCid"])
    # each pack's own entries (the nested packs' rows come after its own)
    root_entries = chain.first.locator("table").first.get_by_test_id("entry-link")
    await expect(root_entries).to_have_text(["Untitled entry " + note["id"][:8] + "…", "Canaries"])
    await expect(root_entries.last).to_have_attribute("href", f"/console/entries/{canaries['id']}")
    await expect(page.get_by_test_id("truncated")).to_have_count(0)
    await audit(page, "packs-provenance")

    await page.fill("#depth-value", "1")
    await page.get_by_role("button", name="Show").click()
    await expect(chain).to_have_count(2)
    await expect(page.get_by_test_id("truncated")).to_be_visible()
    await page.context.close()


async def test_a_diff_against_another_pack_of_the_diary_names_what_changed(
    stack: Any, world: World, browser: Browser
) -> None:
    deploys, note, canaries = world.notes
    base = await new_pack(world.owner, world.diary["id"], [deploys, note], params={"d": 1})
    other = await new_pack(
        world.owner, world.diary["id"], [note, canaries], params={"d": 2}, tokenBudget=60
    )
    expected = await rest(world.owner, "GET", f"/packs/{base['packId']}/diff/{other['packId']}")
    page = await open_page(
        browser, stack.base_url, world.member, f"/console/packs/{base['packId']}"
    )
    await page.select_option("#other", other["packId"])
    await page.get_by_role("button", name="Compare").click()
    await expect(page.get_by_role("heading", level=1)).to_contain_text(other["packCid"][-8:])
    added = page.get_by_test_id("added").get_by_test_id("entry-link")
    await expect(added).to_have_text(["Canaries"])
    await expect(added).to_have_attribute("href", f"/console/entries/{canaries['id']}")
    removed = page.get_by_test_id("removed").get_by_test_id("entry-link")
    await expect(removed).to_have_text(["Deploys"])
    changed = page.get_by_test_id("changed").locator("tbody tr")
    changes = len(expected["reordered"]) + len(expected["compressionChanged"])
    assert changes >= 1  # the note moved from rank 2 to rank 1
    await expect(changed).to_have_count(changes)
    await expect(changed.first).to_contain_text("rank")
    await expect(changed.first.locator("td").nth(2)).to_have_text("2")
    await expect(changed.first.locator("td").nth(3)).to_have_text("1")
    await expect(page.locator("main")).to_contain_text(f"{expected['stats']['tokenDelta']:+d}")
    await audit(page, "packs-diff")
    await page.context.close()
