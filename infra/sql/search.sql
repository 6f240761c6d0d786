-- Hybrid search over diary entries (DECISIONS "Memory", Hybrid search): a vector arm and a
-- full-text arm, each the top N candidates inside the scope and the filters, fused by
-- reciprocal rank in `cairn/infra/repos/search.py`.
--
-- Every arm reads its candidates from `search_scope` (migration 0027: the filter written once,
-- inlined by the planner), because a filter must run *inside* the arm (before its LIMIT) or the
-- arm returns fewer than N candidates. Its parameters, $2..$10 of every arm, are:
--   $2 diary ids (the scope), $3 tags (all required; '{}' = any), $4 excluded tags ('{}' =
--   none), $5 entry types ('{}' = all), $6 exclude superseded, $7 exclude suspicious,
--   $8 created before (NULL = open), $9 created after (NULL = open), $10 as of (NULL = now:
--   entries created by then, superseded by the relations accepted by then; migration 0021).

-- name: search_plan_inputs
-- What the repo needs to choose a plan: the scope's size counted up to $2 (an index-only scan
-- that stops early, so a large scope costs no more than the threshold; $2 = 0 skips it), the
-- table's size as the planner last estimated it (-1 before the first ANALYZE), and whether the
-- query has lexemes and a negation (`-word`).
SELECT
    (SELECT count(*) FROM (
        SELECT 1 FROM diary_entries WHERE diary_id = ANY($1::uuid[]) LIMIT $2
    ) AS scoped) AS scoped_rows,
    (SELECT reltuples::bigint FROM pg_class WHERE oid = 'diary_entries'::regclass)
        AS table_rows,
    numnode(q) > 0 AS has_lexemes,
    q::text LIKE '%!%' AS negated
FROM websearch_to_tsquery('english', $3) AS q

-- name: search_scope_estimate
-- The planner's estimate of the scope's size, from the column statistics of diary_id without
-- reading a row: whether counting is worth it, and for a large scope its share of the table,
-- which sets how many candidates the HNSW scan must keep.
EXPLAIN (FORMAT JSON) SELECT 1 FROM diary_entries WHERE diary_id = ANY($1::uuid[])

-- name: search_custom_plans
-- For this transaction: plan every statement for its actual parameters. asyncpg prepares
-- statements, and after five runs Postgres may switch to a generic plan that cannot see which
-- filters are empty nor how large the scope is (measured: 17 ms instead of 1 ms for the
-- full-text arm).
SELECT set_config('plan_cache_mode', 'force_custom_plan', true)

-- name: search_set_ef_search
-- For this transaction: how many candidates the HNSW scan keeps. pgvector 0.6 filters *after*
-- the scan, so a scoped query needs more than the default 40.
SELECT set_config('hnsw.ef_search', $1::integer::text, true)

-- name: search_vector_exact
-- The exact nearest neighbours inside the scope. Ordering by the function `cosine_distance`
-- rather than the operator `<=>` keeps the planner off the HNSW index (which could only filter
-- after its scan): the scope's vectors are read from the covering index of migration 0004
-- (an index-only scan) and all compared.
SELECT e.id, cosine_distance(e.embedding, $1) AS distance
FROM search_scope($2, $3, $4, $5, $6, $7, $8, $9, $10) e
WHERE e.embedding IS NOT NULL
  AND cosine_distance(e.embedding, $1) <= $11::float8
ORDER BY cosine_distance(e.embedding, $1), e.id
LIMIT $12

-- name: search_vector_hnsw
-- The approximate nearest neighbours through the HNSW index (`ORDER BY <=> LIMIT`). The scan
-- yields at most `hnsw.ef_search` rows and the filters drop some of them, so the caller checks
-- whether it got the $11 rows it asked for. The distance cut-off is applied by the caller too:
-- inside this query it would be one more filter after the scan.
SELECT e.id, e.embedding <=> $1 AS distance
FROM search_scope($2, $3, $4, $5, $6, $7, $8, $9, $10) e
ORDER BY e.embedding <=> $1
LIMIT $11

