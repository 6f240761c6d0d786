-- Hybrid search over diary entries (DECISIONS "Memory", Hybrid search): a vector arm and a
-- full-text arm, each the top N candidates inside the scope and the filters, and the entries
-- that share a rare identifier with a candidate, in one statement (migration 0030); fused by
-- reciprocal rank and ranked in `cairn/infra/repos/search.py` (schemas/ranking.py).
--
-- Every arm reads its candidates from `search_scope` (migration 0027: the filter written once,
-- inlined by the planner), because a filter must run *inside* the arm (before its LIMIT) or the
-- arm returns fewer than N candidates. Its parameters, $2..$10 of `search_diaries` below and of
-- every arm, are:
--   $2 diary ids (the scope), $3 tags (all required; '{}' = any), $4 excluded tags ('{}' =
--   none), $5 entry types ('{}' = all), $6 exclude superseded, $7 exclude suspicious,
--   $8 created before (NULL = open), $9 created after (NULL = open), $10 as of (NULL = now:
--   entries created by then, superseded by the relations accepted by then; migration 0021).

-- name: search_diaries
-- The search: $1 the query, $11 its vector (NULL: no vector arm), $12 mode `vector` (full text
-- only when the vector arm cannot run), $13 candidates per arm, $14 the vector arm's distance
-- cut-off, $15 the most carriers a linking identifier may have, $16..$20 the plan's limits
-- (`search_vector_plan`), $21 how many of the best candidates links are taken from. The first
-- row carries `search` (the plan, the arms' candidates, the links of the candidates that can be
-- among those best: migration 0031) and no entry; every other row is an entry found.
SELECT f.search, f.id, f.diary_id, f.title, f.content, f.tags, f.importance, f.entry_type,
       f.injection_risk, f.injection_threats, f.cid, f.prev_cid, f.signing_request_id,
       f.content_signature, f.superseded_by, f.has_embedding, f.access_count,
       f.last_accessed_at, f.created_by, f.created_at, f.updated_at, f.origin,
       f.hours_since_access, f.matches_query
FROM search_diaries($1, $11, $2, $3, $4, $5, $6, $7, $8, $9, $10,
                    $12, $13, $14, $15, $16, $17, $18, $19, $20, $21) f

-- name: search_vector_plan
-- The vector arm's plan for a scope of $1 rows in a table of $2, $3 rows wanted, under the
-- limits $4..$8 (what `search_diaries` decides inside; for tests and benchmarks).
SELECT p.method, p.ef_search, p.reason FROM search_vector_plan($1, $2, $3, $4, $5, $6, $7, $8) p

-- name: search_vector_version
-- pgvector's version: from 0.8 on a thin scope is searched with its iterative scan.
SELECT extversion FROM pg_extension WHERE extname = 'vector'

-- One arm alone, as `search_diaries` runs it (0030), with the parameters it had as a statement
-- of its own: for tests and benchmarks, which EXPLAIN it (the planner inlines the function, so
-- the plan shown is the arm's own). $1 the query vector or text, $2..$10 the filters above.

-- name: search_vector_exact
-- $11 the distance cut-off, $12 the rows wanted.
SELECT a.id, a.distance
FROM search_vector_exact($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) a

-- name: search_vector_hnsw
-- $11 the rows wanted; the scan keeps `hnsw.ef_search` rows (set_config before it).
SELECT a.id, a.distance FROM search_vector_hnsw($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) a

-- name: search_fulltext
-- $11 the rows wanted.
SELECT a.id FROM search_fulltext($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) a
