-- Writes at the embedding's pace (issue 32, 3): what a search or an append records no longer
-- rewrites the widest table. `diary_entries` carries the HNSW index, two GIN indexes and the
-- covering vector index; at fillfactor 100 an update of one of its rows is not HOT, so it
-- inserts into every index again, the HNSW graph included.

-- When a search or pack last returned the entry (batched by the API: api/hygiene.py, recorded
-- by `RetrievalsRecord`), in a narrow table of its own: recording a retrieval writes nothing to
-- the vector-indexed table. No row: never returned.
CREATE TABLE entry_retrievals (
    entry_id          uuid PRIMARY KEY REFERENCES diary_entries (id) ON DELETE CASCADE,
    last_retrieved_at timestamptz NOT NULL
);
INSERT INTO entry_retrievals (entry_id, last_retrieved_at)
SELECT id, last_retrieved_at FROM diary_entries WHERE last_retrieved_at IS NOT NULL;
ALTER TABLE diary_entries DROP COLUMN last_retrieved_at;

-- A signed diary's chain head, the CID its next entry chains to ('' while it is empty): kept
-- on the diary row and moved by each append in its own transaction, so an append no longer
-- finds it by an anti-join over the whole diary. Unused (and '') for unsigned diaries. The
-- signed diaries written before get theirs from their entries (memory_chain_head_from_entries
-- spells the same expression).
ALTER TABLE diaries ADD COLUMN chain_head text NOT NULL DEFAULT '';
UPDATE diaries d
SET chain_head = coalesce((
    SELECT e.cid
    FROM diary_entries e
    WHERE e.diary_id = d.id
      AND NOT EXISTS (
          SELECT 1 FROM diary_entries n WHERE n.diary_id = e.diary_id AND n.prev_cid = e.cid)
    LIMIT 1
), '')
WHERE d.signed;

-- The consolidation sweep's work: the entries whose vector was stored or replaced since the
-- sweep last looked at them, so that a sweep's cost follows what changed, not the diary's size.
-- A row per entry; `seq` orders them (oldest change first) and tells a mark the sweep consumed
-- from one made again meanwhile (the sweep deletes a row only at the seq it probed). One
-- trigger marks, so that every writer of a vector (create, update, late embedding, import)
-- keeps the rule; a set rather than a position in creation order, because an entry embedded
-- late, or a transaction that commits after a later one, would fall behind a position.
CREATE TABLE consolidation_pending (
    entry_id uuid PRIMARY KEY REFERENCES diary_entries (id) ON DELETE CASCADE,
    seq      bigserial NOT NULL
);
CREATE INDEX consolidation_pending_by_seq ON consolidation_pending (seq);

-- The vectors are compared in the function, not in the trigger's WHEN: a WHEN clause is restored
-- by pg_dump/pg_upgrade with an empty search_path, where pgvector's `=` (behind IS DISTINCT
-- FROM) does not resolve, so the restore of the whole schema would fail on it.
CREATE FUNCTION consolidation_pending_mark() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND NEW.embedding IS NOT DISTINCT FROM OLD.embedding THEN
        RETURN NULL;
    END IF;
    INSERT INTO consolidation_pending (entry_id) VALUES (NEW.id)
    ON CONFLICT (entry_id) DO UPDATE SET seq = excluded.seq;
    RETURN NULL;
END
$$;
CREATE TRIGGER consolidation_pending_on_insert AFTER INSERT ON diary_entries
    FOR EACH ROW WHEN (NEW.embedding IS NOT NULL)
    EXECUTE FUNCTION consolidation_pending_mark();
CREATE TRIGGER consolidation_pending_on_embedding AFTER UPDATE OF embedding ON diary_entries
    FOR EACH ROW WHEN (NEW.embedding IS NOT NULL)
    EXECUTE FUNCTION consolidation_pending_mark();

-- Before this change the sweep had no position kept between its daily runs: every entry with a
-- vector waits for its first sweep, oldest first, as the old sweep took them.
INSERT INTO consolidation_pending (entry_id)
SELECT id FROM diary_entries WHERE embedding IS NOT NULL ORDER BY created_at, id;

-- The old sweep's cursor index: nothing orders by it now, and `diary_entries_feed` (the same
-- columns, descending) serves that order anyway; one index less for every entry write.
DROP INDEX diary_entries_by_creation;