-- name: search_fulltext
-- The best full-text matches inside the scope: `websearch_to_tsquery` (quotes, `or`, `-word`)
-- over the generated `tsv` (GIN index), ranked by `ts_rank`.
SELECT e.id
FROM search_scope($2, $3, $4, $5, $6, $7, $8, $9, $10) e,
     websearch_to_tsquery('english', $1) AS q
WHERE e.tsv @@ q
ORDER BY ts_rank(e.tsv, q) DESC, e.id
LIMIT $11

-- name: search_scope_has_vectors
-- Whether any entry of the scope has a vector: when none has, the search is full text only.
SELECT EXISTS (
    SELECT 1 FROM diary_entries WHERE diary_id = ANY($1::uuid[]) AND embedding IS NOT NULL
)

-- name: search_fetch_entries
-- The fused candidates as `schemas.memory.entry_from_row` renders them, with what the score
-- needs: hours since the entry was last read (or written), and whether it matches the query
-- (a query with a negation keeps only the entries that match it). As of $3, an entry is
-- superseded as it was then, and its age counts from then (a later read is not known then).
SELECT e.id, e.diary_id, e.title, e.content, e.tags, e.importance, e.entry_type,
       e.injection_risk, e.injection_threats, e.cid, e.prev_cid, e.signing_request_id,
       e.content_signature,
       CASE WHEN $3::timestamptz IS NULL THEN e.superseded_by
            ELSE superseded_by_as_of(e.id, $3::timestamptz) END AS superseded_by,
       e.embedding IS NOT NULL AS has_embedding,
       e.access_count, e.last_accessed_at, e.created_by, e.created_at, e.updated_at, e.origin,
       CASE WHEN $3::timestamptz IS NULL
            THEN extract(epoch FROM now() - coalesce(e.last_accessed_at, e.created_at))
            ELSE extract(epoch FROM $3::timestamptz - e.created_at) END / 3600.0
           AS hours_since_access,
       e.tsv @@ websearch_to_tsquery('english', $2) AS matches_query
FROM diary_entries e
WHERE e.id = ANY($1::uuid[])

-- name: search_linked_entries
-- Entries that share a rare identifier with the seeds ($1, the best fused candidates): a lexeme
-- of a seed's `tsv` with three digits in a row (a ticket, an error code, a run id, a commit:
-- the parser splits `OPS-2697` into `op` and `-2697`) that at most $11 entries of the scope
-- carry (`schemas.ranking.link_max_carriers`), so that `03:10`, `128 GPUs` or a project prefix
-- in every title link nothing. A follow-up written as "closed OPS-2697"
-- shares no other word with the question its incident answers. Each lexeme is quoted into a
-- tsquery only after the pattern has ruled out every character but [a-z0-9._-]. Returns each
-- linked entry (in scope, passing the filters $2..$10 of the arms, not a seed) with the first
-- seed it came from; $12 caps the rows.
WITH identifiers AS (
    SELECT DISTINCT s.id AS seed_id, ('''' || l.lexeme || '''')::tsquery AS q
    FROM diary_entries s, unnest(s.tsv) AS l
    WHERE s.id = ANY($1::uuid[])
      AND l.lexeme ~ '[0-9]{3}'
      AND l.lexeme ~ '^[a-z0-9._-]+$'
), rare AS (
    SELECT i.seed_id, i.q
    FROM identifiers i
    WHERE (SELECT count(*) FROM (
        SELECT 1 FROM diary_entries e WHERE e.tsv @@ i.q AND e.diary_id = ANY($2::uuid[])
        LIMIT $11 + 1
    ) AS carriers) <= $11
), linked AS MATERIALIZED (
    -- driven from the identifiers, each looked up in the tsv index: at most $11 carriers each.
    -- Joined the other way, DISTINCT ON with LIMIT walked the primary key over the whole scope
    -- (13 s at a million entries, with no identifier at all: bench/scale.py)
    SELECT e.id, link.seed_id
    FROM rare link
    CROSS JOIN LATERAL (
        SELECT s.id FROM search_scope($2, $3, $4, $5, $6, $7, $8, $9, $10) s
        WHERE s.tsv @@ link.q AND NOT s.id = ANY($1::uuid[])
    ) e
)
SELECT DISTINCT ON (id) id, seed_id
FROM linked
ORDER BY id, array_position($1::uuid[], seed_id)
LIMIT $12
