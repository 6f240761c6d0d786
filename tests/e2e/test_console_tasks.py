"""The console's tasks in a real browser (issue 24, "Tasks"): a new task from a form generated
from its type's input schema, checked in the browser and then by `POST /tasks` (its refusal
beside the form); a task's page with its attempts and executor, the message stream growing
live, artifacts downloaded with the session cookie, the output's CID and signature check;
cancelling with a reason, and the refusal for someone not allowed to; the queue and the task
pages linked both ways: a task clicked in the queue opens its page, the one view of a task
(issue 34 §8), where its attempts are and where it is cancelled or the cancel refused. axe-core
on every page."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from actors import Actor, join_team
from browser_support import chromium
from console_support import SCREENSHOTS, audit, logged_in
from playwright.async_api import Browser, Frame, Page, expect
from task_support import REPORT, TaskTeam, complete, create_task, running_task, say


@pytest.fixture(scope="module")
async def browser() -> AsyncIterator[Browser]:
    async with chromium(SCREENSHOTS) as launched:
        yield launched


class Crew(TaskTeam):
    manager: Actor  # a human manager of the team: creates and cancels
    member: Actor  # a human member: reads, but may neither propose nor cancel
    team_name: str


@pytest.fixture(scope="module")
async def crew(actors: Any) -> Crew:
    c = Crew()
    c.owner, c.executor = await actors.agent(), await actors.agent()
    c.manager, c.member = await actors.human(), await actors.human()
    c.team_name = f"Harbour {uuid.uuid4().hex[:4]}"
    status, team = await c.owner.call("POST", "/teams", json={"name": c.team_name})
    assert status == 201, team
    c.team_id = team["id"]
    await join_team(c.owner, c.team_id, c.executor, "executor")
    await join_team(c.owner, c.team_id, c.manager, "manager")
    await join_team(c.owner, c.team_id, c.member, "member")
    body = {"name": "harbour log", "visibility": "private"}
    status, diary = await c.owner.call("POST", "/diaries", json=body, team=c.team_id)
    assert status == 201, diary
    c.diary_id = diary["id"]
    return c


async def opened(browser: Browser, base_url: str, human: Actor, path: str) -> Page:
    context = await logged_in(browser, base_url, human)
    page = await context.new_page()
    await page.goto(path)
    return page


def tasks_of(crew: Crew) -> str:
    return f"/console/teams/{crew.team_id}/tasks"


async def test_a_new_task_form_comes_from_the_type_schema_and_is_checked_before_sending(
    stack: Any, crew: Crew, browser: Browser
) -> None:
    page = await opened(browser, stack.base_url, crew.manager, tasks_of(crew) + "/new")
    await expect(page.get_by_role("link", name="New task")).to_have_attribute(
        "aria-current", "page"
    )
    brief = page.locator("#input-brief")  # a required string: a required text box
    assert await brief.evaluate("e => e.tagName") == "TEXTAREA"
    assert await brief.get_attribute("required") is not None
    assert await brief.get_attribute("minlength") == "1"
    # the optional fields wait behind one summary
    await expect(page.locator("#input-constraints")).to_be_hidden()
    await page.get_by_text("Optional input").click()
    constraints = page.locator("#input-constraints")  # an array of strings: one per line
    assert await constraints.get_attribute("required") is None
    await expect(page.get_by_test_id("field-constraints")).to_contain_text("One per line")
    assert await page.locator("#input-context").get_attribute("data-json") is not None
    await audit(page, "tasks-new")

    # the browser refuses an empty brief and JSON that does not parse: nothing is sent
    await page.get_by_role("button", name="Create task").click()
    assert await brief.evaluate("e => e.validity.valueMissing")
    await brief.fill("Chart the harbour")
    await page.locator("#input-context").fill("[{not json")
    await page.get_by_text("Optional input").click()  # folded away again
    await expect(page.locator("#input-context")).to_be_hidden()
    await page.get_by_role("button", name="Create task").click()
    await expect(page.locator("#input-context")).to_be_visible()  # opened to show the refusal
    message = await page.locator("#input-context").evaluate("e => e.validationMessage")
    assert "Not valid JSON" in message
    assert page.url.endswith("/tasks/new")

    # JSON the schema refuses is the route's 400, its pointer shown beside the form
    bad = '[{"slug": "no spaces please", "binding": "skill"}]'
    await page.locator("#input-context").fill(bad)
    await page.get_by_role("button", name="Create task").click()
    problem = page.get_by_test_id("problem-new-task")
    await expect(problem).to_contain_text("/input/context/0/slug")
    await expect(page.locator("#input-brief")).to_have_value("Chart the harbour")
    await expect(page.locator("#input-context")).to_have_value(bad)
    await audit(page, "tasks-new-refused")

    await page.locator("#input-context").fill("")
    await page.locator("#title").fill("Chart the harbour")  # the refused page shows them all
    await page.locator("#input-constraints").fill("no boats\n\n  low tide only  ")
    await page.get_by_role("button", name="Create task").click()
    await expect(page.get_by_test_id("notice")).to_have_text("The task is queued.")
    await expect(page.get_by_test_id("task-status")).to_have_text("queued")
    await expect(page.get_by_role("heading", level=1)).to_have_text("Chart the harbour")
    task_id = page.url.rsplit("/", 1)[1].split("?")[0]
    status, task = await crew.owner.call("GET", f"/tasks/{task_id}")
    assert status == 200, task
    assert task["input"] == {
        "brief": "Chart the harbour",
        "constraints": ["no boats", "low tide only"],
    }
    assert task["diaryId"] == crew.diary_id and task["proposedByHumanId"] is not None
    await page.context.close()


async def test_another_type_gives_its_own_form(stack: Any, crew: Crew, browser: Browser) -> None:
    page = await opened(browser, stack.base_url, crew.manager, tasks_of(crew) + "/new")
    await page.get_by_test_id("type-picker").select_option("judge_eval_attempt")
    await page.get_by_role("button", name="Choose").click()
    attempt_n = page.locator("#input-targetAttemptN")  # an integer with a minimum
    assert await attempt_n.get_attribute("type") == "number"
    assert await attempt_n.get_attribute("min") == "1"
    assert await attempt_n.get_attribute("required") is not None
    assert await page.locator("#input-targetTaskId").get_attribute("type") == "text"
    await expect(page.locator("#input-brief")).to_have_count(0)
    await audit(page, "tasks-new-judge")
    await page.context.close()


async def test_a_member_who_may_not_propose_sees_the_refusal_beside_the_form(
    stack: Any, crew: Crew, browser: Browser
) -> None:
    page = await opened(browser, stack.base_url, crew.member, tasks_of(crew) + "/new")
    await page.locator("#input-brief").fill("Paint the lighthouse")
    await page.get_by_role("button", name="Create task").click()
    await expect(page.get_by_test_id("problem-new-task")).to_contain_text("Proposing tasks")
    await expect(page.locator("#input-brief")).to_have_value("Paint the lighthouse")
    await page.context.close()


async def test_the_task_page_streams_messages_and_serves_artifacts_and_the_signed_output(
    stack: Any, crew: Crew, browser: Browser
) -> None:
    task_id = await running_task(crew, "Survey the pier")
    page = await opened(browser, stack.base_url, crew.manager, f"{tasks_of(crew)}/{task_id}")
    await expect(page.get_by_test_id("task-status")).to_have_text("running")
    await expect(page.get_by_test_id("executor")).to_have_text(crew.executor.fingerprint)
    messages = page.get_by_test_id("messages")
    await expect(messages).to_contain_text("starting")
    await audit(page, "tasks-task-running")

    # posted by the agent while the page is open: it appears without a reload
    await say(crew, task_id, "pier survey halfway")
    await expect(messages.locator("li")).to_have_count(2)
    await expect(messages.locator("li").last).to_contain_text("pier survey halfway")

    # the download link is the REST route's, and the session cookie is enough for it
    link = page.get_by_test_id("artifact-download")
    await expect(link).to_have_text("notes.txt")
    href = await link.get_attribute("href")
    assert href is not None and href.startswith(f"/tasks/{task_id}/artifacts/")
    downloaded = await page.context.request.get(href)
    assert downloaded.status == 200 and await downloaded.body() == REPORT

    cid = await complete(crew, task_id, {"summary": "The pier holds."})
    await page.reload()
    await expect(page.get_by_test_id("task-status")).to_have_text("completed")
    await expect(page.get_by_test_id("output-cid")).to_have_text(cid)
    await expect(page.get_by_test_id("output-signature")).to_contain_text("verified")
    await expect(page.get_by_test_id("output-signature")).not_to_contain_text("not verified")
    await expect(page.get_by_test_id("output")).to_contain_text("The pier holds.")
    await expect(page.locator("#cancel")).to_have_count(0)  # an ended task cannot be cancelled
    # and gets no more messages: its page stops asking for them
    await expect(page.locator("[data-stream]")).to_have_attribute("data-live", "no")
    await audit(page, "tasks-task")
    await page.context.close()


async def test_an_unsigned_output_is_shown_as_unsigned(
    stack: Any, crew: Crew, browser: Browser
) -> None:
    task_id = await running_task(crew, "Count the gulls")
    await complete(crew, task_id, {"summary": "Forty gulls."}, signed=False)
    page = await opened(browser, stack.base_url, crew.member, f"{tasks_of(crew)}/{task_id}")
    await expect(page.get_by_test_id("output-signature")).to_have_text("unsigned")
    await page.context.close()


async def test_a_message_of_a_task_claimed_after_the_page_opened_appears_live(
    stack: Any, crew: Crew, browser: Browser
) -> None:
    task_id = await create_task(crew, "Light the beacon")
    page = await opened(browser, stack.base_url, crew.member, f"{tasks_of(crew)}/{task_id}")
    await expect(page.get_by_test_id("task-status")).to_have_text("queued")
    status, claim = await crew.executor.call(
        "POST", f"/tasks/{task_id}/claim", json={}, team=crew.team_id
    )
    assert status == 200, claim
    await say(crew, task_id, "beacon lit")
    await expect(page.get_by_test_id("messages")).to_contain_text("beacon lit")
    await page.context.close()


async def test_a_manager_cancels_with_a_reason_and_a_member_is_refused_beside_the_form(
    stack: Any, crew: Crew, browser: Browser
) -> None:
    task_id = await create_task(crew, "Dredge the channel")
    path = f"{tasks_of(crew)}/{task_id}"

    page = await opened(browser, stack.base_url, crew.member, path)
    await page.get_by_text("Cancel this task…").click()
    await page.locator("#reason").fill("not mine to cancel")
    await page.get_by_role("button", name="Cancel task").click()
    await expect(page.get_by_test_id("problem-cancel")).to_contain_text("Cancelling needs")
    await expect(page.locator("#reason")).to_have_value("not mine to cancel")
    await expect(page.get_by_test_id("task-status")).to_have_text("queued")
    await audit(page, "tasks-cancel-refused")
    await page.context.close()

    page = await opened(browser, stack.base_url, crew.manager, path)
    await page.get_by_text("Cancel this task…").click()
    await page.get_by_role("button", name="Cancel task").click()  # the reason is required
    assert await page.locator("#reason").evaluate("e => e.validity.valueMissing")
    await page.locator("#reason").fill("The channel is deep enough.")
    await page.get_by_role("button", name="Cancel task").click()
    await expect(page.get_by_test_id("notice")).to_have_text("The task is cancelled.")
    await expect(page.get_by_test_id("task-status")).to_have_text("cancelled")
    await expect(page.get_by_test_id("cancel-reason")).to_have_text("The channel is deep enough.")
    status, task = await crew.owner.call("GET", f"/tasks/{task_id}")
    assert status == 200 and task["status"] == "cancelled", task
    await page.context.close()


async def test_tasks_and_the_queue_link_both_ways(stack: Any, crew: Crew, browser: Browser) -> None:
    task_id = await create_task(crew, "Mend the nets")
    page = await opened(browser, stack.base_url, crew.member, tasks_of(crew) + "/new")
    await page.get_by_test_id("recent-tasks").get_by_role("link", name="Mend the nets").click()
    await expect(page).to_have_url(f"{stack.base_url}{tasks_of(crew)}/{task_id}")
    await page.get_by_test_id("back-to-queue").click()
    await expect(page).to_have_url(f"{stack.base_url}{tasks_of(crew)}")
    queue = await queue_view(page)
    await queue.get_by_role("link", name="Mend the nets").click()
    await expect(page).to_have_url(f"{stack.base_url}{tasks_of(crew)}/{task_id}")
    await page.context.close()


async def queue_view(page: Page) -> Frame:
    """The queue view (the tasks app) framed in the console's queue page."""
    frame = await (await page.wait_for_selector("iframe#app")).content_frame()
    assert frame is not None
    return frame


