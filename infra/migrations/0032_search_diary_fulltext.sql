-- One diary's full-text arm reads that diary's postings, not the whole table's (issue 32).
--
-- The full-text arm found its candidates in the table-wide GIN index on `tsv` and dropped every
-- other diary's afterwards: for a query of common words that index scan decodes posting lists
-- of 40 000-190 000 entries whatever the scope (10-11 ms of a 13.5 ms search at a million
-- entries, bench/scale.py). A GIN index on (diary_id, tsv) (`btree_gin` gives uuid its GIN
-- operator class) intersects the diary's postings with the words' inside the index, skipping
-- through the long lists: 12-13 ms -> 4-5 ms for the arm alone at a million entries.
--
-- The planner takes that index only for `diary_id = x`, never for `diary_id = ANY('{x}')`, so
-- the search filter (0027) writes a scope of one diary as the equality. Each search is planned
-- for its own parameters (`plan_cache_mode`, 0030), so the CASE folds to one of its branches
-- before planning; the arms' other plans take the equality as they took the one-element ANY.
-- A scope of many diaries keeps the table-wide index: one probe per diary costs more than the
-- one scan (a team of 20 diaries: 70 ms against 13-16 ms).
--
-- Building the index holds a SHARE lock on diary_entries (no entry writes) for its build: 3.4 s
-- at a million entries here, with 2 GB of maintenance_work_mem (35 MB of index). A larger deployment builds it first, out of band, with
-- `CREATE INDEX CONCURRENTLY diary_entries_diary_tsv ON diary_entries USING gin (diary_id, tsv)`
-- (after `CREATE EXTENSION btree_gin`); this migration then finds it and only replaces the
-- filter.

--
-- `btree_gin` is a contrib module: PostgreSQL's packages and managed services ship it, some
-- builds do not (the PostgreSQL 16 `pgserver` wheel of the pgvector 0.6 path). Where it is
-- missing the index is not built and the search is as before (the equality reads the `tsv`
-- index like the `= ANY` did); installing the module later and building the index as above
-- gives the speed without another migration.
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'btree_gin') THEN
        CREATE EXTENSION IF NOT EXISTS btree_gin;
        CREATE INDEX IF NOT EXISTS diary_entries_diary_tsv
            ON diary_entries USING gin (diary_id, tsv);
    ELSE
        RAISE NOTICE 'btree_gin is not available: one diary''s full text reads the tsv index';
    END IF;
END
$$;

CREATE OR REPLACE FUNCTION search_scope(
    diary_ids uuid[],
    tags text[],
    exclude_tags text[],
    entry_types text[],
    exclude_superseded boolean,
    exclude_suspicious boolean,
    created_before timestamptz,
    created_after timestamptz,
    as_of timestamptz
) RETURNS SETOF diary_entries
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$
SELECT e.*
FROM diary_entries e
WHERE CASE WHEN cardinality(search_scope.diary_ids) = 1
           THEN e.diary_id = search_scope.diary_ids[1]
           ELSE e.diary_id = ANY(search_scope.diary_ids) END
  AND e.tags @> search_scope.tags
  AND NOT (e.tags && search_scope.exclude_tags)
  AND (cardinality(search_scope.entry_types) = 0 OR e.entry_type = ANY(search_scope.entry_types))
  AND (NOT search_scope.exclude_superseded OR CASE WHEN search_scope.as_of IS NULL
        THEN e.superseded_by IS NULL AND NOT EXISTS (
            SELECT 1 FROM entry_relations r
            WHERE r.target_id = e.id AND r.relation = 'supersedes' AND r.status = 'accepted')
        ELSE superseded_by_as_of(e.id, search_scope.as_of) IS NULL END)
  AND (NOT search_scope.exclude_suspicious OR NOT e.injection_risk)
  AND (search_scope.created_before IS NULL OR e.created_at < search_scope.created_before)
  AND (search_scope.created_after IS NULL OR e.created_at > search_scope.created_after)
  AND (search_scope.as_of IS NULL OR e.created_at <= search_scope.as_of)
$$;
