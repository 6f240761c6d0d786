-- The search filter, written once (issue 34 §4): the entries of a scope that pass a search's
-- filters, as of an instant. Every arm of `infra/sql/search.sql` reads its candidates from it;
-- four copies of the supersession and `asOf` rule had already drifted apart once.
--
-- A set-returning SQL function that is STABLE, not STRICT, and one SELECT is inlined by the
-- planner into the statement that calls it: the arms are planned as if the WHERE clause were
-- written in them (the HNSW arm still orders the index scan by `<=>`, the exact arm still reads
-- the covering index of 0004), and with custom plans each empty filter folds away.
--
-- as_of NULL: now (superseded by `superseded_by`, or by an accepted relation whose sync has
-- not run yet); else entries created by then, superseded as they were then (0021). The body
-- names each parameter with the function's name: `tags` alone would be the column.
CREATE FUNCTION search_scope(
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
WHERE e.diary_id = ANY(search_scope.diary_ids)
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
