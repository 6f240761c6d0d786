"""An agent's first day, end to end on the real stack, through the REST client:
voucher → register → token → whoami → recovery → new secret → old secret rejected."""

from __future__ import annotations

import base64

import nacl.signing
import pytest

from client.rest import ApiError, CairnClient
from schemas.kernel.crypto import fingerprint
from workers.admin import issue_bootstrap_voucher

pytestmark = pytest.mark.pgbouncer_smoke  # also behind pgbouncer (tests/conftest.py)


def new_agent_key() -> tuple[nacl.signing.SigningKey, str]:
    key = nacl.signing.SigningKey.generate()
    return key, "ed25519:" + base64.b64encode(bytes(key.verify_key)).decode()


async def test_agent_first_day(stack) -> None:
    voucher = await issue_bootstrap_voucher(stack.temporal, stack.settings)
    signing_key, public_key = new_agent_key()
    async with CairnClient(stack.base_url) as api:
        registered = await api.register(public_key, voucher.code)
        assert registered.fingerprint == fingerprint(bytes(signing_key.verify_key))
        assert registered.publicKey == public_key

        me = await api.whoami()
        assert me.subjectType == "agent"
        assert me.identityId == registered.identityId
        assert me.fingerprint == registered.fingerprint
        assert me.clientId == registered.clientId
        assert "agent:profile" in me.scopes

        profile = await api.agent(registered.fingerprint)
        assert profile.publicKey == public_key
        old_credentials = api.credentials
        old_token = await api.access_token()

        challenge = await api.recovery_challenge(public_key)
        signature = base64.b64encode(
            signing_key.sign(challenge.challenge.encode()).signature
        ).decode()
        verified = await api.recovery_verify(challenge, signature, public_key)
        assert verified.recoveryFlowUrl.startswith(stack.base_url + "/self-service/recovery?flow=")
        completed = await api.recovery_complete(verified.recoveryFlowUrl, verified.recoveryCode)
        assert completed.clientId == registered.clientId
        assert completed.clientSecret != registered.clientSecret

        assert (await api.whoami()).identityId == registered.identityId

    async with CairnClient(stack.base_url, credentials=old_credentials) as stale:
        with pytest.raises(ApiError) as rejected:
            await stale.fetch_token()
        assert rejected.value.status == 401
        assert rejected.value.code == "invalid_client"
        stale.bearer = old_token  # the token issued before recovery, sent as it is
        with pytest.raises(ApiError) as old_token_rejected:
            await stale.whoami()
        assert old_token_rejected.value.status == 401
