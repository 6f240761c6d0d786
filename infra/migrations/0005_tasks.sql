-- The task queue (SPEC 2.6, 3.1, 4.5): tasks, their attempts, streamed messages and artifacts.
-- The attempt workflow (`task/<taskId>`) owns every state change and projects it here through
-- activities; the API reads these rows. Messages are the one direct API write (append-only).

CREATE TABLE tasks (
    id                    uuid PRIMARY KEY,
    team_id               uuid NOT NULL REFERENCES teams (id),
    diary_id              uuid NOT NULL REFERENCES diaries (id),
    project_id            uuid REFERENCES projects (id),
    task_type             text NOT NULL,
    title                 text CHECK (char_length(title) <= 255),
    input                 jsonb NOT NULL,
    input_cid             text NOT NULL,
    input_schema_cid      text NOT NULL,
    output_kind           text NOT NULL CHECK (output_kind IN ('artifact', 'judgment')),
    correlation_id        uuid,
    "references"          jsonb NOT NULL DEFAULT '[]',
    claim_condition       jsonb,
    allowed_profiles      jsonb NOT NULL DEFAULT '[]',
    required_trust_level  text CHECK (required_trust_level IN (
        'selfDeclared', 'agentSigned', 'releaseVerifiedTool', 'sandboxAttested')),
    max_attempts          integer NOT NULL DEFAULT 1 CHECK (max_attempts >= 1),
    attempt_count         integer NOT NULL DEFAULT 0,
    dispatch_timeout_sec  integer NOT NULL,
    running_timeout_sec   integer NOT NULL,
    expires_at            timestamptz,
    proposed_by_agent_id  uuid,
    proposed_by_human_id  uuid,
    claim_agent_id        uuid,
    claim_expires_at      timestamptz,
    status                text NOT NULL DEFAULT 'queued' CHECK (status IN (
        'queued', 'dispatched', 'running', 'completed', 'failed', 'cancelled', 'expired')),
    cancelled_by_agent_id uuid,
    cancelled_by_human_id uuid,
    cancel_reason         text,
    cancelled_at          timestamptz,
    -- Idempotency-Key: the key and the CID of the canonical request body, per creator and team
    idempotency_key       text,
    idempotency_cid       text,
    workflow_id           text NOT NULL UNIQUE,
    queued_at             timestamptz NOT NULL DEFAULT now(),
    completed_at          timestamptz,
    created_at            timestamptz NOT NULL DEFAULT now(),
    updated_at            timestamptz NOT NULL DEFAULT now(),
    CHECK (proposed_by_agent_id IS NOT NULL OR proposed_by_human_id IS NOT NULL)
);
CREATE INDEX tasks_queue ON tasks (team_id, status, queued_at, id);
CREATE INDEX tasks_by_team_created ON tasks (team_id, created_at DESC, id DESC);
CREATE INDEX tasks_by_correlation ON tasks (team_id, correlation_id) WHERE correlation_id IS NOT NULL;
CREATE UNIQUE INDEX tasks_idempotency ON tasks (
    team_id, coalesce(proposed_by_agent_id, proposed_by_human_id), idempotency_key)
    WHERE idempotency_key IS NOT NULL;

CREATE TABLE task_attempts (
    id                    uuid PRIMARY KEY,
    task_id               uuid NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    attempt_n             integer NOT NULL CHECK (attempt_n >= 1),
    workflow_id           text NOT NULL,
    runtime_id            text,
    lease_id              uuid NOT NULL,
    claimed_by_agent_id   uuid NOT NULL,
    status                text NOT NULL CHECK (status IN (
        'claimed', 'running', 'completed', 'failed', 'cancelled', 'aborted', 'timed_out')),
    lease_ttl_sec         integer NOT NULL,
    claimed_at            timestamptz NOT NULL DEFAULT now(),
    started_at            timestamptz,
    last_heartbeat_at     timestamptz,
    claim_expires_at      timestamptz,
    finished_at           timestamptz,
    output                jsonb,
    output_cid            text,
    content_signature     text,
    usage                 jsonb,
    error                 jsonb,
    timeout_reason        text,
    traceparent           text,
    UNIQUE (task_id, attempt_n)
);

CREATE TABLE task_messages (
    attempt_id uuid NOT NULL REFERENCES task_attempts (id) ON DELETE CASCADE,
    seq        integer NOT NULL CHECK (seq >= 1),
    ts         timestamptz NOT NULL DEFAULT now(),
    kind       text NOT NULL CHECK (kind ~ '^[a-z_]{1,64}$'),
    payload    jsonb NOT NULL,
    PRIMARY KEY (attempt_id, seq)
);

-- Bytes in S3, keyed by CID (raw codec over the exact bytes); one object per distinct content.
CREATE TABLE artifact_blobs (
    cid        text PRIMARY KEY,
    size_bytes bigint NOT NULL CHECK (size_bytes >= 0),
    created_at timestamptz NOT NULL DEFAULT now()
);

-- Staged input bytes: team-scoped, not an artifact record, never listed or downloadable.
CREATE TABLE staged_artifacts (
    team_id          uuid NOT NULL REFERENCES teams (id) ON DELETE CASCADE,
    cid              text NOT NULL REFERENCES artifact_blobs (cid),
    content_type     text,
    content_encoding text,
    staged_at        timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (team_id, cid)
);

-- Artifacts bound to a task: input references (attempt_n NULL) and attempt outputs.
CREATE TABLE task_artifacts (
    id                  uuid PRIMARY KEY,
    team_id             uuid NOT NULL REFERENCES teams (id),
    task_id             uuid NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
    attempt_n           integer,
    cid                 text NOT NULL REFERENCES artifact_blobs (cid),
    kind                text NOT NULL CHECK (char_length(kind) BETWEEN 1 AND 100),
    title               text NOT NULL CHECK (char_length(title) BETWEEN 1 AND 255),
    role                text,
    content_type        text,
    content_encoding    text,
    size_bytes          bigint NOT NULL,
    created_by_agent_id uuid,
    created_by_human_id uuid,
    created_at          timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX task_artifacts_unique ON task_artifacts (task_id, coalesce(attempt_n, 0), cid);
CREATE INDEX task_artifacts_by_task ON task_artifacts (task_id, created_at, id);
CREATE INDEX task_artifacts_by_cid ON task_artifacts (cid);