async def click_in_queue(page: Page, title: str) -> None:
    """A click on the task's row in the queue: its page opens in place of the queue."""
    queue = await queue_view(page)
    row = queue.locator("tr.task", has_text=title)
    await expect(row.get_by_test_id("task-link")).to_have_text(title)
    await row.click()
    await expect(page.get_by_role("heading", level=1)).to_have_text(title)


async def test_a_task_clicked_in_the_queue_opens_its_page_to_be_cancelled_or_refused(
    stack: Any, crew: Crew, browser: Browser
) -> None:
    """A person finds a task in the queue, not only under *New task*: its row opens the task's
    page, with its attempts, where a manager cancels it and a member is refused."""
    task_id = await running_task(crew, "Tar the hull")
    path = f"{tasks_of(crew)}/{task_id}"

    page = await opened(browser, stack.base_url, crew.member, tasks_of(crew))
    queue = await queue_view(page)
    await expect(queue.get_by_test_id("task-link").first).to_be_visible()
    await expect(queue.locator("#detail")).to_have_count(0)  # one view of a task: its page
    await audit(page, "tasks-queue")
    await click_in_queue(page, "Tar the hull")
    await expect(page).to_have_url(f"{stack.base_url}{path}")
    await expect(page.get_by_test_id("attempt-row")).to_have_count(1)
    await expect(page.get_by_test_id("executor")).to_have_text(crew.executor.fingerprint)
    await expect(page.get_by_test_id("messages")).to_contain_text("starting")
    await page.get_by_text("Cancel this task…").click()
    await page.locator("#reason").fill("not mine to cancel")
    await page.get_by_role("button", name="Cancel task").click()
    await expect(page.get_by_test_id("problem-cancel")).to_contain_text("Cancelling needs")
    await expect(page.get_by_test_id("task-status")).to_have_text("running")
    await page.context.close()

    page = await opened(browser, stack.base_url, crew.manager, tasks_of(crew))
    await click_in_queue(page, "Tar the hull")
    await expect(page).to_have_url(f"{stack.base_url}{path}")
    await expect(page.get_by_test_id("attempt-row")).to_have_count(1)
    await page.get_by_text("Cancel this task…").click()
    await page.locator("#reason").fill("The hull is tarred already.")
    await page.get_by_role("button", name="Cancel task").click()
    await expect(page.get_by_test_id("notice")).to_have_text("The task is cancelled.")
    await expect(page.get_by_test_id("task-status")).to_have_text("cancelled")
    status, task = await crew.owner.call("GET", f"/tasks/{task_id}")
    assert status == 200 and task["status"] == "cancelled", task
    await page.context.close()


