"""Our OAuth2 server: client-credentials tokens as EdDSA-signed JWTs (RFC 9068), the key set,
and verification of a bearer token back into a Principal.

Signing keys live in Postgres, their seeds sealed with a key derived from the server secret;
the newest unretired key signs and every key still inside a token lifetime verifies, so keys
rotate without downtime. A token carries the client's secret generation: rotating the secret
(recovery) makes every earlier token fail verification at once.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import time
import uuid
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import asyncpg
import jwt
import nacl.exceptions
import nacl.secret
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)

from infra.db import Q
from schemas.errors import (
    AccessTokenInvalid,
    ConnectorTokenInvalid,
    ServiceUnavailable,
)
from schemas.identity import CredentialRehash
from schemas.kernel.keyring import SecretKeyring
from schemas.principals import AGENT_SCOPES, Principal

ALGORITHM = "EdDSA"
TOKEN_TYPE = "at+jwt"
KEY_REFRESH_SEC = 60.0
UNKNOWN_KID_REFRESH_SEC = 5.0
# A hash compared against when the client does not exist, so both paths cost the same.
_ABSENT_CLIENT_HASH = "0" * 64
# Tokens whose signature and claims were verified, kept per API process (~1 KiB each).
VERIFIED_TOKEN_CACHE_SIZE = 4096


def _b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def key_id(public_key: bytes) -> str:
    """RFC 7638 JWK thumbprint of an Ed25519 public key."""
    canonical = json.dumps(
        {"crv": "Ed25519", "kty": "OKP", "x": _b64url(public_key)}, separators=(",", ":")
    )
    return _b64url(hashlib.sha256(canonical.encode()).digest())


def _sealing_box(server_secret: bytes) -> nacl.secret.SecretBox:
    return nacl.secret.SecretBox(hashlib.sha256(b"cairn:jwt-seal:" + server_secret).digest())


def seal_seed(ring: SecretKeyring, seed: bytes) -> bytes:
    """A signing key's seed sealed under the current server secret."""
    return bytes(_sealing_box(ring.current).encrypt(seed))


def open_seed(ring: SecretKeyring, sealed: bytes) -> bytes | None:
    """The seed, opened under whichever server secret sealed it; None when none of the ring
    did (the key was sealed under a secret since dropped)."""
    return ring.first(lambda key: _open(_sealing_box(key), sealed))


def _open(box: nacl.secret.SecretBox, sealed: bytes) -> bytes | None:
    try:
        return box.decrypt(sealed)
    except nacl.exceptions.CryptoError:
        return None


def reseal(ring: SecretKeyring, sealed: bytes) -> bytes | None:
    """The seed sealed under the current secret when an older one sealed it, else None."""
    if _open(_sealing_box(ring.current), sealed) is not None:
        return None
    seed = open_seed(ring, sealed)
    return None if seed is None else seal_seed(ring, seed)


@dataclass(frozen=True)
class SigningKey:
    kid: str
    private: Ed25519PrivateKey | None
    public: Ed25519PublicKey
    public_raw: bytes
    active: bool

    def jwk(self) -> dict[str, str]:
        return {
            "kty": "OKP",
            "crv": "Ed25519",
            "x": _b64url(self.public_raw),
            "kid": self.kid,
            "alg": ALGORITHM,
            "use": "sig",
        }


def new_sealed_key(ring: SecretKeyring) -> tuple[str, bytes, bytes]:
    """A fresh key: (kid, sealed seed, raw public key)."""
    private = Ed25519PrivateKey.generate()
    seed = private.private_bytes_raw()
    public_raw = private.public_key().public_bytes_raw()
    return key_id(public_raw), seal_seed(ring, seed), public_raw


