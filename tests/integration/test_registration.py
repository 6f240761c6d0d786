"""Agent registration on the real stack (SPEC 4.1, 7; DECISIONS "Identity and authentication"):
the happy path and what it leaves in Postgres, every way a request is refused, the compensation
of steps 4 to 6 under injected activity faults, and two registrations racing for one voucher."""

from __future__ import annotations

import asyncio
import base64
import re
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import nacl.signing
import pytest
from temporalio import activity
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ApplicationError
from temporalio.worker import Worker

from schemas.identity import RegistrationInput
from schemas.kernel.crypto import fingerprint, hash_secret, new_secret
from workers.admin import issue_bootstrap_voucher
from workers.interceptors import DomainErrorInterceptor
from workers.registry import WORKFLOWS, ActivityDeps, activities
from workflows.registration import RegistrationWorkflow

REGISTER_FIELDS = {"identityId", "fingerprint", "publicKey", "clientId", "clientSecret"}
SPKI_ED25519_PREFIX = bytes.fromhex("302a300506032b6570032100")


def new_public_key() -> str:
    raw = bytes(nacl.signing.SigningKey.generate().verify_key)
    return "ed25519:" + base64.b64encode(raw).decode()


def raw_key(public_key: str) -> bytes:
    return base64.b64decode(public_key.removeprefix("ed25519:"))


@pytest.fixture(scope="module")
async def http(stack) -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(base_url=stack.base_url) as session:
        yield session


async def post_register(http: aiohttp.ClientSession, **body: Any) -> tuple[int, dict[str, Any]]:
    async with http.post("/auth/register", json=body) as response:
        return response.status, await response.json(content_type=None)


async def new_voucher(stack) -> str:
    return (await issue_bootstrap_voucher(stack.temporal, stack.settings)).code


async def identities_for_key(db_pool, public_key: str) -> int:
    return await db_pool.fetchval(
        "SELECT count(*) FROM identities WHERE traits->>'public_key' = $1", public_key
    )


def pointers(problem: dict[str, Any]) -> list[str]:
    return [error["pointer"] for error in problem.get("errors") or []]


# --- happy path -----------------------------------------------------------------------------


async def test_register_returns_the_spec_fields_and_writes_every_row(stack, http, db_pool) -> None:
    voucher = await new_voucher(stack)
    public_key = new_public_key()

    status, body = await post_register(http, public_key=public_key, voucher_code=voucher)

    assert status == 200, body
    assert set(body) == REGISTER_FIELDS
    assert body["publicKey"] == public_key
    assert body["fingerprint"] == fingerprint(raw_key(public_key))
    assert re.fullmatch(r"[0-9A-F]{4}(-[0-9A-F]{4}){3}", body["fingerprint"])
    identity_id = uuid.UUID(body["identityId"])

    identity = await db_pool.fetchrow(
        "SELECT schema_id, traits, state FROM identities WHERE id = $1", identity_id
    )
    assert identity["schema_id"] == "agent"
    assert identity["state"] == "active"
    assert identity["traits"]["public_key"] == public_key
    assert identity["traits"]["voucher_code"] == voucher

    agent = await db_pool.fetchrow(
        "SELECT id, public_key, fingerprint FROM agents WHERE identity_id = $1", identity_id
    )
    assert agent["public_key"] == public_key
    assert agent["fingerprint"] == body["fingerprint"]

    redeemed = await db_pool.fetchrow(
        "SELECT redeemed_by, redeemed_at FROM agent_vouchers WHERE code = $1", voucher
    )
    assert redeemed["redeemed_by"] == agent["id"]
    assert redeemed["redeemed_at"] is not None

    client = await db_pool.fetchrow(
        "SELECT identity_id, secret_hash, grant_types, metadata FROM oauth_clients "
        "WHERE client_id = $1",
        body["clientId"],
    )
    assert client["identity_id"] == identity_id
    assert client["grant_types"] == ["client_credentials"]
    assert client["secret_hash"] != body["clientSecret"]
    assert body["clientSecret"] not in client["secret_hash"]
    assert re.fullmatch(r"[0-9a-f]{64}", client["secret_hash"])
    assert client["metadata"]["identity_id"] == str(identity_id)
    assert client["metadata"]["fingerprint"] == body["fingerprint"]
    assert client["metadata"]["public_key"] == public_key
    voucher_id = await db_pool.fetchval("SELECT id FROM agent_vouchers WHERE code = $1", voucher)
    assert client["metadata"]["proof"] == {"kind": "voucher", "voucherId": str(voucher_id)}

    self_tuples = await db_pool.fetch(
        "SELECT subject_ns, subject_id FROM relation_tuples "
        "WHERE namespace = 'Agent' AND relation = 'self' AND object_id = $1",
        str(agent["id"]),
    )
    assert [(t["subject_ns"], t["subject_id"]) for t in self_tuples] == [
        ("Agent", str(agent["id"]))
    ]