async def test_the_task_page_shows_why_each_attempt_ended_and_any_attempts_messages(
    stack: Any, crew: Crew, browser: Browser
) -> None:
    """What the queue's panel showed of a task, its page shows: every attempt, how a failed
    one ended, and the messages of the attempt a person picks (the latest's by default)."""
    body = {
        "taskType": "freeform",
        "teamId": crew.team_id,
        "diaryId": crew.diary_id,
        "title": "Caulk the seams",
        "input": {"brief": "Caulk the seams"},
        "maxAttempts": 2,
    }
    status, task = await crew.owner.call("POST", "/tasks", json=body, team=crew.team_id)
    assert status == 201, task
    task_id = str(task["id"])
    await claimed(crew, task_id, 1)
    await say(crew, task_id, "first try")
    error = {"code": "no-oakum", "message": "Ran out of oakum.", "retryable": True}
    status, failed = await crew.executor.call(
        "POST", f"/tasks/{task_id}/attempts/1/fail", json={"error": error}, team=crew.team_id
    )
    assert status == 200, failed
    await claimed(crew, task_id, 2)
    status, said = await crew.executor.call(
        "POST",
        f"/tasks/{task_id}/attempts/2/messages",
        json={"kind": "log", "payload": "second try"},
    )
    assert status == 201, said

    page = await opened(browser, stack.base_url, crew.member, tasks_of(crew))
    await click_in_queue(page, "Caulk the seams")
    rows = page.get_by_test_id("attempt-row")
    await expect(rows).to_have_count(2)
    await expect(page.get_by_test_id("attempt-ended").first).to_have_text(
        "no-oakum Ran out of oakum."
    )
    messages = page.get_by_test_id("messages")
    await expect(page.get_by_role("heading", name="Messages of attempt 2")).to_be_visible()
    await expect(messages).to_contain_text("second try")
    await expect(page.locator("[data-stream]")).to_have_attribute("data-live", "yes")
    await audit(page, "tasks-task-attempts")
    await page.get_by_role("link", name="Messages of attempt 1").click()
    await expect(page.get_by_role("heading", name="Messages of attempt 1")).to_be_visible()
    await expect(messages).to_contain_text("first try")
    await expect(messages).not_to_contain_text("second try")
    # an ended attempt gets no more messages: its view does not poll
    await expect(page.locator("[data-stream]")).to_have_attribute("data-live", "no")
    await expect(page.get_by_role("link", name="Messages of attempt 1")).to_have_attribute(
        "aria-current", "true"
    )
    await page.context.close()


