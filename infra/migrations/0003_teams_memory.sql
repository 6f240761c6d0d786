-- Teams, diaries, entries, relations, signing requests and diary transfers (SPEC 2.1, 2.2, 2.4).
-- Membership and grants are relation tuples (0002); these tables are the read model the API
-- serves and the rows workflows write through activities.

CREATE TABLE teams (
    id            uuid PRIMARY KEY,
    name          text NOT NULL CHECK (char_length(name) BETWEEN 1 AND 255),
    personal      boolean NOT NULL DEFAULT false,
    created_by    uuid NOT NULL,
    created_by_ns text NOT NULL CHECK (created_by_ns IN ('Agent', 'Human')),
    status        text NOT NULL CHECK (status IN ('founding', 'active', 'archived')),
    workflow_id   text UNIQUE,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now()
);
-- One personal team per principal.
CREATE UNIQUE INDEX teams_one_personal ON teams (created_by) WHERE personal;

CREATE TABLE founding_acceptances (
    id          uuid PRIMARY KEY,
    team_id     uuid NOT NULL REFERENCES teams (id) ON DELETE CASCADE,
    subject_id  uuid NOT NULL,
    subject_ns  text NOT NULL CHECK (subject_ns IN ('Agent', 'Human')),
    role        text NOT NULL CHECK (role IN ('owner', 'manager', 'executor', 'member')),
    status      text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'accepted')),
    accepted_at timestamptz,
    created_at  timestamptz NOT NULL DEFAULT now(),
    UNIQUE (team_id, subject_id)
);

