"""The console's teams in a real browser (issue 24, "Teams"): foundings waiting for me on the
home page with *Accept*; joining with a code (a used code refused beside the form); a new
team, active at once or founding with agents found by fingerprint (an unknown one refused);
a team's members by name with role changes, removal and the last-owner refusal; invites
created, copied and revoked; a plain member sees no management form and a forged one is
refused with the API's 403; groups and their members. axe-core on every page."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from actors import Actor, join_team
from browser_support import chromium
from console_support import SCREENSHOTS, audit, logged_in
from playwright.async_api import Browser, Page, expect

# A form the page does not offer, posted anyway from the page (with its own CSRF token): what a
# person editing the page, or a stale tab, would send.
FORGE = """([action, fields]) => {
  const form = document.createElement("form");
  form.method = "post";
  form.action = action;
  const all = {csrf: document.querySelector("input[name=csrf]").value, ...fields};
  for (const [name, value] of Object.entries(all)) {
    const input = document.createElement("input");
    input.type = "hidden";
    input.name = name;
    input.value = value;
    form.appendChild(input);
  }
  document.body.appendChild(form);
  form.submit();
}"""


@pytest.fixture(scope="module")
async def browser() -> AsyncIterator[Browser]:
    async with chromium(SCREENSHOTS) as launched:
        yield launched


def a_name(stem: str) -> str:
    return f"{stem} {uuid.uuid4().hex[:4]}"


async def team_of(owner: Actor, name: str) -> str:
    status, team = await owner.call("POST", "/teams", json={"name": name})
    assert status == 201, team
    return str(team["id"])


async def open_page(browser: Browser, base_url: str, human: Actor, path: str) -> Page:
    context = await logged_in(browser, base_url, human)
    page = await context.new_page()
    await page.goto(path)
    return page


async def forge(page: Page, action: str, fields: dict[str, str]) -> None:
    async with page.expect_navigation():
        await page.evaluate(FORGE, [action, fields])


async def test_a_pending_founding_is_on_the_home_page_and_accepted_from_there(
    stack: Any, actors: Any, browser: Browser
) -> None:
    creator: Actor = await actors.agent()
    human: Actor = await actors.human("Grace Hopper")
    name = a_name("Harbour")
    founders = [{"subjectId": str(human.subject_id), "subjectNs": "Human", "role": "manager"}]
    status, team = await creator.call(
        "POST", "/teams", json={"name": name, "foundingMembers": founders}
    )
    assert status == 202, team
    page = await open_page(browser, stack.base_url, human, "/console/")
    pending = page.get_by_test_id("pending-founding").filter(has_text=name)
    await expect(pending).to_contain_text("manager")
    await audit(page, "teams-home")
    await pending.get_by_role("button", name=f"Accept founding {name}").click()
    await expect(page.get_by_test_id("notice")).to_have_text("Your acceptance is recorded.")
    await expect(page.locator("h1")).to_have_text(name)
    await expect(page.get_by_test_id("team-status")).to_have_text("founding")
    rows = page.get_by_test_id("acceptance-row")
    await expect(rows.filter(has_text="Grace Hopper")).to_contain_text("accepted")
    await expect(rows.filter(has_text=creator.fingerprint)).to_contain_text("pending")
    await audit(page, "team-founding")
    await page.goto("/console/")
    await expect(page.get_by_test_id("pending-founding").filter(has_text=name)).to_have_count(0)
    await creator.call("POST", f"/teams/{team['id']}/accept-founding")  # the founding ends
    await page.context.close()


async def test_joining_with_a_code_and_a_used_code_refused_beside_the_form(
    stack: Any, actors: Any, browser: Browser
) -> None:
    owner: Actor = await actors.agent()
    first, second = await actors.human(), await actors.human()
    name = a_name("Quay")
    team_id = await team_of(owner, name)
    status, invite = await owner.call(
        "POST", f"/teams/{team_id}/invites", json={"role": "executor", "maxUses": 1}
    )
    assert status == 201, invite
    page = await open_page(browser, stack.base_url, first, "/console/")
    await page.fill("#join-code", invite["code"])
    await page.get_by_role("button", name="Join").click()
    await expect(page.get_by_test_id("notice")).to_have_text("You joined the team.")
    await expect(page.locator("h1")).to_have_text(name)
    await expect(page.get_by_test_id("my-role")).to_have_text("executor")
    await page.context.close()

    page = await open_page(browser, stack.base_url, second, "/console/")
    await page.fill("#join-code", invite["code"])
    await page.get_by_role("button", name="Join").click()
    problem = page.get_by_test_id("problem-join")
    await expect(problem).to_contain_text("The invite has been used up")
    await expect(page.locator("#join-code")).to_have_value(invite["code"])
    await audit(page, "teams-join")
    status, listed = await second.call("GET", "/teams")
    assert team_id not in {team["id"] for team in listed["items"]}
    await page.context.close()


async def test_a_new_team_is_active_at_once_and_an_unknown_fingerprint_is_refused(
    stack: Any, actors: Any, browser: Browser
) -> None:
    human: Actor = await actors.human()
    page = await open_page(browser, stack.base_url, human, "/console/")
    await page.get_by_test_id("new-team").click()
    await audit(page, "teams-new")
    name = a_name("Lantern")
    await page.fill("#team-name", name)
    await page.fill("#founder-1", "dead-beef-dead-beef")
    await page.get_by_role("button", name="Create team").click()
    problem = page.get_by_test_id("problem-new-team")
    await expect(problem).to_contain_text("Founder 1 (dead-beef-dead-beef)")
    await expect(problem).to_contain_text("No agent has this fingerprint")
    await expect(page.locator("#team-name")).to_have_value(name)
    await expect(page.locator("#founder-1")).to_have_value("dead-beef-dead-beef")
    await page.fill("#founder-1", "")
    await page.get_by_role("button", name="Create team").click()
    await expect(page.get_by_test_id("notice")).to_contain_text("active")
    await expect(page.locator("h1")).to_have_text(name)
    await expect(page.get_by_test_id("team-status")).to_have_text("active")
    await expect(page.get_by_test_id("my-role")).to_have_text("owner")
    await page.context.close()


async def test_a_founding_team_with_an_agent_shows_acceptances_until_it_is_active(
    stack: Any, actors: Any, browser: Browser
) -> None:
    agent: Actor = await actors.agent()
    human: Actor = await actors.human()
    page = await open_page(browser, stack.base_url, human, "/console/teams/new")
    name = a_name("Beacon")
    await page.fill("#team-name", name)
    await page.fill("#founder-1", agent.fingerprint)
    await page.select_option("#founder-1-role", "manager")
    await page.get_by_role("button", name="Create team").click()
    await expect(page.get_by_test_id("notice")).to_contain_text("founding")
    await expect(page.get_by_test_id("team-status")).to_have_text("founding")
    rows = page.get_by_test_id("acceptance-row")
    agent_row = rows.filter(has_text=agent.fingerprint)
    await expect(agent_row).to_contain_text("manager")
    await expect(agent_row).to_contain_text("pending")
    mine = rows.filter(has_text=human.extra["email"])
    await mine.get_by_role("button", name="Accept").click()
    await expect(page.get_by_test_id("notice")).to_have_text("Your acceptance is recorded.")
    await expect(rows.filter(has_text=human.extra["email"])).to_contain_text("accepted")
    team_id = page.url.rsplit("/", 1)[1].split("?")[0]
    status, accepted = await agent.call("POST", f"/teams/{team_id}/accept-founding")
    assert status == 200 and accepted["teamStatus"] == "active", accepted
    await page.goto(f"/console/teams/{team_id}")
    await expect(page.get_by_test_id("team-status")).to_have_text("active")
    members = page.get_by_test_id("member-row")
    await expect(members.filter(has_text=agent.fingerprint)).to_contain_text("manager")
    await expect(members.filter(has_text=human.extra["email"])).to_contain_text("owner")
    await page.context.close()


async def test_an_owner_changes_roles_removes_members_and_cannot_demote_the_last_owner(
    stack: Any, actors: Any, browser: Browser
) -> None:
    owner: Actor = await actors.human("Olive Owner")
    agent: Actor = await actors.agent()
    leaver: Actor = await actors.human("Lee Leaver")
    team_id = await team_of(owner, a_name("Dockyard"))
    await join_team(owner, team_id, agent, "member")
    await join_team(owner, team_id, leaver, "member")
    page = await open_page(browser, stack.base_url, owner, f"/console/teams/{team_id}")
    members = page.get_by_test_id("member-row")
    await expect(members).to_have_count(3)
    main = await page.locator("main").inner_text()
    assert str(agent.subject_id) not in main and str(leaver.subject_id) not in main
    await audit(page, "team")

    agent_row = members.filter(has_text=agent.fingerprint)
    await agent_row.get_by_label(f"Role of agent {agent.fingerprint}", exact=True).select_option(
        "executor"
    )
    await agent_row.get_by_role("button", name="Save").click()
    await expect(page.get_by_test_id("notice")).to_have_text("The role is changed.")
    await expect(members.filter(has_text=agent.fingerprint)).to_contain_text("executor")

    leaver_row = members.filter(has_text="Lee Leaver")
    await leaver_row.get_by_text("Remove…").click()
    await leaver_row.get_by_role("button", name="Remove Lee Leaver").click()
    await expect(page.get_by_test_id("notice")).to_contain_text("removed")
    await expect(members.filter(has_text="Lee Leaver")).to_have_count(0)

    my_row = members.filter(has_text="Olive Owner")
    await my_row.get_by_label("Role of Olive Owner", exact=True).select_option("member")
    await my_row.get_by_role("button", name="Save").click()
    problem = page.get_by_test_id(f"problem-member-{owner.subject_id}")
    await expect(problem).to_contain_text("A team keeps at least one owner")
    await expect(members.filter(has_text="Olive Owner")).to_contain_text("owner")
    await audit(page, "team-last-owner")
    status, team = await owner.call("GET", f"/teams/{team_id}")
    assert status == 200 and team["role"] == "owner"
    await page.context.close()


async def test_an_owner_creates_copies_and_revokes_an_invite(
    stack: Any, actors: Any, browser: Browser
) -> None:
    owner: Actor = await actors.human()
    team_id = await team_of(owner, a_name("Jetty"))
    page = await open_page(browser, stack.base_url, owner, f"/console/teams/{team_id}")
    uses = page.locator("#invite-uses")
    assert await uses.get_attribute("max") == "1000" and await uses.get_attribute("min") == "1"
    assert await page.locator("#invite-hours").get_attribute("max") == "720"
    await page.select_option("#invite-role", "manager")
    await uses.fill("3")
    await page.fill("#invite-hours", "2")
    await page.get_by_role("button", name="Create invite").click()
    await expect(page.get_by_test_id("notice")).to_contain_text("The invite is created")
    code = await page.get_by_test_id("fresh-invite-code").inner_text()
    assert code.startswith("service_inv_")
    await expect(page.get_by_test_id("fresh-invite")).to_contain_text("manager")
    await expect(page.get_by_role("button", name="Copy code")).to_be_visible()
    row = page.get_by_test_id("invite-row").filter(has_text=code)
    await expect(row.get_by_test_id("invite-uses")).to_have_text("0 of 3")
    await audit(page, "team-invites")
    await row.get_by_text("Revoke…").click()
    await row.get_by_role("button", name="Revoke").click()
    await expect(page.get_by_test_id("notice")).to_contain_text("revoked")
    await expect(page.get_by_test_id("invite-row")).to_have_count(0)
    joiner: Actor = await actors.human()
    status, problem = await joiner.call("POST", "/teams/join", json={"code": code})
    assert status == 404, problem
    await page.context.close()


async def test_a_plain_member_sees_no_management_and_a_forged_form_shows_the_403(
    stack: Any, actors: Any, browser: Browser
) -> None:
    owner: Actor = await actors.agent()
    member: Actor = await actors.human()
    team_id = await team_of(owner, a_name("Slipway"))
    await join_team(owner, team_id, member, "member")
    page = await open_page(browser, stack.base_url, member, f"/console/teams/{team_id}")
    await expect(page.get_by_test_id("my-role")).to_have_text("member")
    await expect(page.get_by_test_id("invites-hidden")).to_be_visible()
    for form in ("#invite", "#group", "select[name=role]", "details"):
        await expect(page.locator(f"main {form}")).to_have_count(0)
    await audit(page, "team-as-member")

    await forge(page, f"/console/teams/{team_id}/invites", {"role": "member"})
    problem = page.get_by_test_id("problem-invite")
    await expect(problem).to_contain_text("does not allow")
    await forge(page, f"/console/teams/{team_id}/members/{owner.subject_id}", {"role": "member"})
    problem = page.get_by_test_id(f"problem-member-{owner.subject_id}")
    await expect(problem).to_contain_text("does not allow")
    status, team = await owner.call("GET", f"/teams/{team_id}")
    assert status == 200 and team["role"] == "owner"
    status, invites = await owner.call("GET", f"/teams/{team_id}/invites")
    assert status == 200 and len(invites["items"]) == 1  # join_team's own, nothing forged
    await page.context.close()


async def test_groups_are_created_filled_emptied_and_deleted(
    stack: Any, actors: Any, browser: Browser
) -> None:
    owner: Actor = await actors.human("Mira Manager")
    agent: Actor = await actors.agent()
    team_id = await team_of(owner, a_name("Boathouse"))
    await join_team(owner, team_id, agent, "executor")
    page = await open_page(browser, stack.base_url, owner, f"/console/teams/{team_id}")
    group = a_name("Night shift")
    await page.fill("#group-name", group)
    await page.get_by_role("button", name="Create group").click()
    await expect(page.get_by_test_id("notice")).to_have_text("The group is created.")
    await expect(page.locator("h1")).to_have_text(group)
    await page.select_option("#add-member", label=f"agent {agent.fingerprint} (executor)")
    await page.get_by_role("button", name="Add to group").click()
    await expect(page.get_by_test_id("notice")).to_have_text("Added to the group.")
    rows = page.get_by_test_id("group-member-row")
    await expect(rows.filter(has_text=agent.fingerprint)).to_have_count(1)
    await audit(page, "team-group")
    row = rows.filter(has_text=agent.fingerprint)
    await row.get_by_text("Remove…").click()
    await row.get_by_role("button", name=f"Remove agent {agent.fingerprint} from the group").click()
    await expect(page.get_by_test_id("notice")).to_have_text("Removed from the group.")
    await expect(rows).to_have_count(0)
    await page.get_by_text("Delete…").click()
    await page.get_by_role("button", name=f"Delete {group}").click()
    await expect(page.get_by_test_id("notice")).to_have_text("The group is deleted.")
    await expect(page.get_by_test_id("group-link").filter(has_text=group)).to_have_count(0)
    await page.context.close()
