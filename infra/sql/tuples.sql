-- Relation tuples of the permission engine (cairn/infra/permissions.py).

-- name: list_object_tuples
SELECT namespace, object_id, relation, subject_ns, subject_id, subject_relation
FROM relation_tuples
WHERE namespace = $1 AND object_id = $2

-- name: list_objects_tuples
SELECT t.namespace, t.object_id, t.relation, t.subject_ns, t.subject_id, t.subject_relation
FROM relation_tuples t
JOIN unnest($1::text[], $2::text[]) AS o (namespace, object_id)
  ON t.namespace = o.namespace AND t.object_id = o.object_id

-- name: write_tuples
WITH written AS (
    INSERT INTO relation_tuples
        (namespace, object_id, relation, subject_ns, subject_id, subject_relation)
    SELECT n.namespace, n.object_id, n.relation, n.subject_ns, n.subject_id, n.subject_relation
    FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[])
        AS n (namespace, object_id, relation, subject_ns, subject_id, subject_relation)
    ON CONFLICT DO NOTHING
    RETURNING 1
)
SELECT count(*) FROM written

-- name: delete_tuples
WITH deleted AS (
    DELETE FROM relation_tuples t
    USING unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[])
        AS d (namespace, object_id, relation, subject_ns, subject_id, subject_relation)
    WHERE t.namespace = d.namespace AND t.object_id = d.object_id AND t.relation = d.relation
      AND t.subject_ns = d.subject_ns AND t.subject_id = d.subject_id
      AND t.subject_relation = d.subject_relation
    RETURNING 1
)
SELECT count(*) FROM deleted

-- name: delete_object_tuples
-- every tuple of the object, and every tuple naming it as a subject or subject set
WITH deleted AS (
    DELETE FROM relation_tuples
    WHERE (namespace = $1 AND object_id = $2) OR (subject_ns = $1 AND subject_id = $2)
    RETURNING 1
)
SELECT count(*) FROM deleted

-- name: objects_related
-- ids of objects whose relation holds one of the given whole objects (the arrows, reversed)
SELECT DISTINCT object_id
FROM relation_tuples
WHERE namespace = $1 AND relation = $2
  AND subject_ns = $3 AND subject_id = ANY($4::text[]) AND subject_relation = ''

-- One statement per evaluation (cairn/infra/permissions.py `Closure`): what a check or a lookup
-- reads, fetched at once instead of one query per breadth-first level.

-- name: object_closure
-- Every object a check of $1:$2 may read the tuples of, with those tuples (the walk is the
-- migration's `permission_closure`; $3/$4 the followed relations, $5 the level bound).
SELECT namespace, object_id, relation, subject_ns, subject_id, subject_relation
FROM permission_closure($1::text, $2::text, $3::text[], $4::text[], $5::integer)

-- name: diary_with_closure
-- A diary (memory_get_diary's columns) and, in `closure`, object_closure's rows for it as
-- JSON arrays ($2..$4 as object_closure's $3..$5): reading a diary and deciding what its
-- reader may do with it is one statement. No row when there is no such diary.
SELECT d.id, d.created_by, d.team_id, d.name, d.visibility, d.signed, d.created_at,
       d.updated_at, tm.status AS team_status,
       (SELECT jsonb_agg(jsonb_build_array(c.namespace, c.object_id, c.relation, c.subject_ns,
                                           c.subject_id, c.subject_relation))
        FROM permission_closure('Diary', $1::text, $2::text[], $3::text[], $4::integer) c)
         AS closure
FROM diaries d
JOIN teams tm ON tm.id = d.team_id
WHERE d.id = $1::text::uuid

-- name: subject_closure
-- What a lookup for the subject $1:$2#$3 reads, in one statement: each userset holding it,
-- directly (0 hops) or through subject sets, with the fewest hops, as a `held` row (UNION and
-- the hop bound $4 make cycles terminate), and the `related` tuples the
-- lookup's arrows walk backwards: `X#via@Y` with (X's namespace, via) among $5/$6 and Y a
-- whole object the subject holds a relation on, the team $7 (a team key's own, or NULL), or an
-- X found before; `step` is how many arrows led to it, at most $8.
-- Every step reads relation_tuples by its subject index, one probe per userset found (and per
-- arrow: the index's last two columns), never the table: the probes are LATERAL subqueries
-- behind OFFSET 0, which the planner cannot flatten into a join it may then hash. As a join,
-- at a million entries' parent tuples, the planner chose to hash the whole table twice for a
-- caller of one team (bench/scale.py: 490 ms for every `GET /diaries` and team search).
WITH RECURSIVE held (namespace, object_id, relation, hops) AS (
    SELECT t.namespace, t.object_id, t.relation, 0
    FROM relation_tuples t
    WHERE t.subject_ns = $1 AND t.subject_id = $2 AND t.subject_relation = $3
  UNION
    SELECT t.namespace, t.object_id, t.relation, h.hops + 1
    FROM held h
    CROSS JOIN LATERAL (
        SELECT t.namespace, t.object_id, t.relation
        FROM relation_tuples t
        WHERE t.subject_ns = h.namespace AND t.subject_id = h.object_id
          AND t.subject_relation = h.relation
        OFFSET 0
    ) t
    WHERE h.hops < $4
), holding AS (
    SELECT namespace, object_id, relation, min(hops) AS hops
    FROM held
    GROUP BY namespace, object_id, relation
), arrows (namespace, relation) AS (
    SELECT * FROM unnest($5::text[], $6::text[])
), starts (namespace, object_id) AS (
    SELECT namespace, object_id FROM holding
    UNION
    SELECT 'Team', $7::text WHERE $7::text IS NOT NULL
), related (namespace, object_id, relation, subject_ns, subject_id, step) AS (
    -- the starts themselves, as step 0, so that the probe below is written once
    SELECT namespace, object_id, '', '', '', 0 FROM starts
  UNION
    SELECT t.namespace, t.object_id, t.relation, t.subject_ns, t.subject_id, r.step + 1
    FROM related r
    CROSS JOIN arrows a
    CROSS JOIN LATERAL (
        SELECT t.namespace, t.object_id, t.relation, t.subject_ns, t.subject_id
        FROM relation_tuples t
        WHERE t.subject_ns = r.namespace AND t.subject_id = r.object_id
          AND t.subject_relation = '' AND t.namespace = a.namespace AND t.relation = a.relation
        OFFSET 0
    ) t
    WHERE r.step < $8
)
SELECT 'held' AS kind, namespace, object_id, relation, hops, NULL AS subject_ns,
       NULL AS subject_id, NULL::int AS step
FROM holding
UNION ALL
SELECT 'related', namespace, object_id, relation, NULL, subject_ns, subject_id, min(step)
FROM related
WHERE step > 0
GROUP BY namespace, object_id, relation, subject_ns, subject_id