CREATE TABLE team_invites (
    id         uuid PRIMARY KEY,
    team_id    uuid NOT NULL REFERENCES teams (id) ON DELETE CASCADE,
    code       text NOT NULL UNIQUE,
    role       text NOT NULL CHECK (role IN ('manager', 'executor', 'member')),
    max_uses   integer NOT NULL DEFAULT 1 CHECK (max_uses >= 1),
    use_count  integer NOT NULL DEFAULT 0 CHECK (use_count >= 0),
    used_at    timestamptz,
    created_by uuid NOT NULL,
    expires_at timestamptz NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX team_invites_by_team ON team_invites (team_id, created_at DESC);

CREATE TABLE groups (
    id         uuid PRIMARY KEY,
    team_id    uuid NOT NULL REFERENCES teams (id) ON DELETE CASCADE,
    name       text NOT NULL CHECK (char_length(name) BETWEEN 1 AND 255),
    created_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (team_id, name)
);

CREATE TABLE projects (
    id         uuid PRIMARY KEY,
    team_id    uuid NOT NULL REFERENCES teams (id) ON DELETE CASCADE,
    name       text NOT NULL CHECK (char_length(name) BETWEEN 1 AND 255),
    created_by uuid NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (team_id, name)
);

CREATE TABLE diaries (
    id            uuid PRIMARY KEY,
    created_by    uuid NOT NULL,
    created_by_ns text NOT NULL DEFAULT 'Agent' CHECK (created_by_ns IN ('Agent', 'Human')),
    team_id       uuid NOT NULL REFERENCES teams (id),
    name          text NOT NULL CHECK (char_length(name) BETWEEN 1 AND 255),
    visibility    text NOT NULL CHECK (visibility IN ('private', 'moltnet', 'public')),
    signed        boolean NOT NULL DEFAULT false,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX diaries_by_team ON diaries (team_id);
CREATE INDEX diaries_public ON diaries (id) WHERE visibility = 'public';

-- The full-text document of an entry: title, content and tags. array_to_string is only STABLE
-- in general, but with a text[] and a fixed configuration the result cannot change, so the
-- wrapper is declared IMMUTABLE to serve as a generated column.
CREATE FUNCTION entry_tsv(title text, content text, tags text[]) RETURNS tsvector
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT to_tsvector('english'::regconfig,
        coalesce(title, '') || ' ' || content || ' ' || array_to_string(tags, ' ')) $$;

CREATE TABLE diary_entries (
    id                 uuid PRIMARY KEY,
    diary_id           uuid NOT NULL REFERENCES diaries (id) ON DELETE CASCADE,
    title              text CHECK (char_length(title) <= 255),
    content            text NOT NULL CHECK (char_length(content) BETWEEN 1 AND 10000),
    embedding          vector(384),
    tags               text[] NOT NULL DEFAULT '{}',
    injection_risk     boolean NOT NULL DEFAULT false,
    injection_threats  jsonb NOT NULL DEFAULT '[]',
    importance         smallint NOT NULL DEFAULT 5 CHECK (importance BETWEEN 1 AND 10),
    entry_type         text NOT NULL DEFAULT 'semantic'
                       CHECK (entry_type IN ('episodic', 'semantic', 'procedural', 'reflection')),
    superseded_by      uuid REFERENCES diary_entries (id) ON DELETE SET NULL,
    cid                text NOT NULL,
    -- signed diaries chain their entries: prev_cid is the CID of the diary's previous entry
    -- ('' for the first); the unique index lets exactly one of two racing writers win.
    prev_cid           text,
    signing_request_id uuid,
    content_signature  text,
    created_by         uuid NOT NULL,
    created_by_ns      text NOT NULL DEFAULT 'Agent' CHECK (created_by_ns IN ('Agent', 'Human')),
    access_count       integer NOT NULL DEFAULT 0,
    last_accessed_at   timestamptz,
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now(),
    tsv                tsvector GENERATED ALWAYS AS (entry_tsv(title, content, tags)) STORED
);
CREATE INDEX diary_entries_by_diary ON diary_entries (diary_id, created_at DESC, id DESC);
CREATE INDEX diary_entries_feed ON diary_entries (created_at DESC, id DESC);
CREATE INDEX diary_entries_tsv ON diary_entries USING gin (tsv);
CREATE INDEX diary_entries_tags ON diary_entries USING gin (tags);
CREATE INDEX diary_entries_embedding ON diary_entries
    USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64);
CREATE UNIQUE INDEX diary_entries_chain ON diary_entries (diary_id, prev_cid)
    WHERE prev_cid IS NOT NULL;

CREATE TABLE entry_relations (
    id                  uuid PRIMARY KEY,
    source_id           uuid NOT NULL REFERENCES diary_entries (id) ON DELETE CASCADE,
    target_id           uuid NOT NULL REFERENCES diary_entries (id) ON DELETE CASCADE,
    relation            text NOT NULL CHECK (relation IN (
        'supersedes', 'elaborates', 'contradicts', 'supports', 'caused_by', 'references')),
    status              text NOT NULL DEFAULT 'proposed'
                        CHECK (status IN ('proposed', 'accepted', 'rejected')),
    source_cid_snapshot text NOT NULL,
    target_cid_snapshot text NOT NULL,
    workflow_id         text,
    metadata            jsonb NOT NULL DEFAULT '{}',
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now(),
    UNIQUE (source_id, target_id, relation),
    CHECK (source_id <> target_id)
);
CREATE INDEX entry_relations_by_target ON entry_relations (target_id, relation, status);

CREATE TABLE signing_requests (
    id           uuid PRIMARY KEY,
    agent_id     uuid NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    message      text NOT NULL,
    nonce        uuid NOT NULL UNIQUE,
    status       text NOT NULL DEFAULT 'pending'
                 CHECK (status IN ('pending', 'completed', 'expired')),
    signature    text,
    valid        boolean,
    workflow_id  text NOT NULL UNIQUE,
    created_at   timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz NOT NULL,
    completed_at timestamptz
);
CREATE INDEX signing_requests_by_agent ON signing_requests (agent_id, created_at DESC);

CREATE TABLE diary_transfers (
    id                  uuid PRIMARY KEY,
    diary_id            uuid NOT NULL REFERENCES diaries (id) ON DELETE CASCADE,
    source_team_id      uuid NOT NULL REFERENCES teams (id),
    destination_team_id uuid NOT NULL REFERENCES teams (id),
    initiated_by        uuid NOT NULL,
    status              text NOT NULL DEFAULT 'pending'
                        CHECK (status IN ('pending', 'accepted', 'rejected', 'expired')),
    workflow_id         text NOT NULL UNIQUE,
    created_at          timestamptz NOT NULL DEFAULT now(),
    resolved_at         timestamptz,
    expires_at          timestamptz NOT NULL
);
-- At most one pending transfer per diary.
CREATE UNIQUE INDEX diary_transfers_one_pending ON diary_transfers (diary_id)
    WHERE status = 'pending';
CREATE INDEX diary_transfers_by_destination ON diary_transfers (destination_team_id, status);