async def test_registered_agent_is_public_by_fingerprint(stack, http) -> None:
    public_key = new_public_key()
    status, body = await post_register(
        http, public_key=public_key, voucher_code=await new_voucher(stack)
    )
    assert status == 200, body
    async with http.get(f"/agents/{body['fingerprint'].lower()}") as response:
        assert response.status == 200
        profile = await response.json()
    assert profile["publicKey"] == public_key
    assert profile["fingerprint"] == body["fingerprint"]


# --- refused vouchers: 403, nothing left behind --------------------------------------------


async def _unknown_voucher(stack, db_pool) -> str:
    return uuid.uuid4().hex + uuid.uuid4().hex


async def _redeemed_voucher(stack, db_pool) -> str:
    code = await new_voucher(stack)
    async with aiohttp.ClientSession(base_url=stack.base_url) as session:
        status, body = await post_register(session, public_key=new_public_key(), voucher_code=code)
    assert status == 200, body
    return code


async def _expired_voucher(stack, db_pool) -> str:
    code = await new_voucher(stack)
    await db_pool.execute(
        "UPDATE agent_vouchers SET expires_at = now() - interval '1 minute' WHERE code = $1", code
    )
    return code


@pytest.mark.parametrize(
    "make_voucher",
    [_unknown_voucher, _redeemed_voucher, _expired_voucher],
    ids=["unknown", "already-redeemed", "expired"],
)
async def test_bad_voucher_is_403_and_leaves_no_identity(
    stack, http, db_pool, make_voucher: Callable[..., Any]
) -> None:
    code = await make_voucher(stack, db_pool)
    public_key = new_public_key()

    status, problem = await post_register(http, public_key=public_key, voucher_code=code)

    assert status == 403, problem
    assert problem["code"] == "voucher-rejected"
    assert problem["status"] == 403
    assert await identities_for_key(db_pool, public_key) == 0
    assert (
        await db_pool.fetchval("SELECT count(*) FROM agents WHERE public_key = $1", public_key) == 0
    )


# --- malformed requests: 400 with a pointer, 415 ----------------------------------------------


@pytest.mark.parametrize(
    "voucher_code",
    [
        "a" * 63,
        "A" * 64,
        "g" * 64,
        "a" * 65,
    ],
    ids=["63-chars", "upper-case", "not-hex", "65-chars"],
)
async def test_malformed_voucher_is_400_pointing_at_it(stack, http, voucher_code: str) -> None:
    status, problem = await post_register(
        http, public_key=new_public_key(), voucher_code=voucher_code
    )
    assert status == 400, problem
    assert problem["code"] == "validation-failed"
    assert pointers(problem) == ["/voucher_code"]


def _malformed_keys() -> dict[str, str]:
    raw = raw_key(new_public_key())
    return {
        "not-base64": "ed25519:not*base64*at*all",
        "31-bytes": "ed25519:" + base64.b64encode(raw[:31]).decode(),
        "33-bytes": "ed25519:" + base64.b64encode(raw + b"\x00").decode(),
        "spki-44-bytes": "ed25519:" + base64.b64encode(SPKI_ED25519_PREFIX + raw).decode(),
        "missing-prefix": base64.b64encode(raw).decode(),
        "other-algorithm": "x25519:" + base64.b64encode(raw).decode(),
        "empty": "",
    }


@pytest.mark.parametrize("name", list(_malformed_keys()))
async def test_malformed_public_key_is_400_pointing_at_it(stack, http, db_pool, name: str) -> None:
    public_key = _malformed_keys()[name]
    status, problem = await post_register(
        http, public_key=public_key, voucher_code=await new_voucher(stack)
    )
    assert status == 400, problem
    assert problem["code"] == "validation-failed"
    assert pointers(problem) == ["/public_key"]
    assert await identities_for_key(db_pool, public_key) == 0


