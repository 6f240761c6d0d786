-- Entries imported from another memory system (Mem0, Letta, COGX; docs/imports.md) keep where
-- they came from: the format, the record's own id and timestamps, the imported file's CID and
-- the record's metadata. NULL for entries written here or imported from a Cairn archive.
ALTER TABLE diary_entries ADD COLUMN origin jsonb;
