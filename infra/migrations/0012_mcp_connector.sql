-- The browser OAuth connector for humans (MCP server as authorization server, spec 5.5):
-- dynamically registered clients (RFC 7591), authorization codes bound to a human, a client,
-- a redirect URI, a PKCE S256 challenge and a resource (RFC 8707), and the grants they become
-- (one refresh token each, rotated on use). Secrets, codes and refresh tokens are keyed hashes.
CREATE TABLE connector_clients (
    client_id     text PRIMARY KEY,
    secret_hash   text,
    client_name   text,
    redirect_uris text[] NOT NULL,
    metadata      jsonb NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE connector_codes (
    code_hash             text PRIMARY KEY,
    client_id             text NOT NULL REFERENCES connector_clients (client_id) ON DELETE CASCADE,
    human_id              uuid NOT NULL REFERENCES humans (id) ON DELETE CASCADE,
    identity_id           uuid NOT NULL REFERENCES identities (id) ON DELETE CASCADE,
    redirect_uri          text NOT NULL,
    redirect_uri_explicit boolean NOT NULL,
    code_challenge        text NOT NULL,
    scopes                text[] NOT NULL,
    resource              text NOT NULL,
    expires_at            timestamptz NOT NULL,
    used_at               timestamptz,
    created_at            timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE connector_grants (
    id                 uuid PRIMARY KEY,
    client_id          text NOT NULL REFERENCES connector_clients (client_id) ON DELETE CASCADE,
    code_hash          text NOT NULL UNIQUE,
    human_id           uuid NOT NULL REFERENCES humans (id) ON DELETE CASCADE,
    identity_id        uuid NOT NULL REFERENCES identities (id) ON DELETE CASCADE,
    scopes             text[] NOT NULL,
    resource           text NOT NULL,
    refresh_hash       text NOT NULL UNIQUE,
    refresh_expires_at timestamptz NOT NULL,
    revoked_at         timestamptz,
    created_at         timestamptz NOT NULL DEFAULT now(),
    rotated_at         timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX connector_grants_human ON connector_grants (human_id);
