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
