"""Key-signed recovery on the real stack (SPEC 4.1, 7; DECISIONS "Identity and authentication"):
each refusal of /recovery/verify is its own test with its own problem code, then the one-time
code flow: wrong codes, the five-try limit, single use, unknown flows, and the secret rotation
that kills the old secret and every token issued under it."""

from __future__ import annotations

import base64
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import nacl.signing
import pytest
from histories import keep, patches_of

from schemas.kernel.crypto import new_recovery_challenge
from workers.admin import issue_bootstrap_voucher
from workflows.recovery import VERIFY_BEFORE_CONSUME_PATCH, recovery_verify_workflow_id

FIVE_MINUTES_MS = 5 * 60 * 1000


@dataclass(frozen=True)
class Agent:
    signing_key: nacl.signing.SigningKey
    public_key: str
    identity_id: str
    client_id: str
    client_secret: str


def new_key() -> tuple[nacl.signing.SigningKey, str]:
    key = nacl.signing.SigningKey.generate()
    return key, "ed25519:" + base64.b64encode(bytes(key.verify_key)).decode()


def sign(key: nacl.signing.SigningKey, challenge: str) -> str:
    return base64.b64encode(key.sign(challenge.encode()).signature).decode()


def now_ms() -> int:
    return int(time.time() * 1000)


@pytest.fixture(scope="module")
async def http(stack) -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(base_url=stack.base_url) as session:
        yield session


async def register(stack, http: aiohttp.ClientSession) -> Agent:
    voucher = await issue_bootstrap_voucher(stack.temporal, stack.settings)
    key, public_key = new_key()
    async with http.post(
        "/auth/register", json={"public_key": public_key, "voucher_code": voucher.code}
    ) as response:
        body = await response.json()
        assert response.status == 200, body
    return Agent(key, public_key, body["identityId"], body["clientId"], body["clientSecret"])


@pytest.fixture(scope="module")
async def agent(stack, http) -> Agent:
    return await register(stack, http)


async def post(http: aiohttp.ClientSession, path: str, body: Any) -> tuple[int, Any]:
    async with http.post(path, json=body) as response:
        return response.status, await response.json(content_type=None)


async def challenge_for(http: aiohttp.ClientSession, public_key: str) -> dict[str, str]:
    status, body = await post(http, "/recovery/challenge", {"publicKey": public_key})
    assert status == 200, body
    return body


async def verify(
    http: aiohttp.ClientSession, challenge: str, mac: str, signature: str, public_key: str
) -> tuple[int, Any]:
    return await post(
        http,
        "/recovery/verify",
        {"challenge": challenge, "hmac": mac, "signature": signature, "publicKey": public_key},
    )


def assert_problem(status: int, problem: Any, expected_status: int, code: str) -> None:
    assert status == expected_status, problem
    assert problem["status"] == expected_status
    assert problem["code"] == code, problem


# --- the challenge ------------------------------------------------------------------------


async def test_challenge_has_the_decided_form(stack, http, agent) -> None:
    before = now_ms()
    body = await challenge_for(http, agent.public_key)
    prefix, kind, algorithm, key_b64, nonce, timestamp = body["challenge"].split(":")
    assert (prefix, kind) == ("service", "recovery")
    assert f"{algorithm}:{key_b64}" == agent.public_key
    assert len(nonce) == 64 and int(nonce, 16) >= 0
    assert before <= int(timestamp) <= now_ms()
    assert len(body["hmac"]) == 64


async def test_challenge_for_an_unknown_key_is_still_issued(stack, http) -> None:
    _, unknown = new_key()
    body = await challenge_for(http, unknown)
    assert unknown in body["challenge"]


async def test_challenge_for_a_malformed_key_is_400(stack, http) -> None:
    status, problem = await post(http, "/recovery/challenge", {"publicKey": "ed25519:AAAA"})
    assert_problem(status, problem, 400, "public-key-invalid")


# --- every refusal of /recovery/verify ----------------------------------------------------


async def test_bad_hmac_is_refused(stack, http, agent) -> None:
    issued = await challenge_for(http, agent.public_key)
    wrong_mac = ("0" if issued["hmac"][0] != "0" else "1") + issued["hmac"][1:]
    status, problem = await verify(
        http,
        issued["challenge"],
        wrong_mac,
        sign(agent.signing_key, issued["challenge"]),
        agent.public_key,
    )
    assert_problem(status, problem, 400, "challenge-hmac-invalid")


