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

-- name: subject_memberships
-- every userset holding the subject, directly (0 hops) or through subject sets, with the
-- fewest hops; UNION plus the hop bound ($4) make cycles terminate
WITH RECURSIVE held (namespace, object_id, relation, hops) AS (
    SELECT t.namespace, t.object_id, t.relation, 0
    FROM relation_tuples t
    WHERE t.subject_ns = $1 AND t.subject_id = $2 AND t.subject_relation = $3
  UNION
    SELECT t.namespace, t.object_id, t.relation, h.hops + 1
    FROM held h
    JOIN relation_tuples t
      ON t.subject_ns = h.namespace AND t.subject_id = h.object_id
     AND t.subject_relation = h.relation
    WHERE h.hops < $4
)
SELECT namespace, object_id, relation, min(hops) AS hops
FROM held
GROUP BY namespace, object_id, relation

-- name: objects_related
-- ids of objects whose relation holds one of the given whole objects (the arrows, reversed)
SELECT DISTINCT object_id
FROM relation_tuples
WHERE namespace = $1 AND relation = $2
  AND subject_ns = $3 AND subject_id = ANY($4::text[]) AND subject_relation = ''
