"""Sharing a diary in the console, in a real browser (issue 24, "grants" and "transfers"):
grants listed by the grantee's name, added (a person or a group of the team from a select, an
agent by fingerprint) and revoked; a transfer proposed from the diary's page and its state
shown; the transfers waiting for a team accepted or rejected. Every permission rule both ways:
whoever the REST route refuses sees its problem beside the form or button. axe-core on every
page."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from actors import Actor, join_team
from browser_support import chromium
from console_support import SCREENSHOTS, audit, logged_in
from playwright.async_api import Browser, Page, expect


@pytest.fixture(scope="module")
async def browser() -> AsyncIterator[Browser]:
    async with chromium(SCREENSHOTS) as launched:
        yield launched


# --- setup through the API ----------------------------------------------------------------------


async def new_team(owner: Actor, name: str) -> dict[str, Any]:
    status, team = await owner.call("POST", "/teams", json={"name": name})
    assert status == 201, team
    return dict(team)


async def new_diary(owner: Actor, team_id: str, name: str) -> dict[str, Any]:
    body = {"name": name, "visibility": "private"}
    status, diary = await owner.call("POST", "/diaries", json=body, team=team_id)
    assert status == 201, diary
    return dict(diary)


async def grants_of(actor: Actor, diary_id: str) -> set[tuple[str, str, str]]:
    status, listed = await actor.call("GET", f"/diaries/{diary_id}/grants")
    assert status == 200, listed
    return {(g["subjectNs"], g["subjectId"], g["role"]) for g in listed["items"]}


def tag() -> str:
    return uuid.uuid4().hex[:4]


@pytest.fixture(scope="module")
async def owner(actors: Any) -> Actor:
    """Owns the team whose diaries are shared."""
    return await actors.human("Ana Ferreira")


@pytest.fixture(scope="module")
async def colleague(actors: Any) -> Actor:
    """A manager of the owner's team: reads its diaries, may not share or transfer them."""
    return await actors.human("Ben Okafor")


@pytest.fixture(scope="module")
async def team(owner: Actor, colleague: Actor) -> dict[str, Any]:
    created = await new_team(owner, f"Harbour {tag()}")
    await join_team(owner, created["id"], colleague, "manager")
    return created


async def page_of(browser: Browser, stack: Any, human: Actor, url: str) -> Page:
    context = await logged_in(browser, stack.base_url, human)
    page = await context.new_page()
    await page.goto(url)
    return page


# --- grants -------------------------------------------------------------------------------------


async def test_an_owner_grants_a_person_a_group_and_an_agent_by_name_and_revokes_one(
    stack: Any, actors: Any, browser: Browser, owner: Actor, colleague: Actor, team: Any
) -> None:
    diary = await new_diary(owner, team["id"], "Field notes")
    status, group = await owner.call(
        "POST", f"/teams/{team['id']}/groups", json={"name": "Reviewers"}
    )
    assert status == 201, group
    agent: Actor = await actors.agent()
    page = await page_of(browser, stack, owner, f"/console/diaries/{diary['id']}/grants")
    await expect(page.get_by_test_id("no-grants")).to_be_visible()
    await audit(page, "sharing-grants-empty")

    await page.select_option("#grantee", label=f"Ben Okafor ({colleague.extra['email']})")
    await page.select_option("#grant-role", "manager")
    await page.click("#grant button[type=submit]")
    await expect(page.get_by_test_id("notice")).to_have_text("The grant is added.")
    await page.select_option("#grantee", label="Reviewers")
    await page.click("#grant button[type=submit]")
    await expect(page.get_by_test_id("grant-row")).to_have_count(2)
    await page.fill("#fingerprint", agent.fingerprint)
    await page.click("#grant-agent button[type=submit]")
    await expect(page.get_by_test_id("grant-row")).to_have_count(3)

    rows = page.get_by_test_id("grant-row")
    await expect(rows.filter(has_text="Ben Okafor")).to_contain_text("manager")
    await expect(rows.filter(has_text="Reviewers")).to_contain_text("writer")
    await expect(rows.filter(has_text=agent.fingerprint)).to_contain_text("writer")
    main = await page.locator("main").inner_text()
    assert str(colleague.subject_id) not in main and str(agent.subject_id) not in main
    assert await grants_of(owner, diary["id"]) == {
        ("Human", str(colleague.subject_id), "manager"),
        ("Group", group["id"], "writer"),
        ("Agent", str(agent.subject_id), "writer"),
    }
    await audit(page, "sharing-grants")

    ben = rows.filter(has_text="Ben Okafor")
    await ben.get_by_text("Revoke…").click()
    await ben.get_by_role("button", name="Revoke").click()
    await expect(page.get_by_test_id("notice")).to_have_text("The grant is revoked.")
    await expect(page.get_by_test_id("grant-row")).to_have_count(2)
    assert ("Human", str(colleague.subject_id), "manager") not in await grants_of(
        owner, diary["id"]
    )
    await page.context.close()