async def claimed(crew: Crew, task_id: str, attempt_n: int) -> None:
    """The executor claims the task (its attempt `attempt_n`) and starts it."""
    status, claim = await crew.executor.call(
        "POST", f"/tasks/{task_id}/claim", json={}, team=crew.team_id
    )
    assert status == 200 and claim["attemptN"] == attempt_n, claim
    status, beat = await crew.executor.call(
        "POST", f"/tasks/{task_id}/attempts/{attempt_n}/heartbeat", json={}, team=crew.team_id
    )
    assert status == 200, beat


async def test_another_teams_task_is_not_found_under_this_team(
    stack: Any, actors: Any, crew: Crew, browser: Browser
) -> None:
    task_id = await create_task(crew, "Moor the ferry")
    status, other = await crew.owner.call("POST", "/teams", json={"name": "elsewhere"})
    assert status == 201, other
    await join_team(crew.owner, other["id"], crew.manager, "manager")
    context = await logged_in(browser, stack.base_url, crew.manager)
    page = await context.new_page()
    response = await page.goto(f"/console/teams/{other['id']}/tasks/{task_id}")
    assert response is not None and response.status == 404
    await expect(page.get_by_test_id("problem")).to_be_visible()
    await context.close()


async def test_a_task_shared_with_an_outsider_is_theirs_to_read_and_cancel(
    stack: Any, actors: Any, crew: Crew, browser: Browser
) -> None:
    outsider: Actor = await actors.human()
    task_id = await create_task(crew, "Check the buoys")
    grant = {"subjectId": str(outsider.subject_id), "subjectNs": "Human", "role": "manager"}
    status, body = await crew.owner.call(
        "POST", f"/tasks/{task_id}/grants", json=grant, team=crew.team_id
    )
    assert status in (200, 201), body
    page = await opened(browser, stack.base_url, outsider, f"{tasks_of(crew)}/{task_id}")
    await expect(page.get_by_test_id("shared-task")).to_be_visible()
    await expect(page.get_by_test_id("back-to-queue")).to_have_count(0)  # the queue is not theirs
    assert crew.team_name not in await page.locator("body").inner_text()
    await audit(page, "tasks-task-shared")
    await page.get_by_text("Cancel this task…").click()
    await page.locator("#reason").fill("Checked them myself.")
    await page.get_by_role("button", name="Cancel task").click()
    await expect(page.get_by_test_id("task-status")).to_have_text("cancelled")
    await page.context.close()
