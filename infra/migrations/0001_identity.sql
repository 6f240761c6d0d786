-- Identity: the identity provider's identities, agents, humans, vouchers, the OAuth2 server's
-- clients and signing keys, recovery, human sessions.
CREATE EXTENSION IF NOT EXISTS vector;

CREATE TABLE identities (
    id            uuid PRIMARY KEY,
    schema_id     text NOT NULL CHECK (schema_id IN ('agent', 'human')),
    traits        jsonb NOT NULL,
    state         text NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'inactive')),
    password_hash text NOT NULL,
    email         text UNIQUE,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE agents (
    id          uuid PRIMARY KEY,
    identity_id uuid UNIQUE REFERENCES identities (id) ON DELETE SET NULL,
    public_key  text NOT NULL UNIQUE,
    fingerprint varchar(19) NOT NULL UNIQUE,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE humans (
    id          uuid PRIMARY KEY,
    identity_id uuid UNIQUE REFERENCES identities (id) ON DELETE SET NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE agent_vouchers (
    id          uuid PRIMARY KEY,
    code        char(64) NOT NULL UNIQUE,
    issuer_id   uuid REFERENCES agents (id) ON DELETE SET NULL,
    redeemed_by uuid REFERENCES agents (id) ON DELETE SET NULL,
    expires_at  timestamptz NOT NULL,
    redeemed_at timestamptz,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX agent_vouchers_issuer_open ON agent_vouchers (issuer_id) WHERE redeemed_at IS NULL;

CREATE TABLE oauth_clients (
    client_id         text PRIMARY KEY,
    identity_id       uuid NOT NULL REFERENCES identities (id) ON DELETE CASCADE,
    secret_hash       text NOT NULL,
    secret_generation integer NOT NULL DEFAULT 1,
    grant_types       text[] NOT NULL DEFAULT ARRAY['client_credentials'],
    scope             text NOT NULL,
    metadata          jsonb NOT NULL,
    created_at        timestamptz NOT NULL DEFAULT now(),
    rotated_at        timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX oauth_clients_identity ON oauth_clients (identity_id);

-- EdDSA keys of the token endpoint; the newest active key signs, every unretired key verifies.
CREATE TABLE jwt_signing_keys (
    kid         text PRIMARY KEY,
    sealed_seed bytea NOT NULL,
    public_key  bytea NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    retired_at  timestamptz
);

CREATE TABLE used_recovery_nonces (
    nonce      text PRIMARY KEY,
    expires_at timestamptz NOT NULL
);

CREATE TABLE recovery_flows (
    id          uuid PRIMARY KEY,
    identity_id uuid NOT NULL REFERENCES identities (id) ON DELETE CASCADE,
    code_hash   text NOT NULL,
    attempts    integer NOT NULL DEFAULT 0,
    expires_at  timestamptz NOT NULL,
    used_at     timestamptz,
    created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE human_sessions (
    id          uuid PRIMARY KEY,
    token_hash  text NOT NULL UNIQUE,
    identity_id uuid NOT NULL REFERENCES identities (id) ON DELETE CASCADE,
    human_id    uuid NOT NULL REFERENCES humans (id) ON DELETE CASCADE,
    expires_at  timestamptz NOT NULL,
    revoked_at  timestamptz,
    created_at  timestamptz NOT NULL DEFAULT now()
);