class SigningKeyStore:
    """The token endpoint's keys, cached from Postgres and refreshed on a timer or unknown kid."""

    def __init__(self, pool: asyncpg.Pool, ring: SecretKeyring) -> None:
        self._pool = pool
        self._ring = ring
        self._keys: dict[str, SigningKey] = {}
        self._signing: SigningKey | None = None
        self._loaded_at = 0.0
        self._lock = asyncio.Lock()

    async def refresh(self) -> None:
        async with self._lock:
            rows = await self._pool.fetch(Q.list_verification_keys)
            keys: dict[str, SigningKey] = {}
            signing: SigningKey | None = None
            for row in rows:
                seed = open_seed(self._ring, bytes(row["sealed_seed"]))
                if seed is None:  # sealed under a dropped secret: it can sign nothing more
                    continue
                private = Ed25519PrivateKey.from_private_bytes(seed)
                key = SigningKey(
                    kid=row["kid"],
                    private=private,
                    public=private.public_key(),
                    public_raw=bytes(row["public_key"]),
                    active=row["retired_at"] is None,
                )
                keys[key.kid] = key
                if key.active and signing is None:
                    signing = key
            self._keys, self._signing, self._loaded_at = keys, signing, time.monotonic()

    async def _fresh(self, max_age: float) -> None:
        if time.monotonic() - self._loaded_at > max_age:
            await self.refresh()

    async def signing_key(self) -> SigningKey:
        await self._fresh(KEY_REFRESH_SEC)
        if self._signing is None:
            await self.refresh()
        if self._signing is None:
            raise ServiceUnavailable("No token signing key yet: start a worker (it creates one)")
        return self._signing

    async def verification_key(self, kid: str) -> SigningKey | None:
        await self._fresh(KEY_REFRESH_SEC)
        if kid not in self._keys:
            await self._fresh(UNKNOWN_KID_REFRESH_SEC)
        return self._keys.get(kid)

    async def jwks(self) -> dict[str, list[dict[str, str]]]:
        await self._fresh(KEY_REFRESH_SEC)
        return {"keys": [key.jwk() for key in self._keys.values()]}


class VerifiedTokens:
    """Tokens this process has verified, so a daemon's next request skips the signature check
    (a third of a whoami's CPU). An entry holds the claims and the key that signed them; a hit
    counts only while that key still verifies and the token is inside its `nbf`..`exp`
    window. Revocation is untouched: the caller still reads the client's secret generation
    on every request. Least recently used tokens leave first."""

    def __init__(self, size: int = VERIFIED_TOKEN_CACHE_SIZE) -> None:
        self._size = size
        self._entries: OrderedDict[str, tuple[str, dict[str, Any]]] = OrderedDict()

    def get(self, token: str) -> tuple[str, dict[str, Any]] | None:
        """The signing key's id and the claims of a token verified earlier and not yet expired."""
        entry = self._entries.get(token)
        if entry is None:
            return None
        claims = entry[1]
        if not claims.get("nbf", claims["iat"]) <= time.time() < claims["exp"]:
            del self._entries[token]
            return None
        self._entries.move_to_end(token)
        return entry

    def put(self, token: str, kid: str, claims: dict[str, Any]) -> None:
        self._entries[token] = (kid, claims)
        self._entries.move_to_end(token)
        while len(self._entries) > self._size:
            self._entries.popitem(last=False)


@dataclass(frozen=True)
class ClientRecord:
    client_id: str
    identity_id: uuid.UUID
    agent_id: uuid.UUID
    scopes: frozenset[str]
    secret_generation: int
    public_key: str
    fingerprint: str
    # the secret matched only under an older server secret: the hash to move to the current one
    rehash: CredentialRehash | None = None


@dataclass(frozen=True)
class HumanGrant:
    """A human's consent to an MCP host (the browser connector): who, which client, what."""

    grant_id: uuid.UUID
    client_id: str
    identity_id: uuid.UUID
    human_id: uuid.UUID
    scopes: tuple[str, ...]
    resource: str
    expires_at: int = 0  # of the token it was read from, unix seconds