async def test_unknown_body_field_is_400_naming_it(stack, http) -> None:
    status, problem = await post_register(
        http,
        public_key=new_public_key(),
        voucher_code=await new_voucher(stack),
        nickname="eve",
    )
    assert (status, problem["code"]) == (400, "validation-failed"), problem
    assert "/nickname" in pointers(problem)
    assert "nickname" in problem["detail"]


async def test_missing_fields_are_400_with_a_pointer_each(stack, http) -> None:
    status, problem = await post_register(http)
    assert status == 400, problem
    assert sorted(pointers(problem)) == ["/public_key", "/voucher_code"]


@pytest.mark.parametrize("raw", [b"{not json", b'["public_key"]', b"null"], ids=str)
async def test_non_json_or_non_object_body_is_400(stack, http, raw: bytes) -> None:
    async with http.post(
        "/auth/register", data=raw, headers={"Content-Type": "application/json"}
    ) as response:
        assert response.status == 400
        assert response.content_type == "application/problem+json"
        assert (await response.json(content_type=None))["code"] == "validation-failed"


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded"])
async def test_wrong_content_type_is_415(stack, http, content_type: str) -> None:
    async with http.post(
        "/auth/register",
        data=b"public_key=x&voucher_code=y",
        headers={"Content-Type": content_type},
    ) as response:
        assert response.status == 415
        assert response.content_type == "application/problem+json"
        assert (await response.json(content_type=None))["code"] == "unsupported-media-type"


# --- compensation of steps 4 to 6 under an injected fault ---------------------------------

STEP_ACTIVITIES = {
    "4-bind-agent": "identity.bind_agent",
    "5-self-tuple": "permissions.write_tuples",
    "6-oauth-client": "identity.create_oauth_client",
}


def failing_activity(name: str) -> Callable[..., Any]:
    """Fault injection: the real activity of this name is replaced by one that always fails."""

    @activity.defn(name=name)
    async def fail(inp: Any) -> None:
        raise ApplicationError(f"injected fault in {name}", non_retryable=True)

    return fail


def activity_name(fn: Callable[..., Any]) -> str:
    return activity._Definition.must_from_callable(fn).name


def worker_with(stack, db_pool, task_queue: str, replaced: dict[str, Callable[..., Any]]) -> Worker:
    real = activities(ActivityDeps(db_pool, stack.settings.secret_ring))
    assert set(replaced) <= {activity_name(fn) for fn in real}
    kept = [fn for fn in real if activity_name(fn) not in replaced]
    return Worker(
        stack.temporal,
        task_queue=task_queue,
        workflows=list(WORKFLOWS),
        activities=[*kept, *replaced.values()],
        interceptors=[DomainErrorInterceptor()],
    )


def registration_input(stack, public_key: str, voucher: str) -> RegistrationInput:
    return RegistrationInput(
        public_key=public_key,
        fingerprint=fingerprint(raw_key(public_key)),
        voucher_code=voucher,
        identity_id=uuid.uuid4(),
        agent_id=uuid.uuid4(),
        client_id=str(uuid.uuid4()),
        client_secret_hash=hash_secret(new_secret("service_cs_"), stack.settings.secret_bytes),
    )


async def run_registration(stack, db_pool, inp: RegistrationInput, replaced: dict) -> None:
    task_queue = f"faulty-{uuid.uuid4().hex[:8]}"
    async with worker_with(stack, db_pool, task_queue, replaced):
        await stack.temporal.execute_workflow(
            RegistrationWorkflow.run,
            inp,
            id=f"test-registration/{uuid.uuid4()}",
            task_queue=task_queue,
        )


