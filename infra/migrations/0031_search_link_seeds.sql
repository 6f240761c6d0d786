-- The search's links are looked up only for the candidates that can become the seed (issue 32).
-- 0030 looked up the identifier links of *every* candidate and returned each linked entry's
-- row, content included, though the ranking keeps only the links of its best `link_seeds`
-- candidates (`schemas.ranking.link_seeds`): with an identifier in every entry that was up to
-- ~200 rows read, shipped and thrown away per search.
--
-- Which candidates can be among the best `link_seeds` is known before fusion, for any fusion
-- that gives a higher score to a better position in an arm (reciprocal rank does, whatever the
-- weights): a candidate found by one arm alone at position p is outscored by the p - 1 found
-- before it there, so it is among the best n only if p <= n; a candidate both arms found may
-- beat both arms' first. The seeds are therefore among each arm's first `link_seeds` and the
-- candidates both arms found, and only those are looked up. The fusion itself stays in Python.
--
-- A new parameter, `link_seeds` (last), so the function is replaced, not altered.

DROP FUNCTION search_diaries(
    text, vector, uuid[], text[], text[], text[], boolean, boolean, timestamptz, timestamptz,
    timestamptz, boolean, integer, float8, integer, integer, float8, integer, integer, integer
);

-- The search. `query_vector` NULL: no vector arm; `vector_alone` (mode `vector`): the
-- full-text arm runs only when the vector arm cannot (no query vector, or no vector in scope).
-- Each arm asks for `wanted` candidates; `max_distance` is the vector arm's cut-off,
-- `max_carriers` the most carriers an identifier may have to link, `link_seeds` how many of
-- the best candidates the ranking takes links from; the rest are the plan's limits
-- (`search_vector_plan`; `iterative_ef` NULL where pgvector is older than 0.8).
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
    iterative_ef integer,
    link_seeds integer
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
    seedable uuid[];
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
    -- the candidates that can be among the best `link_seeds` (see the header)
    seedable := coalesce(head.vector_ids[1:link_seeds], '{}')
        || coalesce(head.fulltext_ids[1:link_seeds], '{}')
        || ARRAY(SELECT unnest(head.vector_ids) INTERSECT SELECT unnest(head.fulltext_ids));
    SELECT coalesce(array_agg(l.id), '{}'), coalesce(array_agg(l.seed_id), '{}'),
           coalesce(array_agg(l.carriers), '{}')
    INTO head.link_ids, head.link_seed_ids, head.link_carriers
    FROM search_links(
        seedable, diary_ids, tags, exclude_tags, entry_types, exclude_superseded,
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
