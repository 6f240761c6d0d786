-- Agent keys (SPEC 2.3, 3.5, 4.6, 9): the credential store of long-lived agent bearer keys.
-- Written only by the agent-key workflows' activities; the API reads it (authentication is one
-- primary-key read). The secret itself is never stored: `secret_hash` is its HMAC-SHA256 under
-- the server secret.
--
-- `metadata` is the versioned binding record as the store holds it (SPEC 9): v2
-- `{"version": "v2", "binding_scope": "team"|"identity", "team_id"?}`, or a v1 record
-- `{"version": "v1", "team_id"}` (a team binding). It is the source of truth, checked by
-- `schemas.agent_keys.binding_of` at every read; `binding_scope` and `team_id` are derived from
-- it only so that lists filter and page on an index. A record that is neither valid v2 nor
-- valid v1 derives no binding scope: it is listed nowhere and never authenticates.

CREATE TABLE agent_keys (
    id                     uuid PRIMARY KEY,
    actor_id               uuid NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    name                   text NOT NULL CHECK (char_length(name) BETWEEN 1 AND 100),
    metadata               jsonb NOT NULL,
    binding_scope          text GENERATED ALWAYS AS (
        CASE
            WHEN metadata ->> 'version' = 'v2'
                 AND metadata ->> 'binding_scope' = 'team' AND metadata ? 'team_id' THEN 'team'
            WHEN metadata ->> 'version' = 'v2'
                 AND metadata ->> 'binding_scope' = 'identity' AND NOT metadata ? 'team_id'
                THEN 'identity'
            WHEN metadata ->> 'version' = 'v1' AND metadata ? 'team_id' THEN 'team'
        END
    ) STORED,
    team_id                uuid GENERATED ALWAYS AS ((metadata ->> 'team_id')::uuid) STORED,
    status                 text NOT NULL DEFAULT 'active'
                           CHECK (status IN ('active', 'revoked', 'expired')),
    scopes                 text[] NOT NULL,
    secret_hash            char(64) NOT NULL,
    expires_at             timestamptz NOT NULL,
    -- who issued it (an agent, or a human team manager) and under which Idempotency-Key
    created_by_ns          text NOT NULL CHECK (created_by_ns IN ('Agent', 'Human')),
    created_by_id          uuid NOT NULL,
    idempotency_key_hash   char(64),
    rotated_at             timestamptz,
    revoked_at             timestamptz,
    revocation_reason      text,
    revocation_description text,
    created_at             timestamptz NOT NULL DEFAULT now(),
    updated_at             timestamptz NOT NULL DEFAULT now()
);

-- GET /agent-keys pages newest first within a team, or within one agent's keys of a binding
CREATE INDEX agent_keys_by_team ON agent_keys (team_id, created_at DESC, id DESC)
    WHERE binding_scope = 'team';
CREATE INDEX agent_keys_by_actor ON agent_keys (actor_id, binding_scope, created_at DESC, id DESC);