@pytest.mark.parametrize("step", list(STEP_ACTIVITIES))
async def test_failure_at_steps_4_to_6_deletes_the_identity(
    stack, http, db_pool, step: str
) -> None:
    name = STEP_ACTIVITIES[step]
    voucher = await new_voucher(stack)
    public_key = new_public_key()
    inp = registration_input(stack, public_key, voucher)

    with pytest.raises(WorkflowFailureError) as failed:
        await run_registration(stack, db_pool, inp, {name: failing_activity(name)})

    assert "injected fault" in str(failed.value.cause) + str(failed.value.cause.__cause__)
    assert (
        await db_pool.fetchval("SELECT count(*) FROM identities WHERE id = $1", inp.identity_id)
        == 0
    )
    assert await identities_for_key(db_pool, public_key) == 0
    assert (
        await db_pool.fetchval(
            "SELECT count(*) FROM oauth_clients WHERE client_id = $1 OR identity_id = $2",
            inp.client_id,
            inp.identity_id,
        )
        == 0
    )
    # No agent stays bound to the deleted identity (ON DELETE SET NULL unbinds it).
    assert (
        await db_pool.fetchval(
            "SELECT count(*) FROM agents WHERE public_key = $1 AND identity_id IS NOT NULL",
            public_key,
        )
        == 0
    )
    voucher_row = await db_pool.fetchrow(
        "SELECT redeemed_at, redeemed_by FROM agent_vouchers WHERE code = $1", voucher
    )
    if step.startswith("4"):
        assert voucher_row["redeemed_at"] is None
        assert voucher_row["redeemed_by"] is None
        assert (
            await db_pool.fetchval("SELECT count(*) FROM agents WHERE public_key = $1", public_key)
            == 0
        )
    else:
        # The unbound agent row can be bound again: the same key registers with a new voucher.
        status, body = await post_register(
            http, public_key=public_key, voucher_code=await new_voucher(stack)
        )
        assert status == 200, body
        assert await identities_for_key(db_pool, public_key) == 1


# --- two registrations racing for one voucher ---------------------------------------------


async def test_concurrent_registrations_with_one_voucher_one_wins(stack, http, db_pool) -> None:
    voucher = await new_voucher(stack)
    keys = [new_public_key(), new_public_key()]

    results = await asyncio.gather(
        *(post_register(http, public_key=key, voucher_code=voucher) for key in keys)
    )

    statuses = sorted(status for status, _ in results)
    assert statuses[0] == 200 and statuses[1] in (403, 409), results
    winner = next(key for key, (status, _) in zip(keys, results, strict=True) if status == 200)
    loser_problem = next(body for status, body in results if status != 200)
    assert loser_problem["code"] in ("voucher-rejected", "operation-running")

    bound = await db_pool.fetch(
        "SELECT id, public_key FROM agents WHERE public_key = ANY($1) AND identity_id IS NOT NULL",
        keys,
    )
    assert [row["public_key"] for row in bound] == [winner]
    assert (
        await db_pool.fetchval("SELECT redeemed_by FROM agent_vouchers WHERE code = $1", voucher)
        == (bound[0]["id"])
    )
    assert (
        await db_pool.fetchval(
            "SELECT count(*) FROM identities WHERE traits->>'voucher_code' = $1", voucher
        )
        == 1
    )
    assert (
        await db_pool.fetchval(
            "SELECT count(*) FROM oauth_clients c JOIN identities i ON i.id = c.identity_id "
            "WHERE i.traits->>'voucher_code' = $1",
            voucher,
        )
        == 1
    )


@activity.defn(name="identity.check_voucher")
async def voucher_still_open(inp: Any) -> None:
    """The race's window made deterministic: at check time the voucher was still open."""


async def test_losing_the_voucher_race_leaves_no_agent_row(stack, http, db_pool) -> None:
    voucher = await new_voucher(stack)
    status, body = await post_register(http, public_key=new_public_key(), voucher_code=voucher)
    assert status == 200, body
    loser_key = new_public_key()
    inp = registration_input(stack, loser_key, voucher)

    with pytest.raises(WorkflowFailureError):
        await run_registration(stack, db_pool, inp, {"identity.check_voucher": voucher_still_open})

    assert await identities_for_key(db_pool, loser_key) == 0
    assert (
        await db_pool.fetchval("SELECT count(*) FROM agents WHERE public_key = $1", loser_key) == 0
    )


# --- a key that is already registered -------------------------------------------------------


async def test_registering_a_bound_key_again_does_not_take_the_agent_over(
    stack, http, db_pool
) -> None:
    public_key = new_public_key()
    status, first = await post_register(
        http, public_key=public_key, voucher_code=await new_voucher(stack)
    )
    assert status == 200, first

    status, second = await post_register(
        http, public_key=public_key, voucher_code=await new_voucher(stack)
    )

    assert (status, second["code"]) == (409, "agent-exists"), second
    assert await db_pool.fetchval(
        "SELECT identity_id FROM agents WHERE public_key = $1", public_key
    ) == uuid.UUID(first["identityId"])
    form = {
        "grant_type": "client_credentials",
        "client_id": first["clientId"],
        "client_secret": first["clientSecret"],
    }
    async with http.post("/oauth2/token", data=form) as response:
        assert response.status == 200
