-- Runtime profiles (DECISIONS "Tasks", "Runtime profiles"): a team's named runtime policy that a
-- daemon claims under. `revision` starts at 1 and grows on every update. `policy` is
-- `{taskTypes?, scopes?}`: what a claim under the profile may take, and the scopes its attempt
-- keeps (the credential's, narrowed; never widened).
CREATE TABLE runtime_profiles (
    id                  uuid PRIMARY KEY,
    team_id             uuid NOT NULL REFERENCES teams (id) ON DELETE CASCADE,
    name                text NOT NULL CHECK (char_length(name) BETWEEN 1 AND 100),
    revision            integer NOT NULL DEFAULT 1 CHECK (revision >= 1),
    policy              jsonb NOT NULL DEFAULT '{}',
    created_by_agent_id uuid,
    created_by_human_id uuid,
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now(),
    UNIQUE (team_id, name)
);
CREATE INDEX runtime_profiles_by_team ON runtime_profiles (team_id, created_at, id);

-- The profile an attempt was claimed under, frozen at claim (SPEC 2.6 response fields): its id
-- and revision, the policy as it was (`policy_snapshot`, whose scopes narrow the attempt's
-- calls) and the SHA-256 hex of its RFC 8785 form. No foreign key: a profile deleted or updated
-- later leaves the attempt's record as it was.
ALTER TABLE task_attempts
    ADD COLUMN runtime_profile_id       uuid,
    ADD COLUMN runtime_profile_revision integer,
    ADD COLUMN policy_snapshot          jsonb,
    ADD COLUMN policy_snapshot_hash     text;
