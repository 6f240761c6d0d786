"""The signing protocol on the real stack (SPEC 2.4, 3.4, 4.4, 6) and `POST /crypto/verify`.

Every outcome is checked where it lands: the HTTP answer, the `signing_requests` row and the
`SigningRequest` workflow. The 300 s expiry runs on the time-skipping server
(tests/workflow_runs/test_signing_workflow.py).
"""

from __future__ import annotations

import asyncio
import base64
import uuid
from typing import Any

import nacl.signing
import pytest
from actors import anonymous
from temporalio.service import RPCError, RPCStatusCode

from schemas import limits
from schemas.signing import SignatureSubmission
from workflows.signing import SigningRequestWorkflow

PATH = "/crypto/signing-requests"


async def create(agent: Any, message: str = "hello, cairn") -> dict[str, Any]:
    status, body = await agent.call("POST", PATH, json={"message": message})
    assert status == 201, body
    return body  # type: ignore[no-any-return]


async def sign(agent: Any, request_id: str, signature: str) -> tuple[int, Any]:
    return await agent.call("POST", f"{PATH}/{request_id}/sign", json={"signature": signature})


async def row(db_pool: Any, request_id: str) -> dict[str, Any] | None:
    found = await db_pool.fetchrow(
        "SELECT agent_id, message, nonce, status, signature, valid, workflow_id, created_at,"
        " expires_at, completed_at FROM signing_requests WHERE id = $1",
        uuid.UUID(request_id),
    )
    return None if found is None else dict(found)


async def rows_of(db_pool: Any, agent: Any) -> int:
    return int(
        await db_pool.fetchval(
            "SELECT count(*) FROM signing_requests WHERE agent_id = $1", agent.subject_id
        )
    )


def foreign_signature(text: str) -> str:
    """A well-formed signature by a key that is not the agent's."""
    other = nacl.signing.SigningKey.generate()
    return base64.b64encode(other.sign(text.encode()).signature).decode()


# --- the happy path -------------------------------------------------------------------------


async def test_agent_signs_its_request_and_it_completes_valid(actors, db_pool, stack) -> None:
    agent = await actors.agent()
    created = await create(agent, "the message ✍")

    assert set(created) >= {
        "request_id",
        "message",
        "nonce",
        "signing_payload",
        "status",
        "expires_at",
    }
    assert created["status"] == "pending" and created["message"] == "the message ✍"
    assert created["signing_payload"] == f"the message ✍.{created['nonce']}"
    stored = await row(db_pool, created["request_id"])
    assert stored is not None
    assert stored["status"] == "pending" and stored["agent_id"] == agent.subject_id
    assert str(stored["nonce"]) == created["nonce"]
    assert stored["workflow_id"] == f"signing/{created['request_id']}"
    waited = (stored["expires_at"] - stored["created_at"]).total_seconds()
    assert abs(waited - limits.SIGNING_REQUEST_TTL_SEC) < 5

    signature = agent.sign(created["signing_payload"])
    status, outcome = await sign(agent, created["request_id"], signature)

    assert (status, outcome) == (200, {"status": "completed", "valid": True})
    stored = await row(db_pool, created["request_id"])
    assert stored is not None
    assert stored["status"] == "completed" and stored["valid"] is True
    assert stored["signature"] == signature and stored["completed_at"] is not None
    status, fetched = await agent.call("GET", f"{PATH}/{created['request_id']}")
    assert status == 200
    assert fetched["status"] == "completed" and fetched["valid"] is True
    assert fetched["signature"] == signature
    # the workflow's result event, and the workflow itself is done
    handle = stack.temporal.get_workflow_handle_for(
        SigningRequestWorkflow.run, stored["workflow_id"]
    )
    result = await handle.query(SigningRequestWorkflow.result)
    assert result.status == "completed" and result.valid is True
    assert (await handle.result()).status == "completed"
    # a finished workflow takes no update: the API then answers from the row (409)
    with pytest.raises(RPCError) as closed:
        await handle.execute_update(
            SigningRequestWorkflow.sign, SignatureSubmission(signature=signature)
        )
    assert closed.value.status == RPCStatusCode.NOT_FOUND


async def test_a_signature_by_another_key_completes_invalid(actors, db_pool) -> None:
    agent = await actors.agent()
    created = await create(agent)
    signature = foreign_signature(created["signing_payload"])

    status, outcome = await sign(agent, created["request_id"], signature)

    assert (status, outcome) == (200, {"status": "completed", "valid": False})
    stored = await row(db_pool, created["request_id"])
    assert stored is not None
    assert stored["status"] == "completed" and stored["valid"] is False
    assert stored["signature"] == signature


