-- Exact vector search inside a scope (cairn/infra/repos/search.py, bench/memory.py).
--
-- pgvector 0.6 filters after the HNSW scan, so a search scoped to one diary cannot use the
-- global HNSW index: it compares the query with every vector of the scope instead. From the
-- heap that costs ~5 µs a row (each row on its own page, its vector compressed inline); this
-- covering index keeps a diary's vectors and every column the search filters on side by side,
-- so the same search is an index-only scan at ~1.5 µs a row (1 000 entries: ~3 ms instead of
-- ~11 ms). It costs a second copy of each vector.
CREATE INDEX diary_entries_scope_vectors ON diary_entries (diary_id)
    INCLUDE (embedding, id, tags, entry_type, injection_risk, superseded_by, created_at);

-- Index-only scans skip the heap only on pages the visibility map marks all-visible, which
-- vacuum does. Insert-driven autovacuum waits for 20 % new rows by default; 2 % keeps recent
-- entries from falling back to heap reads for long.
ALTER TABLE diary_entries SET (autovacuum_vacuum_insert_scale_factor = 0.02);
