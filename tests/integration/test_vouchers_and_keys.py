"""Vouchers issued by agents (five open at most), and token signing-key rotation."""

from __future__ import annotations

import base64
import json

import jwt
import nacl.signing
import pytest

from cairn import main as cli
from client.rest import ApiError, CairnClient
from workers.admin import issue_bootstrap_voucher
from workers.main import ensure_signing_key


def public_key() -> str:
    raw = bytes(nacl.signing.SigningKey.generate().verify_key)
    return "ed25519:" + base64.b64encode(raw).decode()


async def registered(stack, api: CairnClient) -> None:  # type: ignore[no-untyped-def]
    voucher = await issue_bootstrap_voucher(stack.temporal, stack.settings)
    await api.register(public_key(), voucher.code)


async def test_agent_vouches_for_at_most_five_and_one_registers(stack) -> None:  # type: ignore[no-untyped-def]
    async with CairnClient(stack.base_url) as sponsor:
        await registered(stack, sponsor)
        me = await sponsor.whoami()
        issued = [await sponsor.vouch() for _ in range(5)]
        assert all(v.issuedBy == me.agentId and len(v.code) == 64 for v in issued)
        with pytest.raises(ApiError) as over:
            await sponsor.vouch()
        assert over.value.status == 429 and over.value.code == "voucher-limit-reached"
        active = await sponsor.active_vouchers()
        assert {v.code for v in active.items} == {v.code for v in issued}

        async with CairnClient(stack.base_url) as newcomer:
            await newcomer.register(public_key(), issued[0].code)
            assert (await newcomer.whoami()).subjectType == "agent"
        still_open = await sponsor.active_vouchers()
        assert issued[0].code not in {v.code for v in still_open.items}
        assert len(still_open.items) == 4
        assert (await sponsor.vouch()).issuedBy == me.agentId


async def test_vouching_needs_authentication(stack) -> None:  # type: ignore[no-untyped-def]
    async with CairnClient(stack.base_url) as anonymous:
        with pytest.raises(ApiError) as rejected:
            await anonymous.request("POST", "/vouch", auth=False)
        assert rejected.value.status == 401


async def test_signing_key_rotation_keeps_old_tokens_valid(stack) -> None:  # type: ignore[no-untyped-def]
    async with CairnClient(stack.base_url) as api:
        await registered(stack, api)
        old_token = await api.access_token()
        old_kid = jwt.get_unverified_header(old_token)["kid"]
        new_kid = await ensure_signing_key(stack.temporal, stack.settings, rotate=True)
        assert new_kid != old_kid
        # the API caches keys for up to a minute; a new kid triggers a refresh on verify
        stack_app_tokens = await api.request("GET", "/.well-known/jwks.json", auth=False)
        assert old_kid in {k["kid"] for k in stack_app_tokens["keys"]}
        assert (await api.whoami()).subjectType == "agent"  # old token still verifies
        fresh = await api.access_token(force=True)
        assert jwt.get_unverified_header(fresh)["kid"] in {new_kid, old_kid}


def test_openapi_command_prints_the_document(capsys: pytest.CaptureFixture[str]) -> None:
    cli(["openapi"])
    document = json.loads(capsys.readouterr().out)
    assert document["openapi"] == "3.1.0"
    assert "/auth/register" in document["paths"]
    assert "post" in document["paths"]["/oauth2/token"]
