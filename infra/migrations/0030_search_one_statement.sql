-- The search in one statement (issue 32 §4): `search_diaries` does in the database what
-- infra/repos/search.py did in eight statements of a transaction (size the scope, choose the
-- vector arm's plan, both arms, the identifier links, the rows), so a search is one round trip.
-- It is STABLE: every query in it reads the snapshot of the statement that calls it, the one
-- snapshot the transaction used to give. Fusion and ranking stay in Python (schemas/ranking.py):
-- the function returns what they read.
--
-- The arms and the links are SQL functions of their own, one SELECT each over `search_scope`
-- (0027), so the planner inlines them where they are called, as if their text were written
-- there: `search_diaries` runs them, and a test or a benchmark can EXPLAIN each alone. Their
-- parameters follow search_scope's: $2..$10 are the scope and the filters.

-- The planner's estimate of a scope's size, from the column statistics of diary_id without
-- reading a row. EXPLAIN is a utility statement, which a STABLE function may not run: this
-- one is VOLATILE, and reads no row (the snapshot it takes sees nothing).
CREATE FUNCTION search_scope_estimate(diary_ids uuid[]) RETURNS bigint
    LANGUAGE plpgsql VOLATILE
    AS $$
DECLARE
    plan json;
BEGIN
    EXECUTE 'EXPLAIN (FORMAT JSON) SELECT 1 FROM diary_entries WHERE diary_id = ANY($1)'
        INTO plan USING diary_ids;
    RETURN floor((plan -> 0 -> 'Plan' ->> 'Plan Rows')::numeric);
END
$$;

-- The vector arm's plan for a scope: exact for a small one; HNSW for a large one, unless it is
-- too thin a share of the table. pgvector 0.6 applies the scope *after* its HNSW scan, which
-- keeps `ef_search` rows of the whole table, of which about `ef × share` fall inside the scope:
-- ef is chosen so that this is `ef_margin ×` the rows wanted. When even the largest ef cannot
-- deliver that, pgvector 0.8's iterative scan (`iterative_ef` given) keeps scanning until
-- enough rows pass the filters; without it exact search is the only correct plan. The limits
-- come from schemas/limits.py (SEARCH_EXACT_SCOPE_MAX_ROWS, SEARCH_HNSW_EF_*); `scoped_rows` is
-- exact up to the first and the planner's estimate above it.
CREATE FUNCTION search_vector_plan(
    scoped_rows bigint,
    table_rows bigint,
    wanted integer,
    exact_max_rows integer,
    ef_margin float8,
    ef_min integer,
    ef_max integer,
    iterative_ef integer,
    OUT method text,
    OUT ef_search integer,
    OUT reason text
)
    LANGUAGE plpgsql IMMUTABLE
    AS $$
DECLARE
    share float8;
    ef float8;
BEGIN
    IF scoped_rows <= exact_max_rows THEN
        method := 'exact';
        reason := 'small scope';
        RETURN;
    END IF;
    share := CASE WHEN table_rows > 0 THEN least(1.0, scoped_rows::float8 / table_rows)
                  ELSE 1.0 END;
    ef := ceil(ef_margin * wanted / share);
    IF ef <= ef_max THEN
        method := 'hnsw';
        ef_search := greatest(ef_min, ef::integer);
        reason := 'large scope';
    ELSIF iterative_ef IS NOT NULL THEN
        method := 'iterative';
        ef_search := iterative_ef;
        reason := 'scope too thin a share of the table: iterative scan';
    ELSE
        method := 'exact';
        reason := 'scope too thin a share of the table for HNSW';
    END IF;
END
$$;

-- The exact nearest neighbours inside the scope, within the distance cut-off $11, at most $12.
-- Ordering by the function `cosine_distance` rather than the operator `<=>` keeps the planner
-- off the HNSW index (which could only filter after its scan): the scope's vectors are read
-- from the covering index of migration 0004 (an index-only scan) and all compared.
CREATE FUNCTION search_vector_exact(
    query_vector vector, diary_ids uuid[], tags text[], exclude_tags text[], entry_types text[],
    exclude_superseded boolean, exclude_suspicious boolean, created_before timestamptz,
    created_after timestamptz, as_of timestamptz, max_distance float8, wanted integer
) RETURNS TABLE (id uuid, distance float8)
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$
SELECT e.id, cosine_distance(e.embedding, $1) AS distance
FROM search_scope($2, $3, $4, $5, $6, $7, $8, $9, $10) e
WHERE e.embedding IS NOT NULL
  AND cosine_distance(e.embedding, $1) <= $11
ORDER BY cosine_distance(e.embedding, $1), e.id
LIMIT $12
$$;

-- The approximate nearest neighbours through the HNSW index (`ORDER BY <=> LIMIT`), at most
-- $11. The scan yields at most `hnsw.ef_search` rows and the filters drop some of them, so the
-- caller checks whether it got the rows it asked for; the distance cut-off is the caller's too:
-- here it would be one more filter after the scan. With `hnsw.iterative_scan = relaxed_order`
-- the rows come nearly in order: the caller sorts them.
CREATE FUNCTION search_vector_hnsw(
    query_vector vector, diary_ids uuid[], tags text[], exclude_tags text[], entry_types text[],
    exclude_superseded boolean, exclude_suspicious boolean, created_before timestamptz,
    created_after timestamptz, as_of timestamptz, wanted integer
) RETURNS TABLE (id uuid, distance float8)
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$
SELECT e.id, e.embedding <=> $1 AS distance
FROM search_scope($2, $3, $4, $5, $6, $7, $8, $9, $10) e
ORDER BY e.embedding <=> $1
LIMIT $11
$$;

-- The best full-text matches inside the scope, at most $11: `websearch_to_tsquery` (quotes,
-- `or`, `-word`) over the generated `tsv` (GIN index), with their `ts_rank`, best first.
CREATE FUNCTION search_fulltext(
    query text, diary_ids uuid[], tags text[], exclude_tags text[], entry_types text[],
    exclude_superseded boolean, exclude_suspicious boolean, created_before timestamptz,
    created_after timestamptz, as_of timestamptz, wanted integer
) RETURNS TABLE (id uuid, rank real)
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$
SELECT e.id, ts_rank(e.tsv, q) AS rank
FROM search_scope($2, $3, $4, $5, $6, $7, $8, $9, $10) e,
     websearch_to_tsquery('english', $1) AS q
WHERE e.tsv @@ q
ORDER BY ts_rank(e.tsv, q) DESC, e.id
LIMIT $11
$$;

-- The entries that share an identifier with any of the candidates $1: a lexeme of its `tsv`
-- with three digits in a row (a ticket, an error code, a run id, a commit: the parser splits
-- `OPS-2697` into `op` and `-2697`) that at most $11 entries of the scope carry. Each row is a
-- linked entry (in scope, passing the filters $2..$10), a candidate it shares an identifier
-- with (the seed), and how many entries of the scope carry the rarest identifier they share:
-- the caller keeps the links of the seed its ranking picks (`schemas.ranking.link_seeds`)
-- whose identifier is rare for the scope (`link_max_carriers`, never above $11). A follow-up
-- written as "closed OPS-2697" shares no other word with the question its incident answers.
-- Each lexeme is quoted into a tsquery only after the pattern has ruled out every character
-- but [a-z0-9._-]. Driven from the identifiers: each is looked up once in the tsv index
-- however many candidates carry it, its carriers in the scope (one more than a rare identifier
-- may have) counted and, when rare, read again by id through the filters. Joined the other
-- way, the planner walked the primary key over the whole scope (13 s at a million entries,
-- with no identifier at all: bench/scale.py).
CREATE FUNCTION search_links(
    seed_ids uuid[], diary_ids uuid[], tags text[], exclude_tags text[], entry_types text[],
    exclude_superseded boolean, exclude_suspicious boolean, created_before timestamptz,
    created_after timestamptz, as_of timestamptz, max_carriers integer
) RETURNS TABLE (id uuid, seed_id uuid, carriers integer)
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$
WITH identifiers AS MATERIALIZED (
    SELECT DISTINCT s.id AS seed_id, l.lexeme
    FROM diary_entries s, unnest(s.tsv) AS l
    WHERE s.id = ANY($1)
      AND l.lexeme ~ '[0-9]{3}'
      AND l.lexeme ~ '^[a-z0-9._-]+$'
), rare AS MATERIALIZED (
    SELECT i.lexeme, c.ids
    FROM (SELECT DISTINCT d.lexeme FROM identifiers d) i
    CROSS JOIN LATERAL (
        SELECT array_agg(e.id) AS ids FROM (
            SELECT e.id FROM diary_entries e
            WHERE e.tsv @@ ('''' || i.lexeme || '''')::tsquery AND e.diary_id = ANY($2)
            LIMIT $11 + 1
        ) AS e
    ) c
    WHERE cardinality(c.ids) <= $11
), linkable AS MATERIALIZED (
    -- the carriers that pass the filters, read by id all at once (joined per identifier, the
    -- planner walked the scope's diary index once for each)
    SELECT s.id
    FROM search_scope($2, $3, $4, $5, $6, $7, $8, $9, $10) s
    WHERE s.id = ANY(ARRAY(SELECT DISTINCT unnest(r.ids) FROM rare r))
)
SELECT l.id, i.seed_id, min(cardinality(r.ids))::integer AS carriers
FROM rare r
JOIN identifiers i ON i.lexeme = r.lexeme
JOIN linkable l ON l.id = ANY(r.ids)
WHERE l.id <> i.seed_id
GROUP BY l.id, i.seed_id
$$;

-- What the search found beside its entries: on the first row of `search_diaries` only.
-- The plan of the vector arm (NULL without a query vector); the scope's size; whether the query
-- has a negation (`-word`: only the entries that match it are kept); each arm's candidates
-- best first (NULL: the arm did not run; the vector arm's with their cosine distance); and the
-- identifier links of every candidate (`search_links`), three arrays of one row each.
CREATE TYPE search_head AS (
    plan_method text,
    plan_ef_search integer,
    plan_reason text,
    scoped_rows bigint,
    negated boolean,
    vector_ids uuid[],
    vector_distances float8[],
    fulltext_ids uuid[],
    link_ids uuid[],
    link_seed_ids uuid[],
    link_carriers integer[]
);

-- A row of `search_diaries`: the first carries `search` and no entry; each other row is an
-- entry found (a candidate of an arm, or linked to one) as `schemas.memory.entry_from_row`
-- renders it, with what the ranking reads beside: hours since the entry was last read (or
-- written) and whether it matches the query. As of a given instant, an entry is superseded as
-- it was then, and its age counts from then (a later read is not known then).
CREATE TYPE search_found AS (
    search search_head,
    id uuid,
    diary_id uuid,
    title text,
    content text,
    tags text[],
    importance smallint,
    entry_type text,
    injection_risk boolean,
    injection_threats jsonb,
    cid text,
    prev_cid text,
    signing_request_id uuid,
    content_signature text,
    superseded_by uuid,
    has_embedding boolean,
    access_count integer,
    last_accessed_at timestamptz,
    created_by uuid,
    created_at timestamptz,
    updated_at timestamptz,
    origin jsonb,
    hours_since_access float8,
    matches_query boolean
);

-- The search. `query_vector` NULL: no vector arm; `vector_alone` (mode `vector`): the
-- full-text arm runs only when the vector arm cannot (no query vector, or no vector in scope).
-- Each arm asks for `wanted` candidates; `max_distance` is the vector arm's cut-off,
-- `max_carriers` the most carriers an identifier may have to link; the rest are the plan's
-- limits (`search_vector_plan`; `iterative_ef` NULL where pgvector is older than 0.8).
--
-- `plan_cache_mode`: every statement in here is planned for its actual parameters. After five
-- runs Postgres may switch to a generic plan that cannot see which filters are empty nor how
-- large the scope is (measured: 17 ms instead of 1 ms for the full-text arm). The settings it
-- makes with set_config(..., true) (`hnsw.ef_search`, `hnsw.iterative_scan`) last until the
-- end of the caller's transaction, which for the one statement of a search is its own.
CREATE FUNCTION search_diaries(
    query_text text,
    query_vector vector,
    diary_ids uuid[],
    tags text[],
    exclude_tags text[],
    entry_types text[],
    exclude_superseded boolean,
    exclude_suspicious boolean,
    created_before timestamptz,
    created_after timestamptz,
    as_of timestamptz,
    vector_alone boolean,
    wanted integer,
    max_distance float8,
    max_carriers integer,
    exact_max_rows integer,
    ef_margin float8,
    ef_min integer,
    ef_max integer,
    iterative_ef integer
) RETURNS SETOF search_found
    LANGUAGE plpgsql STABLE
    SET plan_cache_mode = force_custom_plan
    AS $$
DECLARE
    q tsquery := websearch_to_tsquery('english', query_text);
    head search_head;
    head_row search_found;
    estimate bigint;
    cap bigint;
    counted bigint;
    chosen record;
    scanned bigint;
    candidates uuid[];
BEGIN
    -- Size the scope: the planner's estimate first (free), then a count capped just above the
    -- exact-search threshold unless the estimate is far above it (counting a large scope costs
    -- ~0.3 µs a row; a wrong estimate only costs speed: a short HNSW scan is redone exactly).
    estimate := search_scope_estimate(diary_ids);
    cap := CASE WHEN estimate <= 2 * exact_max_rows THEN exact_max_rows + 1 ELSE 0 END;
    SELECT count(*) INTO counted FROM (
        SELECT 1 FROM diary_entries e WHERE e.diary_id = ANY(search_diaries.diary_ids) LIMIT cap
    ) AS scoped;
    head.scoped_rows := CASE WHEN counted < cap THEN counted ELSE greatest(counted, estimate) END;
    head.negated := q::text LIKE '%!%';

    IF query_vector IS NOT NULL THEN
        SELECT p.method, p.ef_search, p.reason INTO chosen
        FROM search_vector_plan(
            head.scoped_rows,
            -- the table's size as the planner last estimated it (-1 before the first ANALYZE)
            (SELECT c.reltuples::bigint FROM pg_class c WHERE c.oid = 'diary_entries'::regclass),
            wanted, exact_max_rows, ef_margin, ef_min, ef_max, iterative_ef
        ) p;
        head.plan_method := chosen.method;
        head.plan_ef_search := chosen.ef_search;
        head.plan_reason := chosen.reason;
        IF chosen.method <> 'exact' THEN
            PERFORM set_config('hnsw.ef_search', chosen.ef_search::text, true);
            IF chosen.method = 'iterative' THEN  -- a setting pgvector 0.6 does not know
                PERFORM set_config('hnsw.iterative_scan', 'relaxed_order', true);
            END IF;
            SELECT count(*),
                   array_agg(v.id ORDER BY v.distance, v.id)
                       FILTER (WHERE v.distance <= max_distance),
                   array_agg(v.distance ORDER BY v.distance, v.id)
                       FILTER (WHERE v.distance <= max_distance)
            INTO scanned, head.vector_ids, head.vector_distances
            FROM search_vector_hnsw(
                query_vector, diary_ids, tags, exclude_tags, entry_types, exclude_superseded,
                exclude_suspicious, created_before, created_after, as_of, wanted
            ) v;
            -- A short scan may have run out of candidates inside the scope and the filters
            -- (pgvector filters after the scan): a short answer there would be silently wrong
            -- rather than slow, so the arm is computed exactly instead.
            IF scanned < wanted THEN
                head.vector_ids := NULL;
            ELSE
                head.vector_ids := coalesce(head.vector_ids, '{}');
                head.vector_distances := coalesce(head.vector_distances, '{}');
            END IF;
        END IF;
        IF head.vector_ids IS NULL THEN
            SELECT coalesce(array_agg(v.id ORDER BY v.distance, v.id), '{}'),
                   coalesce(array_agg(v.distance ORDER BY v.distance, v.id), '{}')
            INTO head.vector_ids, head.vector_distances
            FROM search_vector_exact(
                query_vector, diary_ids, tags, exclude_tags, entry_types, exclude_superseded,
                exclude_suspicious, created_before, created_after, as_of, max_distance, wanted
            ) v;
        END IF;
        -- no entry of the scope has a vector (embedding failed): the search is full text only
        IF cardinality(head.vector_ids) = 0 AND NOT EXISTS (
            SELECT 1 FROM diary_entries e
            WHERE e.diary_id = ANY(search_diaries.diary_ids) AND e.embedding IS NOT NULL
        ) THEN
            head.vector_ids := NULL;
            head.vector_distances := NULL;
        END IF;
    END IF;

    IF numnode(q) > 0 AND (NOT vector_alone OR head.vector_ids IS NULL) THEN
        SELECT coalesce(array_agg(f.id ORDER BY f.rank DESC, f.id), '{}') INTO head.fulltext_ids
        FROM search_fulltext(
            query_text, diary_ids, tags, exclude_tags, entry_types, exclude_superseded,
            exclude_suspicious, created_before, created_after, as_of, wanted
        ) f;
    END IF;

    candidates := coalesce(head.vector_ids, '{}') || coalesce(head.fulltext_ids, '{}');
    SELECT coalesce(array_agg(l.id), '{}'), coalesce(array_agg(l.seed_id), '{}'),
           coalesce(array_agg(l.carriers), '{}')
    INTO head.link_ids, head.link_seed_ids, head.link_carriers
    FROM search_links(
        candidates, diary_ids, tags, exclude_tags, entry_types, exclude_superseded,
        exclude_suspicious, created_before, created_after, as_of, max_carriers
    ) l;

    head_row.search := head;
    RETURN NEXT head_row;
    RETURN QUERY
    SELECT NULL::search_head, e.id, e.diary_id, e.title, e.content, e.tags, e.importance,
           e.entry_type, e.injection_risk, e.injection_threats, e.cid, e.prev_cid,
           e.signing_request_id, e.content_signature,
           CASE WHEN as_of IS NULL THEN e.superseded_by
                ELSE superseded_by_as_of(e.id, as_of) END,
           e.embedding IS NOT NULL,
           e.access_count, e.last_accessed_at, e.created_by, e.created_at, e.updated_at, e.origin,
           (CASE WHEN as_of IS NULL
                 THEN extract(epoch FROM now() - coalesce(e.last_accessed_at, e.created_at))
                 ELSE extract(epoch FROM as_of - e.created_at) END / 3600.0)::float8,
           e.tsv @@ q
    FROM diary_entries e
    WHERE e.id = ANY(candidates || head.link_ids);
END
$$;