async def test_signing_the_message_without_the_nonce_is_invalid(actors, db_pool) -> None:
    agent = await actors.agent()
    created = await create(agent, "just the message")

    status, outcome = await sign(agent, created["request_id"], agent.sign("just the message"))

    assert (status, outcome) == (200, {"status": "completed", "valid": False})


# --- refusals that write nothing ------------------------------------------------------------


async def test_a_second_signature_is_409_and_the_row_keeps_the_first(actors, db_pool) -> None:
    agent = await actors.agent()
    created = await create(agent)
    first = agent.sign(created["signing_payload"])
    assert (await sign(agent, created["request_id"], first))[0] == 200
    before = await row(db_pool, created["request_id"])

    status, problem = await sign(agent, created["request_id"], foreign_signature("other"))

    assert status == 409 and problem["code"] == "signing-request-already-completed"
    assert await row(db_pool, created["request_id"]) == before


async def test_two_signatures_at_once_one_wins_the_other_is_409(actors, db_pool) -> None:
    agent = await actors.agent()
    created = await create(agent)
    good = agent.sign(created["signing_payload"])
    bad = foreign_signature(created["signing_payload"])

    answers = await asyncio.gather(
        sign(agent, created["request_id"], good), sign(agent, created["request_id"], bad)
    )

    statuses = sorted(status for status, _ in answers)
    assert statuses == [200, 409], answers
    winner = next(body for status, body in answers if status == 200)
    loser = next(body for status, body in answers if status == 409)
    assert loser["code"] == "signing-request-already-completed"
    stored = await row(db_pool, created["request_id"])
    assert stored is not None and stored["valid"] is winner["valid"]
    assert stored["signature"] == (good if winner["valid"] else bad)


@pytest.mark.parametrize(
    "signature",
    [
        "not base64 at all!",
        base64.b64encode(b"\x01" * 63).decode(),  # one byte short
        base64.b64encode(b"\x01" * 65).decode(),
        "",
        "A" * 200,
    ],
    ids=["not-base64", "63-bytes", "65-bytes", "empty", "too-long"],
)
async def test_a_malformed_signature_is_400_and_nothing_is_recorded(
    actors, db_pool, signature: str
) -> None:
    agent = await actors.agent()
    created = await create(agent)

    status, problem = await sign(agent, created["request_id"], signature)

    assert status == 400 and problem["code"] == "validation-failed", problem
    stored = await row(db_pool, created["request_id"])
    assert stored is not None
    assert stored["status"] == "pending" and stored["signature"] is None
    # the request still takes a good signature afterwards
    good = agent.sign(created["signing_payload"])
    assert await sign(agent, created["request_id"], good) == (
        200,
        {"status": "completed", "valid": True},
    )


@pytest.mark.parametrize(
    "body",
    [
        {"message": "hi", "purpose": "extra"},
        {"message": ""},
        {},
        {"message": 42},
        {"message": "x" * (limits.SIGNING_MESSAGE_MAX_CHARS + 1)},
    ],
    ids=["unknown-field", "empty-message", "no-message", "not-a-string", "too-long"],
)
async def test_a_bad_create_body_is_400_and_no_row(actors, db_pool, body: dict[str, Any]) -> None:
    agent = await actors.agent()

    status, problem = await agent.call("POST", PATH, json=body)

    assert status == 400 and problem["code"] == "validation-failed", problem
    assert await rows_of(db_pool, agent) == 0


async def test_the_longest_message_is_accepted(actors) -> None:
    agent = await actors.agent()
    created = await create(agent, "m" * limits.SIGNING_MESSAGE_MAX_CHARS)
    assert len(created["message"]) == limits.SIGNING_MESSAGE_MAX_CHARS


async def test_an_unknown_field_in_the_signature_body_is_400(actors, db_pool) -> None:
    agent = await actors.agent()
    created = await create(agent)
    body = {"signature": agent.sign(created["signing_payload"]), "valid": True}

    status, problem = await agent.call("POST", f"{PATH}/{created['request_id']}/sign", json=body)

    assert (status, problem["code"]) == (400, "validation-failed")
    assert problem["errors"][0]["pointer"] == "/valid"
    assert (await row(db_pool, created["request_id"]) or {})["status"] == "pending"


