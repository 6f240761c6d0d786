"""Test actors: registered agents and logged-in humans that call the running stack.

`Actors(stack, http)` makes them through the real routes (voucher → register → token, or
registration → login), so every test that needs a caller exercises the same path users take.
An actor's `call` returns `(status, body)`; `team=` sets the `x-service-team-id` header.
"""

from __future__ import annotations

import base64
import dataclasses
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import nacl.signing

from schemas.principals import AGENT_SCOPES
from workers.admin import issue_bootstrap_voucher

TEAM_HEADER = "x-service-team-id"
PASSWORD = "correct horse battery staple"


@dataclass
class Actor:
    kind: str  # "agent" | "human"
    subject_id: uuid.UUID
    identity_id: uuid.UUID
    http: aiohttp.ClientSession
    auth: dict[str, str]
    signing_key: nacl.signing.SigningKey | None = None
    public_key: str = ""
    fingerprint: str = ""
    client_id: str = ""
    client_secret: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def subject_ns(self) -> str:
        return "Agent" if self.kind == "agent" else "Human"

    def sign(self, message: str) -> str:
        """Base64 Ed25519 signature of the UTF-8 message (agents only)."""
        assert self.signing_key is not None, "humans have no key"
        return base64.b64encode(self.signing_key.sign(message.encode()).signature).decode()

    async def call(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        team: uuid.UUID | str | None = None,
        params: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        data: bytes | None = None,
    ) -> tuple[int, Any]:
        sent = dict(self.auth)
        if team is not None:
            sent[TEAM_HEADER] = str(team)
        sent.update(headers or {})
        async with self.http.request(
            method, path, json=json, params=params, headers=sent, data=data
        ) as response:
            if response.content_type in ("application/json", "application/problem+json"):
                return response.status, await response.json(content_type=None)
            return response.status, await response.read()


async def anonymous(
    http: aiohttp.ClientSession, method: str, path: str, **kwargs: Any
) -> tuple[int, Any]:
    async with http.request(method, path, **kwargs) as response:
        if response.content_type in ("application/json", "application/problem+json"):
            return response.status, await response.json(content_type=None)
        return response.status, await response.read()


class Actors:
    """Factory of fresh agents and humans on one stack."""

    def __init__(self, stack: Any, http: aiohttp.ClientSession) -> None:
        self._stack = stack
        self._http = http

    async def agent(self, scope: str | None = None) -> Actor:
        voucher = await issue_bootstrap_voucher(self._stack.temporal, self._stack.settings)
        key = nacl.signing.SigningKey.generate()
        public_key = "ed25519:" + base64.b64encode(bytes(key.verify_key)).decode()
        body = {"public_key": public_key, "voucher_code": voucher.code}
        async with self._http.post("/auth/register", json=body) as response:
            registered = await response.json(content_type=None)
            assert response.status == 200, registered
        full = await self._token(registered, None)
        async with self._http.get("/agents/whoami", headers=full) as response:
            whoami = await response.json(content_type=None)
            assert response.status == 200, whoami
        auth = full if scope is None else await self._token(registered, scope)
        return Actor(
            kind="agent",
            subject_id=uuid.UUID(whoami["agentId"]),
            identity_id=uuid.UUID(registered["identityId"]),
            http=self._http,
            auth=auth,
            signing_key=key,
            public_key=public_key,
            fingerprint=registered["fingerprint"],
            client_id=registered["clientId"],
            client_secret=registered["clientSecret"],
        )

    async def _token(self, registered: dict[str, Any], scope: str | None) -> dict[str, str]:
        form = {
            "grant_type": "client_credentials",
            "client_id": registered["clientId"],
            "client_secret": registered["clientSecret"],
        }
        if scope is not None:
            form["scope"] = scope
        async with self._http.post("/oauth2/token", data=form) as response:
            token = await response.json(content_type=None)
            assert response.status == 200, token
        return {"Authorization": f"Bearer {token['access_token']}"}

    async def human(self, display_name: str | None = None) -> Actor:
        email = f"human-{uuid.uuid4().hex[:12]}@example.org"
        credentials = {"email": email, "password": PASSWORD}
        registration = dict(credentials)
        if display_name is not None:
            registration["displayName"] = display_name
        async with self._http.post("/self-service/registration", json=registration) as response:
            assert response.status == 201, await response.text()
        async with self._http.post("/self-service/login", json=credentials) as response:
            session = await response.json(content_type=None)
            assert response.status == 200, session
        return Actor(
            kind="human",
            subject_id=uuid.UUID(session["humanId"]),
            identity_id=uuid.UUID(session["identityId"]),
            http=self._http,
            auth={"X-Session-Token": session["sessionToken"]},
            extra={"email": email, "displayName": display_name},
        )


# --- common setup through the API ---------------------------------------------------------


async def personal_team(actor: Actor) -> str:
    status, body = await actor.call("GET", "/teams")
    assert status == 200, body
    personal = [team["id"] for team in body["items"] if team["personal"]]
    assert len(personal) == 1, body
    return str(personal[0])


async def new_diary(actor: Actor, visibility: str = "private", **extra: Any) -> dict[str, Any]:
    team = await personal_team(actor)
    body = {"name": f"diary-{uuid.uuid4().hex[:6]}", "visibility": visibility, **extra}
    status, diary = await actor.call("POST", "/diaries", json=body, team=team)
    assert status == 201, diary
    return dict(diary)


async def agent_key_secret(agent: Actor, binding: str, team: str | None) -> str:
    """A new agent key of `agent` with every agent scope, bound to `team` ("team") or to the
    agent ("identity"), issued through the agent's own token; its secret."""
    body = {
        "agentId": str(agent.subject_id),
        "name": f"{binding}-{uuid.uuid4().hex[:6]}",
        "bindingScope": binding,
        "scopes": list(AGENT_SCOPES),
    }
    headers = {"Idempotency-Key": uuid.uuid4().hex}
    status, key = await agent.call("POST", "/agent-keys", json=body, team=team, headers=headers)
    assert status == 201, key
    return str(key["secret"])


def holding_key(agent: Actor, secret: str) -> Actor:
    """The same agent, calling with an agent key instead of its OAuth2 token."""
    return dataclasses.replace(agent, auth={"Authorization": f"Bearer {secret}"})


async def join_team(owner: Actor, team_id: str, actor: Actor, role: str) -> None:
    """`actor` joins the team in `role` through an invite of its owner."""
    status, invite = await owner.call("POST", f"/teams/{team_id}/invites", json={"role": role})
    assert status == 201, invite
    status, joined = await actor.call("POST", "/teams/join", json={"code": invite["code"]})
    assert status == 200, joined


async def daemon_secrets(executor: Actor, team_id: str, root: Path) -> Path:
    """The secret files a `cairn daemon` of `executor` reads from `root` (made, 0700): a new
    team key of the executor as `daemon.key`, its signing seed as `agent.seed`."""
    status, key = await executor.call(
        "POST",
        "/agent-keys",
        json={"agentId": str(executor.subject_id), "name": f"daemon-{uuid.uuid4().hex[:6]}"},
        team=team_id,
        headers={"Idempotency-Key": uuid.uuid4().hex},
    )
    assert status == 201, key
    assert executor.signing_key is not None
    seed = base64.b64encode(bytes(executor.signing_key)).decode()
    return _secret_files(root, {"daemon.key": key["secret"], "agent.seed": seed})


def _secret_files(root: Path, files: dict[str, str]) -> Path:
    root.mkdir(mode=0o700)
    for name, text in files.items():
        (root / name).write_text(text + "\n")
        (root / name).chmod(0o600)
    return root