async def test_challenge_not_issued_by_us_is_refused(stack, http, agent) -> None:
    """A well-formed challenge under another server's secret fails the HMAC."""
    challenge, mac = new_recovery_challenge(
        agent.public_key, b"another-server-secret-0123456789abcdef", now_ms()
    )
    status, problem = await verify(
        http, challenge, mac, sign(agent.signing_key, challenge), agent.public_key
    )
    assert_problem(status, problem, 400, "challenge-hmac-invalid")


async def test_expired_challenge_is_refused(stack, http, agent) -> None:
    challenge, mac = new_recovery_challenge(
        agent.public_key, stack.settings.secret_bytes, now_ms() - FIVE_MINUTES_MS - 60_000
    )
    status, problem = await verify(
        http, challenge, mac, sign(agent.signing_key, challenge), agent.public_key
    )
    assert_problem(status, problem, 400, "challenge-expired")


async def test_challenge_just_inside_five_minutes_is_accepted(stack, http) -> None:
    fresh = await register(stack, http)
    challenge, mac = new_recovery_challenge(
        fresh.public_key, stack.settings.secret_bytes, now_ms() - FIVE_MINUTES_MS + 20_000
    )
    status, body = await verify(
        http, challenge, mac, sign(fresh.signing_key, challenge), fresh.public_key
    )
    assert status == 200, body
    nonce = challenge.split(":")[4]
    verified = stack.temporal.get_workflow_handle(recovery_verify_workflow_id(nonce))
    # the nonce is checked, the signature verified, and only then the nonce consumed
    assert patches_of(await verified.fetch_history()) >= {VERIFY_BEFORE_CONSUME_PATCH}
    await keep(verified, "recovery_verify")


async def test_challenge_from_the_future_is_refused(stack, http, agent) -> None:
    challenge, mac = new_recovery_challenge(
        agent.public_key, stack.settings.secret_bytes, now_ms() + 60_000
    )
    status, problem = await verify(
        http, challenge, mac, sign(agent.signing_key, challenge), agent.public_key
    )
    assert_problem(status, problem, 400, "challenge-from-future")


async def test_public_key_mismatch_is_refused(stack, http, agent) -> None:
    other = await register(stack, http)
    issued = await challenge_for(http, agent.public_key)
    status, problem = await verify(
        http,
        issued["challenge"],
        issued["hmac"],
        sign(other.signing_key, issued["challenge"]),
        other.public_key,
    )
    assert_problem(status, problem, 400, "challenge-key-mismatch")


@pytest.mark.parametrize(
    "challenge",
    [
        "garbage",
        "service:recovery:ed25519:AAAA:00:1",
        "other:recovery:{key}:" + "a" * 64 + ":1700000000000",
        "service:recovery:{key}:" + "A" * 64 + ":1700000000000",
        "service:recovery:{key}:" + "a" * 64 + ":-5",
        "service:recovery:{key}:" + "a" * 64 + ":1700000000000:extra",
    ],
    ids=["garbage", "short-key", "wrong-prefix", "upper-nonce", "negative-ts", "trailing"],
)
async def test_malformed_challenge_is_refused(stack, http, agent, challenge: str) -> None:
    challenge = challenge.format(key=agent.public_key)
    from schemas.kernel.crypto import recovery_hmac

    mac = recovery_hmac(challenge, stack.settings.secret_bytes)  # even a valid HMAC
    status, problem = await verify(
        http, challenge, mac, sign(agent.signing_key, challenge), agent.public_key
    )
    assert_problem(status, problem, 400, "challenge-malformed")


@pytest.mark.parametrize(
    "field,value",
    [("hmac", "not-hex"), ("challenge", "x" * 501), ("signature", "A" * 89)],
)
async def test_out_of_bounds_fields_are_400_validation(
    stack, http, agent, field: str, value: str
) -> None:
    issued = await challenge_for(http, agent.public_key)
    body = {
        "challenge": issued["challenge"],
        "hmac": issued["hmac"],
        "signature": sign(agent.signing_key, issued["challenge"]),
        "publicKey": agent.public_key,
        field: value,
    }
    status, problem = await post(http, "/recovery/verify", body)
    assert_problem(status, problem, 400, "validation-failed")
    assert [e["pointer"] for e in problem["errors"]] == [f"/{field}"]


async def test_unknown_agent_is_refused_like_a_bad_signature(stack, http) -> None:
    key, unknown = new_key()
    issued = await challenge_for(http, unknown)
    status, problem = await verify(
        http, issued["challenge"], issued["hmac"], sign(key, issued["challenge"]), unknown
    )
    assert_problem(status, problem, 400, "invalid-signature")