async def test_an_agent_may_hold_at_most_ten_pending_requests(actors, db_pool) -> None:
    agent = await actors.agent()
    for n in range(limits.SIGNING_MAX_PENDING_PER_AGENT):
        await create(agent, f"message {n}")

    status, problem = await agent.call("POST", PATH, json={"message": "one too many"})

    assert status == 429 and problem["code"] == "signing-request-limit-reached", problem
    assert await rows_of(db_pool, agent) == limits.SIGNING_MAX_PENDING_PER_AGENT
    # completing one frees a place
    status, listed = await agent.call("GET", PATH, params={"limit": "1"})
    newest = listed["items"][0]
    await sign(agent, newest["request_id"], agent.sign(newest["signing_payload"]))
    await create(agent, "now there is room")


# --- who may do what --------------------------------------------------------------------------


async def test_another_agent_cannot_see_or_sign_a_request(actors, db_pool) -> None:
    owner = await actors.agent()
    stranger = await actors.agent()
    created = await create(owner)
    request_id = created["request_id"]

    status, problem = await stranger.call("GET", f"{PATH}/{request_id}")
    assert status == 404 and problem["code"] == "signing-request-not-found"
    status, problem = await sign(stranger, request_id, stranger.sign(created["signing_payload"]))
    assert (status, problem["code"]) == (404, "signing-request-not-found")
    status, listed = await stranger.call("GET", PATH)
    assert status == 200 and listed["items"] == [] and listed["total"] == 0

    stored = await row(db_pool, request_id)
    assert stored is not None and stored["status"] == "pending" and stored["signature"] is None
    status, mine = await owner.call("GET", f"{PATH}/{request_id}")
    assert status == 200 and mine["request_id"] == request_id


async def test_an_unknown_request_is_404_and_a_malformed_id_400(actors) -> None:
    agent = await actors.agent()
    status, _ = await agent.call("GET", f"{PATH}/{uuid.uuid4()}")
    assert (status, _["code"]) == (404, "signing-request-not-found")
    status, _ = await sign(agent, str(uuid.uuid4()), agent.sign("x"))
    assert (status, _["code"]) == (404, "signing-request-not-found")
    status, problem = await agent.call("GET", f"{PATH}/not-a-uuid")
    assert (status, problem["code"]) == (400, "validation-failed")
    assert problem["errors"][0]["pointer"] == "/path/id"


async def test_a_human_gets_403_agents_only(actors, db_pool) -> None:
    human = await actors.human()
    status, problem = await human.call("POST", PATH, json={"message": "hi"})
    assert status == 403 and problem["code"] == "agents-only"
    status, problem = await human.call("GET", PATH)
    assert status == 403 and problem["code"] == "agents-only"
    status, problem = await human.call("GET", f"{PATH}/{uuid.uuid4()}")
    assert status == 403 and problem["code"] == "agents-only"
    count = await db_pool.fetchval(
        "SELECT count(*) FROM signing_requests WHERE agent_id = $1", human.subject_id
    )
    assert count == 0


async def test_a_token_without_crypto_sign_gets_403(actors, db_pool) -> None:
    narrow = await actors.agent(scope="agent:profile diary:read")
    status, problem = await narrow.call("POST", PATH, json={"message": "hi"})
    assert status == 403 and problem["code"] == "missing-scope"
    status, problem = await narrow.call("GET", PATH)
    assert status == 403 and problem["code"] == "missing-scope"
    assert await rows_of(db_pool, narrow) == 0
    # and with the scope, the same agent's kind of caller succeeds
    signer = await actors.agent(scope="agent:profile crypto:sign")
    assert (await create(signer))["status"] == "pending"


async def test_signing_routes_need_a_credential(api_http) -> None:
    status, problem = await anonymous(api_http, "POST", PATH, json={"message": "hi"})
    assert status == 401 and problem["code"] == "unauthorized"
    status, _ = await anonymous(api_http, "GET", PATH)
    assert (status, problem["code"]) == (401, "unauthorized")


# --- listing ----------------------------------------------------------------------------------


async def test_list_pages_and_filters_the_callers_requests(actors) -> None:
    agent = await actors.agent()
    made = [await create(agent, f"m{n}") for n in range(4)]
    done = made[1]
    await sign(agent, done["request_id"], agent.sign(done["signing_payload"]))

    status, everything = await agent.call("GET", PATH)
    assert status == 200 and everything["total"] == 4
    assert everything["limit"] == limits.SIGNING_REQUESTS_PAGE.default
    assert [i["request_id"] for i in everything["items"]] == [
        m["request_id"] for m in reversed(made)
    ]
    status, page = await agent.call("GET", PATH, params={"limit": "2", "offset": "1"})
    assert [i["request_id"] for i in page["items"]] == [made[2]["request_id"], done["request_id"]]
    assert page["total"] == 4 and page["offset"] == 1
    status, completed = await agent.call("GET", PATH, params={"status": "completed"})
    assert [i["request_id"] for i in completed["items"]] == [done["request_id"]]
    assert completed["items"][0]["valid"] is True
    status, pending = await agent.call("GET", PATH, params={"status": "pending"})
    assert pending["total"] == 3


