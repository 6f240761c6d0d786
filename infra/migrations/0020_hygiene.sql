-- Memory hygiene (issue 26): exact duplicates refused at write time, counted per diary, and the
-- index their lookup uses.
--
-- An entry's content is a duplicate of another's in the same diary when both are equal after
-- trimming whitespace (`btrim(content, E' \t\n\r\f\v')`, the expression of
-- `memory_find_exact_duplicate`). Diaries written before this change may already hold such
-- pairs, so the index is not unique: the insert's transaction takes an advisory lock on
-- (diary, content digest) and looks the digest up before it writes (MemoryRepo.insert_entry).
CREATE INDEX diary_entries_by_content_digest
    ON diary_entries (diary_id, md5(btrim(content, E' \t\n\r\f\v')));

-- One row per refused create (the id the create would have given its entry, so a retried
-- activity counts it once); the count per diary is the hygiene report's `duplicatesRefused`.
-- The existing entry it matched is kept as history, not as a foreign key: deleting that entry
-- does not undo the refusal.
CREATE TABLE entry_duplicates_refused (
    entry_id     uuid PRIMARY KEY,
    diary_id     uuid NOT NULL REFERENCES diaries (id) ON DELETE CASCADE,
    duplicate_of uuid NOT NULL,
    refused_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX entry_duplicates_refused_by_diary ON entry_duplicates_refused (diary_id);

-- Near-duplicate scans of the consolidation (its proposals are entry_relations rows with
-- status `proposed`): the live entries of a diary in creation order, the cursor of the sweep.
CREATE INDEX diary_entries_by_creation ON diary_entries (created_at, id);

-- When a search or pack last returned the entry (batched by the API: api/hygiene.py). Its own
-- column, not `last_accessed_at`: search ranks by that one's recency, and counting retrievals
-- must not change what a search returns.
ALTER TABLE diary_entries ADD COLUMN last_retrieved_at timestamptz;