async def test_bad_signature_is_refused(stack, http, agent) -> None:
    issued = await challenge_for(http, agent.public_key)
    impostor, _ = new_key()
    status, problem = await verify(
        http,
        issued["challenge"],
        issued["hmac"],
        sign(impostor, issued["challenge"]),
        agent.public_key,
    )
    assert_problem(status, problem, 400, "invalid-signature")


async def test_signature_over_another_message_is_refused(stack, http, agent) -> None:
    issued = await challenge_for(http, agent.public_key)
    status, problem = await verify(
        http,
        issued["challenge"],
        issued["hmac"],
        sign(agent.signing_key, "hello"),
        agent.public_key,
    )
    assert_problem(status, problem, 400, "invalid-signature")


async def test_reused_challenge_is_refused(stack, http) -> None:
    fresh = await register(stack, http)
    issued = await challenge_for(http, fresh.public_key)
    signature = sign(fresh.signing_key, issued["challenge"])

    first = await verify(http, issued["challenge"], issued["hmac"], signature, fresh.public_key)
    assert first[0] == 200, first
    status, problem = await verify(
        http, issued["challenge"], issued["hmac"], signature, fresh.public_key
    )
    assert_problem(status, problem, 400, "challenge-already-used")


async def test_a_wrong_signature_does_not_use_up_the_challenge(stack, http) -> None:
    """Spec 4.1: the nonce is stored only after the signature verifies, so an impostor's try
    leaves the agent's own signature on the same challenge good; that success uses it up."""
    fresh = await register(stack, http)
    issued = await challenge_for(http, fresh.public_key)
    impostor, _ = new_key()

    wrong = await verify(
        http,
        issued["challenge"],
        issued["hmac"],
        sign(impostor, issued["challenge"]),
        fresh.public_key,
    )
    assert_problem(*wrong, 400, "invalid-signature")
    signature = sign(fresh.signing_key, issued["challenge"])
    status, body = await verify(
        http, issued["challenge"], issued["hmac"], signature, fresh.public_key
    )
    assert status == 200, body
    assert body["recoveryCode"]
    replay = await verify(http, issued["challenge"], issued["hmac"], signature, fresh.public_key)
    assert_problem(*replay, 400, "challenge-already-used")


async def test_a_used_challenge_is_refused_before_its_signature_is_checked(stack, http) -> None:
    """The spec's order: nonce unused, then the signature. A replay with a bad signature is
    refused as a replay."""
    fresh = await register(stack, http)
    issued = await challenge_for(http, fresh.public_key)
    good = sign(fresh.signing_key, issued["challenge"])
    assert (await verify(http, issued["challenge"], issued["hmac"], good, fresh.public_key))[
        0
    ] == 200
    impostor, _ = new_key()
    replay = await verify(
        http,
        issued["challenge"],
        issued["hmac"],
        sign(impostor, issued["challenge"]),
        fresh.public_key,
    )
    assert_problem(*replay, 400, "challenge-already-used")


# --- the code flow ------------------------------------------------------------------------


async def start_recovery(http: aiohttp.ClientSession, agent: Agent) -> tuple[str, str]:
    """A verified recovery: (flow path with query, one-time code)."""
    issued = await challenge_for(http, agent.public_key)
    status, body = await verify(
        http,
        issued["challenge"],
        issued["hmac"],
        sign(agent.signing_key, issued["challenge"]),
        agent.public_key,
    )
    assert status == 200, body
    url = urlsplit(body["recoveryFlowUrl"])
    return f"{url.path}?{url.query}", body["recoveryCode"]


async def redeem(http: aiohttp.ClientSession, flow: str, code: str) -> tuple[int, Any]:
    return await post(http, flow, {"method": "code", "code": code})


async def token_status(http: aiohttp.ClientSession, client_id: str, secret: str) -> int:
    async with http.post(
        "/oauth2/token",
        data={"grant_type": "client_credentials", "client_id": client_id, "client_secret": secret},
    ) as response:
        return response.status


async def token(http: aiohttp.ClientSession, client_id: str, secret: str) -> str:
    async with http.post(
        "/oauth2/token",
        data={"grant_type": "client_credentials", "client_id": client_id, "client_secret": secret},
    ) as response:
        body = await response.json()
        assert response.status == 200, body
        return str(body["access_token"])


async def whoami_status(http: aiohttp.ClientSession, access_token: str) -> int:
    async with http.get(
        "/agents/whoami", headers={"Authorization": f"Bearer {access_token}"}
    ) as response:
        return response.status