async def test_an_unknown_fingerprint_is_refused_beside_the_agent_form(
    stack: Any, browser: Browser, owner: Actor, team: Any
) -> None:
    diary = await new_diary(owner, team["id"], "Ledger")
    page = await page_of(browser, stack, owner, f"/console/diaries/{diary['id']}/grants")
    await page.fill("#fingerprint", "ABCD-0000-0000-0000")
    await page.click("#grant-agent button[type=submit]")
    problem = page.get_by_test_id("problem-grant-agent")
    await expect(problem).to_contain_text("No agent has this fingerprint")
    await expect(page.locator("#fingerprint")).to_have_value("ABCD-0000-0000-0000")
    await audit(page, "sharing-grants-refused")
    assert await grants_of(owner, diary["id"]) == set()
    await page.context.close()


async def test_a_team_manager_who_cannot_share_sees_the_refusals_beside_list_and_form(
    stack: Any, browser: Browser, owner: Actor, colleague: Actor, team: Any
) -> None:
    diary = await new_diary(owner, team["id"], "Owners only")
    page = await page_of(browser, stack, colleague, f"/console/diaries/{diary['id']}/grants")
    await expect(page.get_by_test_id("problem-grants")).to_be_visible()
    await audit(page, "sharing-grants-forbidden")
    await page.select_option("#grantee", label=f"Ana Ferreira ({owner.extra['email']})")
    await page.click("#grant button[type=submit]")
    problem = page.get_by_test_id("problem-grant")
    await expect(problem).to_be_visible()
    status, refused = await colleague.call(
        "POST",
        f"/diaries/{diary['id']}/grants",
        json={"subjectNs": "Human", "subjectId": str(owner.subject_id), "role": "writer"},
    )
    assert status == 403, refused
    await expect(problem).to_contain_text(refused["title"])
    assert await grants_of(owner, diary["id"]) == set()
    await page.context.close()


# --- transfers ----------------------------------------------------------------------------------


async def test_an_owner_proposes_a_transfer_to_one_of_their_teams_and_sees_its_state(
    stack: Any, browser: Browser, owner: Actor, team: Any
) -> None:
    diary = await new_diary(owner, team["id"], "Logbook")
    target = await new_team(owner, f"Lighthouse {tag()}")
    page = await page_of(browser, stack, owner, f"/console/diaries/{diary['id']}/transfers")
    await expect(page.get_by_test_id("no-transfers")).to_be_visible()
    await page.select_option("#team", label=f"{target['name']} (owner)")
    await page.click("#transfer button[type=submit]")
    await expect(page.get_by_test_id("notice")).to_contain_text("The transfer is proposed")
    row = page.get_by_test_id("transfer-row")
    await expect(row).to_have_count(1)
    await expect(row).to_contain_text(target["name"])
    await expect(row).to_contain_text("Ana Ferreira")
    await expect(row.get_by_test_id("transfer-status")).to_have_text("pending")
    await audit(page, "sharing-transfer")
    status, history = await owner.call("GET", f"/diaries/{diary['id']}/transfers")
    assert status == 200, history
    assert [(t["destinationTeamId"], t["status"]) for t in history["items"]] == [
        (target["id"], "pending")
    ]

    # one pending per diary: a second proposal, by a pasted id, is the API's 409 beside the form
    await page.fill("#team-id", target["id"])
    await page.click("#transfer button[type=submit]")
    await expect(page.get_by_test_id("problem-transfer")).to_contain_text("pending")
    await expect(page.locator("#team-id")).to_have_value(target["id"])
    await page.context.close()


async def test_a_team_manager_may_not_transfer_and_sees_why_beside_the_form(
    stack: Any, actors: Any, browser: Browser, owner: Actor, colleague: Actor, team: Any
) -> None:
    diary = await new_diary(owner, team["id"], "Not yours to give")
    elsewhere = await new_team(await actors.agent(), f"Elsewhere {tag()}")
    page = await page_of(browser, stack, colleague, f"/console/diaries/{diary['id']}/transfers")
    await page.fill("#team-id", elsewhere["id"])
    await page.click("#transfer button[type=submit]")
    problem = page.get_by_test_id("problem-transfer")
    await expect(problem).to_contain_text("Only an owner of the diary's team transfers it")
    await audit(page, "sharing-transfer-forbidden")
    status, history = await owner.call("GET", f"/diaries/{diary['id']}/transfers")
    assert status == 200 and history["items"] == []
    await page.context.close()


