"""One condition, one code (issue 34): every REST route that names a team, task, diary, entry or
signing request answers its absence with that resource's own 404 code, whichever route it is.

The walk takes the routes from the endpoint registry, so a route added later is walked too: the
first path parameter names the resource, a fresh uuid stands for it, the other parameters and the
body are valid (a 400 would answer before the lookup), and the caller is an agent with every scope.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest
from actors import Actor, new_diary

import api.app  # noqa: F401  (registers every route)
from api.endpoint import ENDPOINTS
from api.spec import EndpointSpec
from schemas.errors import (
    DiaryNotFound,
    DiaryTransferNotFound,
    EntryNotFound,
    SigningRequestNotFound,
    TaskNotFound,
    TeamNotFound,
)
from schemas.kernel.cids import bytes_cid

# the path that names a resource by its first parameter → the code of its absence
MISSING = {
    "/teams/{id}": TeamNotFound.code,
    "/tasks/{id}": TaskNotFound.code,
    "/diaries/{diaryId}": DiaryNotFound.code,
    "/entries/{entryId}": EntryNotFound.code,
    "/public/entries/{entryId}": EntryNotFound.code,
    "/crypto/signing-requests/{id}": SigningRequestNotFound.code,
}
# a route that looks its own item up by the pair (a transfer of this diary) answers for the item:
# with the diary missing, no such transfer exists either
ITEM_FIRST = {
    "/diaries/{diaryId}/transfers/{transferId}": DiaryTransferNotFound.code,
}
ANOTHER_ID = "00000000-0000-4000-8000-000000000001"
CID = bytes_cid(b"not stored anywhere")
# a valid body per body model: what passes the schema, so that the lookup decides
BODIES: dict[str, Any] = {
    "SignatureSubmit": {"signature": "A" * 86 + "=="},
    "EntryCreateRequest": {"content": "hello"},
    "GrantRequest": {"subjectId": ANOTHER_ID, "subjectNs": "Agent", "role": "writer"},
    "TaskGrantRequest": {"subjectId": ANOTHER_ID, "subjectNs": "Agent", "role": "writer"},
    "PackCreateRequest": {"entries": [{"entryId": ANOTHER_ID, "rank": 1}]},
    "DiaryUpdateRequest": {"name": "renamed"},
    "EntryUpdateRequest": {"content": "changed"},
    "TransferCreateRequest": {"destinationTeamId": ANOTHER_ID},
    "RelationCreateRequest": {"targetId": ANOTHER_ID, "relation": "supports"},
    "CompleteRequest": {"output": {}, "outputCid": CID},
    "FailRequest": {"error": {"message": "x", "code": "x"}},
    "CancelRequest": {"reason": "no longer needed"},
    "CreateGroupRequest": {"name": "crew"},
    "UpdateMemberRequest": {"role": "member"},
    "CreateProjectRequest": {"name": "plan"},
    "AppendMessagesRequest": {"messages": [{"kind": "log", "payload": {"text": "x"}}]},
}
QUERIES: dict[str, dict[str, str]] = {
    "/tasks/{id}/attempts/{n}/artifacts": {"kind": "output", "title": "out"},
}


def owner(spec: EndpointSpec) -> str | None:
    """The resource path (`/tasks/{id}`) a route hangs under, None for any other route."""
    head = re.match(r"^(.*?\{[^}]+\})", spec.path)
    return head.group(1) if head is not None and head.group(1) in MISSING else None


WALKED = sorted(
    (spec for spec in ENDPOINTS if owner(spec) is not None),
    key=lambda spec: (spec.path, spec.method),
)


def concrete(path: str, missing: str) -> str:
    """The path with the missing resource's id, and a plausible value for every other part."""
    head = owner_path(path)
    rest = path[len(head) :]
    rest = rest.replace("{n}", "1").replace("{cid}", CID)
    rest = re.sub(r"\{[^}]+\}", ANOTHER_ID, rest)
    return re.sub(r"\{[^}]+\}", missing, head) + rest


def owner_path(path: str) -> str:
    head = re.match(r"^(.*?\{[^}]+\})", path)
    assert head is not None
    return head.group(1)


async def ask(actor: Actor, spec: EndpointSpec, path: str) -> tuple[int, Any]:
    headers = {"Idempotency-Key": f"walk-{uuid.uuid4()}"} if spec.idempotent else {}
    body = BODIES.get(spec.body.__name__, {}) if spec.body is not None else None
    if spec.raw_body is not None:
        headers["Content-Type"] = spec.raw_body
        return await actor.call(
            spec.method, path, data=b"x", headers=headers, params=QUERIES.get(spec.path)
        )
    return await actor.call(
        spec.method, path, json=body, headers=headers, params=QUERIES.get(spec.path)
    )


def test_the_walk_covers_each_resource() -> None:
    """Each resource is named by some route (a renamed path would silently walk nothing)."""
    assert {owner(spec) for spec in WALKED} == set(MISSING)


@pytest.mark.parametrize("spec", WALKED, ids=lambda spec: f"{spec.method} {spec.path}")
def test_the_document_lists_that_code(spec: EndpointSpec) -> None:
    """The OpenAPI document (built from each route's `errors`) names the code it answers."""
    listed = {error.code for error in spec.errors if not error.family}
    item = next((code for path, code in ITEM_FIRST.items() if spec.path.startswith(path)), None)
    assert MISSING[owner_path(spec.path)] in listed and (item is None or item in listed), listed


@pytest.mark.parametrize("spec", WALKED, ids=lambda spec: f"{spec.method} {spec.path}")
async def test_a_missing_resource_has_its_own_code_on_every_route(
    actors: Any, spec: EndpointSpec
) -> None:
    agent = await actors.agent()
    status, problem = await ask(agent, spec, concrete(spec.path, str(uuid.uuid4())))
    item = next((code for path, code in ITEM_FIRST.items() if spec.path.startswith(path)), None)
    expected = item or MISSING[owner_path(spec.path)]
    assert (status, problem["code"]) == (404, expected), problem


async def test_a_missing_entry_of_a_diary_is_entry_not_found(actors: Any) -> None:
    """The entry under a diary the caller reads: the entry's code, not the diary's."""
    agent = await actors.agent()
    diary = await new_diary(agent)
    path = f"/diaries/{diary['id']}/entries/{uuid.uuid4()}/verify"
    status, problem = await agent.call("GET", path)
    assert (status, problem["code"]) == (404, EntryNotFound.code), problem


async def test_a_missing_signing_request_named_in_a_body_is_the_same_404(actors: Any) -> None:
    """An entry's signingRequestId naming no request of the caller: the code (and status) the
    signing request's own route answers."""
    agent = await actors.agent()
    diary = await new_diary(agent)
    body = {"content": "signed", "signingRequestId": str(uuid.uuid4())}
    status, problem = await agent.call("POST", f"/diaries/{diary['id']}/entries", json=body)
    assert (status, problem["code"]) == (404, SigningRequestNotFound.code), problem