class TokenService(Protocol):
    """What the API needs of an OAuth2 server; `OAuthServer` is ours, another can plug in."""

    issuer: str

    async def authenticate(self, client_id: str, client_secret: str) -> ClientRecord | None: ...

    async def issue(self, client: ClientRecord, scopes: Sequence[str]) -> tuple[str, int]: ...

    async def verify(self, token: str) -> Principal: ...

    async def issue_for_human(self, grant: HumanGrant, *, audience: str, ttl_sec: int) -> str: ...

    async def verify_connector_token(self, token: str, resource: str) -> HumanGrant: ...

    def enrichment_claims(self, client: ClientRecord) -> dict[str, Any]: ...

    def metadata(self) -> dict[str, Any]: ...

    async def jwks(self) -> dict[str, list[dict[str, str]]]: ...


class OAuthServer:
    """Token issue and verification for the `client_credentials` grant."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        keys: SigningKeyStore,
        *,
        issuer: str,
        ring: SecretKeyring,
        token_ttl_sec: int,
    ) -> None:
        self._pool = pool
        self.keys = keys
        self.issuer = issuer
        self._ring = ring
        self.token_ttl_sec = token_ttl_sec
        self._verified = VerifiedTokens()

    async def authenticate(self, client_id: str, client_secret: str) -> ClientRecord | None:
        row = await self._pool.fetchrow(Q.get_client_for_token, client_id)
        stored = row["secret_hash"] if row is not None else _ABSENT_CLIENT_HASH
        match = self._ring.match(client_secret, stored)
        if not match or row is None:
            return None
        rehash = None
        if match.stale:
            rehash = CredentialRehash(
                kind="oauth_client",
                ref=row["client_id"],
                old_hash=stored,
                new_hash=self._ring.hash(client_secret),
            )
        return ClientRecord(
            client_id=row["client_id"],
            identity_id=row["identity_id"],
            agent_id=row["agent_id"],
            scopes=frozenset(row["scope"].split()),
            secret_generation=row["secret_generation"],
            public_key=row["public_key"],
            fingerprint=row["fingerprint"],
            rehash=rehash,
        )

    def enrichment_claims(self, client: ClientRecord) -> dict[str, Any]:
        """The token-enrichment step (also served at /hooks/hydra/token-exchange)."""
        return {
            "identity_id": str(client.identity_id),
            "fingerprint": client.fingerprint,
            "public_key": client.public_key,
            "subject_type": "agent",
        }

    async def issue(self, client: ClientRecord, scopes: Sequence[str]) -> tuple[str, int]:
        key = await self.keys.signing_key()
        now = int(time.time())
        claims = {
            "iss": self.issuer,
            "sub": str(client.identity_id),
            "aud": self.issuer,
            "client_id": client.client_id,
            "scope": " ".join(scopes),
            "iat": now,
            "nbf": now,
            "exp": now + self.token_ttl_sec,
            "jti": uuid.uuid4().hex,
            "gen": client.secret_generation,
            **self.enrichment_claims(client),
        }
        assert key.private is not None
        token = jwt.encode(
            claims, key.private, algorithm=ALGORITHM, headers={"kid": key.kid, "typ": TOKEN_TYPE}
        )
        return token, self.token_ttl_sec

    async def issue_for_human(self, grant: HumanGrant, *, audience: str, ttl_sec: int) -> str:
        """A token acting as the human of a connector grant: for the MCP server (audience = its
        resource URL, RFC 8707) or, exchanged by the MCP server, for this API (audience = the
        issuer). Either stops working when the grant is revoked."""
        key = await self.keys.signing_key()
        now = int(time.time())
        claims = {
            "iss": self.issuer,
            "sub": str(grant.identity_id),
            "aud": audience,
            "client_id": grant.client_id,
            "scope": " ".join(grant.scopes),
            "iat": now,
            "nbf": now,
            "exp": now + ttl_sec,
            "jti": uuid.uuid4().hex,
            "grant": str(grant.grant_id),
            "subject_type": "human",
        }
        assert key.private is not None
        return jwt.encode(
            claims, key.private, algorithm=ALGORITHM, headers={"kid": key.kid, "typ": TOKEN_TYPE}
        )

    async def verify_connector_token(self, token: str, resource: str) -> HumanGrant:
        """A connector token presented at the MCP server whose resource URL is `resource`: our
        signature, that audience, a human's grant that is still open."""
        claims = await self._verified_claims(token, audience=resource)
        if claims.get("subject_type") != "human" or "grant" not in claims:
            raise ConnectorTokenInvalid("The bearer token is not a connector token")
        return await self._open_grant(claims)

    async def _open_grant(self, claims: dict[str, Any]) -> HumanGrant:
        try:
            grant_id = uuid.UUID(str(claims["grant"]))
        except ValueError:
            raise AccessTokenInvalid("The bearer token is invalid") from None
        row = await self._pool.fetchrow(Q.get_active_connector_grant, grant_id)
        if row is None or row["client_id"] != claims.get("client_id"):
            raise ConnectorTokenInvalid("The connector grant was revoked")
        return HumanGrant(
            grant_id=grant_id,
            client_id=row["client_id"],
            identity_id=row["identity_id"],
            human_id=row["human_id"],
            scopes=tuple(str(claims.get("scope", "")).split()),
            resource=row["resource"],
            expires_at=int(claims["exp"]),
        )

    async def verify(self, token: str) -> Principal:
        claims = await self._verified_claims(token)
        if claims.get("subject_type") == "human":
            grant = await self._open_grant(claims)
            return Principal(
                subject_type="human",
                identity_id=grant.identity_id,
                credential="connector",
                scopes=frozenset(grant.scopes),
                human_id=grant.human_id,
                client_id=grant.client_id,
            )
        row = await self._pool.fetchrow(Q.get_client_generation, claims.get("client_id", ""))
        if row is None or row["secret_generation"] != claims.get("gen"):
            raise AccessTokenInvalid("The credential was rotated or revoked")
        return Principal(
            subject_type="agent",
            identity_id=uuid.UUID(claims["sub"]),
            credential="oauth2",
            scopes=frozenset(str(claims.get("scope", "")).split()),
            agent_id=row["agent_id"],
            client_id=claims["client_id"],
            public_key=row["public_key"],
            fingerprint=row["fingerprint"],
        )

    async def _verified_claims(self, token: str, *, audience: str | None = None) -> dict[str, Any]:
        """The claims of a token we signed for `audience` (default: this API)."""
        audience = audience or self.issuer
        known = self._verified.get(token)
        if (
            known is not None
            and known[1].get("aud") == audience
            and await self.keys.verification_key(known[0]) is not None
        ):
            return known[1]
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise AccessTokenInvalid("The bearer token is malformed") from None
        key = await self.keys.verification_key(str(header.get("kid", "")))
        if key is None or header.get("alg") != ALGORITHM:
            raise AccessTokenInvalid("The bearer token was not issued by this server")
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key.public,
                algorithms=[ALGORITHM],
                audience=audience,
                issuer=self.issuer,
                options={"require": ["exp", "iat", "sub", "client_id"]},
            )
        except jwt.ExpiredSignatureError:
            raise AccessTokenInvalid("The bearer token has expired") from None
        except jwt.PyJWTError:
            raise AccessTokenInvalid("The bearer token is invalid") from None
        self._verified.put(token, key.kid, claims)
        return claims

    async def jwks(self) -> dict[str, list[dict[str, str]]]:
        return await self.keys.jwks()

    def metadata(self) -> dict[str, Any]:
        """RFC 8414 authorization server metadata."""
        return {
            "issuer": self.issuer,
            "token_endpoint": f"{self.issuer}/oauth2/token",
            "jwks_uri": f"{self.issuer}/.well-known/jwks.json",
            "grant_types_supported": ["client_credentials"],
            "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post"],
            "token_endpoint_auth_signing_alg_values_supported": [ALGORITHM],
            "response_types_supported": ["token"],
            "scopes_supported": sorted(AGENT_SCOPES),
        }
