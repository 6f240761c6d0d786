-- Time-aware retrieval (issue 26): `asOf` reads a diary as it stood at an instant, and
-- supersession then is the `supersedes` relations accepted by then. A relation records when
-- it was accepted; the rule lives here, in one trigger, so every writer (the relation create
-- and update activities, the diary import, benchmarks loading a labelled set) keeps it.
ALTER TABLE entry_relations ADD COLUMN accepted_at timestamptz;

-- Backfill: until now a relation's `updated_at` moved only when it was created or its status
-- changed, so an accepted relation's `updated_at` is the moment it became accepted.
UPDATE entry_relations SET accepted_at = updated_at WHERE status = 'accepted';

ALTER TABLE entry_relations ADD CONSTRAINT entry_relations_accepted_at_check
    CHECK ((status = 'accepted') = (accepted_at IS NOT NULL));

-- Accepted: the first moment it became so (accepting again keeps it; an insert may give it, as
-- a benchmark replaying history does). Any other status: none. A relation accepted, then
-- rejected, then accepted again counts from the last acceptance: past states are not kept.
CREATE FUNCTION entry_relations_accepted_at() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.status <> 'accepted' THEN
        NEW.accepted_at := NULL;
    ELSIF TG_OP = 'UPDATE' AND OLD.status = 'accepted' THEN
        NEW.accepted_at := OLD.accepted_at;
    ELSIF TG_OP = 'UPDATE' OR NEW.accepted_at IS NULL THEN
        NEW.accepted_at := now();
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER entry_relations_accepted_at BEFORE INSERT OR UPDATE ON entry_relations
    FOR EACH ROW EXECUTE FUNCTION entry_relations_accepted_at();

-- The entry that superseded `entry` as of an instant: the source of the `supersedes` relation
-- onto it accepted last by then (NULL: not superseded then). `diary_entries.superseded_by` is
-- this function at 'infinity', kept in step by `memory_sync_superseded_by`.
CREATE FUNCTION superseded_by_as_of(entry uuid, as_of timestamptz) RETURNS uuid
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$ SELECT r.source_id FROM entry_relations r
          WHERE r.target_id = entry AND r.relation = 'supersedes' AND r.status = 'accepted'
            AND r.accepted_at <= as_of
          ORDER BY r.accepted_at DESC, r.id DESC
          LIMIT 1 $$;