@pytest.mark.parametrize("offset", [2**31, 10**20])
async def test_an_offset_beyond_a_postgres_integer_is_400(actors, offset: int) -> None:
    """A page offset goes into SQL: past an integer it is refused, not an overflow (500)."""
    agent = await actors.agent()
    status, problem = await agent.call("GET", PATH, params={"offset": str(offset)})
    assert (status, problem["code"]) == (400, "validation-failed")
    assert problem["errors"][0]["pointer"] == "/query/offset", problem
    status, page = await agent.call("GET", PATH, params={"offset": str(2**31 - 1)})
    assert status == 200 and page["items"] == [], page


@pytest.mark.parametrize(
    "params",
    [
        {"limit": "0"},
        {"limit": str(limits.SIGNING_REQUESTS_PAGE.max + 1)},
        {"offset": "-1"},
        {"status": "signed"},
        {"cursor": "x"},
    ],
    ids=["limit-0", "limit-over-max", "negative-offset", "unknown-status", "unknown-param"],
)
async def test_bad_list_queries_are_400(actors, params: dict[str, str]) -> None:
    agent = await actors.agent()
    status, problem = await agent.call("GET", PATH, params=params)
    assert status == 400 and problem["code"] == "validation-failed"


# --- public verification ----------------------------------------------------------------------


async def test_verify_by_public_key_and_by_fingerprint(actors, api_http) -> None:
    agent = await actors.agent()
    signature = agent.sign("a public statement")
    by_key = {
        "message": "a public statement",
        "signature": signature,
        "publicKey": agent.public_key,
    }
    by_fp = {"message": "a public statement", "signature": signature}
    by_fp["fingerprint"] = agent.fingerprint.lower()

    assert await anonymous(api_http, "POST", "/crypto/verify", json=by_key) == (
        200,
        {"valid": True},
    )
    assert await anonymous(api_http, "POST", "/crypto/verify", json=by_fp) == (
        200,
        {"valid": True},
    )
    tampered = {**by_key, "message": "a different statement"}
    assert await anonymous(api_http, "POST", "/crypto/verify", json=tampered) == (
        200,
        {"valid": False},
    )
    stranger = await actors.agent()
    wrong_signer = {**by_key, "publicKey": stranger.public_key}
    assert (await anonymous(api_http, "POST", "/crypto/verify", json=wrong_signer))[1] == {
        "valid": False
    }


async def test_verify_a_signing_request_signature_with_its_nonce(actors, api_http) -> None:
    agent = await actors.agent()
    created = await create(agent, "entry cid")
    signature = agent.sign(created["signing_payload"])
    body = {
        "message": "entry cid",
        "nonce": created["nonce"],
        "signature": signature,
        "fingerprint": agent.fingerprint,
    }
    assert await anonymous(api_http, "POST", "/crypto/verify", json=body) == (
        200,
        {"valid": True},
    )
    without_nonce = {k: v for k, v in body.items() if k != "nonce"}
    assert (await anonymous(api_http, "POST", "/crypto/verify", json=without_nonce))[1] == {
        "valid": False
    }


@pytest.mark.parametrize(
    ("change", "status"),
    [
        ({"fingerprint": "0000-0000-0000-0000", "publicKey": None}, 404),
        ({"fingerprint": "ABCD-ABCD-ABCD-ABCD"}, 400),  # both signers named
        ({"publicKey": None}, 400),  # no signer
        ({"signature": "bm90IGEgc2lnbmF0dXJl"}, 400),  # base64, but not 64 bytes
        ({"publicKey": "ed25519:AAAA"}, 400),  # not a 32-byte key
        ({"extra": 1}, 400),
    ],
    ids=["unknown-fingerprint", "two-signers", "no-signer", "short-signature", "bad-key", "extra"],
)
async def test_verify_refuses_bad_input(
    actors, api_http, change: dict[str, Any], status: int
) -> None:
    agent = await actors.agent()
    body: dict[str, Any] = {
        "message": "m",
        "signature": agent.sign("m"),
        "publicKey": agent.public_key,
        **change,
    }
    body = {k: v for k, v in body.items() if v is not None}
    answer, problem = await anonymous(api_http, "POST", "/crypto/verify", json=body)
    assert answer == status, problem