async def incoming(
    actors: Any, owner: Actor, team: Any, diary_name: str
) -> tuple[Actor, dict[str, Any], dict[str, Any]]:
    """A transfer of a new diary of `owner`'s team to a team a fresh human owns: that
    human, their team, and the transfer."""
    receiver: Actor = await actors.human("Chidi Anagonye")
    destination = await new_team(receiver, f"Quay {tag()}")
    diary = await new_diary(owner, team["id"], diary_name)
    body = {"destinationTeamId": destination["id"]}
    status, transfer = await owner.call("POST", f"/diaries/{diary['id']}/transfers", json=body)
    assert status == 201, transfer
    return receiver, destination, dict(transfer)


async def test_a_destination_owner_accepts_and_the_diary_belongs_to_their_team(
    stack: Any, actors: Any, browser: Browser, owner: Actor, team: Any
) -> None:
    receiver, destination, transfer = await incoming(actors, owner, team, "Tide tables")
    page = await page_of(browser, stack, receiver, f"/console/teams/{destination['id']}/transfers")
    row = page.get_by_test_id("incoming-row")
    await expect(row).to_have_count(1)
    await expect(row).to_contain_text("Tide tables")
    await expect(row).to_contain_text(team["name"])
    await expect(row).to_contain_text("Ana Ferreira")
    await audit(page, "sharing-incoming")
    await row.get_by_role("button", name="Accept Tide tables").click()
    await expect(page.get_by_test_id("notice")).to_contain_text("The transfer is accepted")
    await expect(page.get_by_test_id("no-incoming")).to_be_visible()

    status, listed = await receiver.call("GET", "/diaries", team=destination["id"])
    assert status == 200 and transfer["diaryId"] in {d["id"] for d in listed["items"]}
    status, diary = await receiver.call("GET", f"/diaries/{transfer['diaryId']}")
    assert status == 200 and diary["teamId"] == destination["id"]
    await page.context.close()


async def test_a_destination_owner_rejects_and_the_diary_stays(
    stack: Any, actors: Any, browser: Browser, owner: Actor, team: Any
) -> None:
    receiver, destination, transfer = await incoming(actors, owner, team, "Charts")
    page = await page_of(browser, stack, receiver, f"/console/teams/{destination['id']}/transfers")
    row = page.get_by_test_id("incoming-row")
    await row.get_by_text("Reject…").click()
    await row.get_by_role("button", name="Reject Charts").click()
    await expect(page.get_by_test_id("notice")).to_contain_text("The transfer is rejected")
    status, decided = await owner.call(
        "GET", f"/diaries/{transfer['diaryId']}/transfers/{transfer['id']}"
    )
    assert status == 200 and decided["status"] == "rejected"
    status, diary = await owner.call("GET", f"/diaries/{transfer['diaryId']}")
    assert status == 200 and diary["teamId"] == team["id"]
    await page.context.close()


async def test_a_destination_member_who_may_not_decide_sees_the_403_beside_the_buttons(
    stack: Any, actors: Any, browser: Browser, owner: Actor, team: Any
) -> None:
    receiver, destination, transfer = await incoming(actors, owner, team, "Soundings")
    deputy: Actor = await actors.human("Dana Scully")
    await join_team(receiver, destination["id"], deputy, "manager")
    page = await page_of(browser, stack, deputy, f"/console/teams/{destination['id']}/transfers")
    row = page.get_by_test_id("incoming-row")
    await row.get_by_role("button", name="Accept Soundings").click()
    problem = page.get_by_test_id(f"problem-accept-{transfer['id']}")
    await expect(problem).to_contain_text("Only an owner of the destination team decides")
    await audit(page, "sharing-incoming-forbidden")
    await row.get_by_text("Reject…").click()
    await row.get_by_role("button", name="Reject Soundings").click()
    await expect(page.get_by_test_id(f"problem-reject-{transfer['id']}")).to_be_visible()
    status, still = await owner.call(
        "GET", f"/diaries/{transfer['diaryId']}/transfers/{transfer['id']}"
    )
    assert status == 200 and still["status"] == "pending"
    await page.context.close()
