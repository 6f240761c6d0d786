-- Context packs and rendered packs (SPEC 2.5): content-addressed selections of a diary's entries
-- with a compression level each, and immutable Markdown renderings of them. Both go with their
-- diary (ON DELETE CASCADE); the maintenance sweep deletes expired, unpinned ones.

CREATE TABLE context_packs (
    id                 uuid PRIMARY KEY,
    diary_id           uuid NOT NULL REFERENCES diaries (id) ON DELETE CASCADE,
    -- CIDv1 dag-cbor over `payload` (schemas.kernel.cids.pack_cid); creator and times unhashed
    pack_cid           text NOT NULL UNIQUE,
    pack_type          text NOT NULL CHECK (pack_type IN ('optimized', 'custom')),
    params             jsonb NOT NULL DEFAULT '{}',
    -- the hashed envelope as JSON (entry CIDs as strings), so anyone can recompute pack_cid
    payload            jsonb NOT NULL,
    token_budget       integer CHECK (token_budget >= 1),
    created_by         uuid NOT NULL,
    created_by_ns      text NOT NULL DEFAULT 'Agent' CHECK (created_by_ns IN ('Agent', 'Human')),
    supersedes_pack_id uuid REFERENCES context_packs (id) ON DELETE SET NULL,
    pinned             boolean NOT NULL DEFAULT false,
    expires_at         timestamptz DEFAULT now() + interval '7 days',
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now(),
    -- a pinned pack never expires; an unpinned one always has an expiry
    CHECK ((pinned AND expires_at IS NULL) OR (NOT pinned AND expires_at IS NOT NULL))
);
CREATE INDEX context_packs_by_diary ON context_packs (diary_id, created_at DESC, id DESC);
CREATE INDEX context_packs_by_supersedes ON context_packs (supersedes_pack_id)
    WHERE supersedes_pack_id IS NOT NULL;
CREATE INDEX context_packs_expiry ON context_packs (expires_at) WHERE NOT pinned;

CREATE TABLE context_pack_entries (
    id                 uuid PRIMARY KEY,
    pack_id            uuid NOT NULL REFERENCES context_packs (id) ON DELETE CASCADE,
    -- no foreign key: a pack is a snapshot and outlives an entry deleted later
    entry_id           uuid NOT NULL,
    entry_cid_snapshot text NOT NULL,
    compression_level  text NOT NULL CHECK (compression_level IN ('full', 'summary', 'keywords')),
    original_tokens    integer NOT NULL CHECK (original_tokens >= 0),
    packed_tokens      integer NOT NULL CHECK (packed_tokens >= 0),
    rank               integer NOT NULL CHECK (rank >= 1),
    UNIQUE (pack_id, entry_id),
    UNIQUE (pack_id, rank)
);
CREATE INDEX context_pack_entries_by_entry ON context_pack_entries (entry_id);

CREATE TABLE rendered_packs (
    id               uuid PRIMARY KEY,
    -- CIDv1 dag-cbor over {contentHash, renderMethod, sourcePackCid}
    pack_cid         text NOT NULL UNIQUE,
    source_pack_id   uuid NOT NULL REFERENCES context_packs (id) ON DELETE CASCADE,
    diary_id         uuid NOT NULL REFERENCES diaries (id) ON DELETE CASCADE,
    content          text NOT NULL CHECK (char_length(content) <= 500000),
    content_hash     text NOT NULL CHECK (content_hash ~ '^[0-9a-f]{64}$'),
    render_method    text NOT NULL CHECK (char_length(render_method) BETWEEN 1 AND 100),
    total_tokens     integer NOT NULL CHECK (total_tokens >= 0),
    description      text CHECK (char_length(description) <= 256),
    created_by       uuid NOT NULL,
    created_by_ns    text NOT NULL DEFAULT 'Agent' CHECK (created_by_ns IN ('Agent', 'Human')),
    verified_task_id uuid REFERENCES tasks (id) ON DELETE SET NULL,
    pinned           boolean NOT NULL DEFAULT false,
    expires_at       timestamptz DEFAULT now() + interval '7 days',
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    CHECK ((pinned AND expires_at IS NULL) OR (NOT pinned AND expires_at IS NOT NULL))
);
CREATE INDEX rendered_packs_by_source ON rendered_packs (source_pack_id, created_at DESC, id DESC);
CREATE INDEX rendered_packs_by_diary ON rendered_packs (diary_id, created_at DESC, id DESC);
CREATE INDEX rendered_packs_expiry ON rendered_packs (expires_at) WHERE NOT pinned;

-- What was rendered never changes: the content, its hash and CID, its source and method.
CREATE FUNCTION rendered_packs_immutable() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.content IS DISTINCT FROM OLD.content
       OR NEW.content_hash IS DISTINCT FROM OLD.content_hash
       OR NEW.pack_cid IS DISTINCT FROM OLD.pack_cid
       OR NEW.render_method IS DISTINCT FROM OLD.render_method
       OR NEW.source_pack_id IS DISTINCT FROM OLD.source_pack_id THEN
        RAISE EXCEPTION 'rendered pack content is immutable' USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER rendered_packs_immutable BEFORE UPDATE ON rendered_packs
    FOR EACH ROW EXECUTE FUNCTION rendered_packs_immutable();