async def test_verified_recovery_returns_a_code_and_the_flow_url(stack, http) -> None:
    fresh = await register(stack, http)
    issued = await challenge_for(http, fresh.public_key)
    status, body = await verify(
        http,
        issued["challenge"],
        issued["hmac"],
        sign(fresh.signing_key, issued["challenge"]),
        fresh.public_key,
    )
    assert status == 200, body
    assert set(body) == {"recoveryCode", "recoveryFlowUrl"}
    prefix = f"{stack.base_url}/self-service/recovery?flow="
    assert body["recoveryFlowUrl"].startswith(prefix)
    uuid.UUID(body["recoveryFlowUrl"].removeprefix(prefix))


async def test_wrong_code_is_400(stack, http) -> None:
    fresh = await register(stack, http)
    flow, code = await start_recovery(http, fresh)
    status, problem = await redeem(http, flow, code + "x")
    assert_problem(status, problem, 400, "invalid-recovery-code")
    # the wrong try cost nothing else: the right code still works
    status, body = await redeem(http, flow, code)
    assert status == 200, body


async def test_after_five_wrong_codes_the_right_code_is_gone(stack, http) -> None:
    fresh = await register(stack, http)
    flow, code = await start_recovery(http, fresh)
    for _ in range(5):
        status, problem = await redeem(http, flow, "wrong-code")
        assert_problem(status, problem, 400, "invalid-recovery-code")

    status, problem = await redeem(http, flow, code)

    assert status == 410, problem
    assert problem["code"] == "recovery-flow-exhausted"
    assert await token_status(http, fresh.client_id, fresh.client_secret) == 200


async def test_a_used_code_cannot_be_redeemed_twice(stack, http) -> None:
    fresh = await register(stack, http)
    flow, code = await start_recovery(http, fresh)
    status, first = await redeem(http, flow, code)
    assert status == 200, first

    status, problem = await redeem(http, flow, code)

    assert status == 410, problem
    assert problem["code"] == "recovery-flow-used"
    # the first redemption's secret is still the live one
    assert await token_status(http, fresh.client_id, first["clientSecret"]) == 200


async def test_expired_flow_is_gone(stack, http, db_pool) -> None:
    fresh = await register(stack, http)
    flow, code = await start_recovery(http, fresh)
    flow_id = uuid.UUID(flow.rsplit("=", 1)[1])
    await db_pool.execute(
        "UPDATE recovery_flows SET expires_at = now() - interval '1 second' WHERE id = $1",
        flow_id,
    )
    status, problem = await redeem(http, flow, code)
    assert status == 410, problem
    assert problem["code"] == "recovery-flow-expired"


async def test_unknown_flow_is_404(stack, http) -> None:
    status, problem = await redeem(http, f"/self-service/recovery?flow={uuid.uuid4()}", "code")
    assert_problem(status, problem, 404, "recovery-flow-not-found")


@pytest.mark.parametrize(
    "path,body",
    [
        ("/self-service/recovery", {"method": "code", "code": "x"}),
        ("/self-service/recovery?flow=not-a-uuid", {"method": "code", "code": "x"}),
        (f"/self-service/recovery?flow={uuid.uuid4()}", {"method": "password", "code": "x"}),
        (f"/self-service/recovery?flow={uuid.uuid4()}", {"method": "code", "code": ""}),
    ],
    ids=["no-flow", "bad-flow-id", "other-method", "empty-code"],
)
async def test_malformed_redeem_is_400(stack, http, path: str, body: dict[str, str]) -> None:
    status, problem = await post(http, path, body)
    assert_problem(status, problem, 400, "validation-failed")


async def test_new_secret_works_and_the_old_secret_and_its_token_die(stack, http) -> None:
    fresh = await register(stack, http)
    old_token = await token(http, fresh.client_id, fresh.client_secret)
    assert await whoami_status(http, old_token) == 200
    flow, code = await start_recovery(http, fresh)

    status, completed = await redeem(http, flow, code)

    assert status == 200, completed
    assert completed["clientId"] == fresh.client_id
    assert completed["clientSecret"] != fresh.client_secret
    new_token = await token(http, fresh.client_id, completed["clientSecret"])
    async with http.get(
        "/agents/whoami", headers={"Authorization": f"Bearer {new_token}"}
    ) as response:
        me = await response.json()
        assert response.status == 200, me
    assert me["identityId"] == fresh.identity_id
    assert me["publicKey"] == fresh.public_key
    async with http.post(
        "/oauth2/token",
        data={
            "grant_type": "client_credentials",
            "client_id": fresh.client_id,
            "client_secret": fresh.client_secret,
        },
    ) as response:
        assert response.status == 401
        assert (await response.json())["error"] == "invalid_client"
    assert await whoami_status(http, old_token) == 401
