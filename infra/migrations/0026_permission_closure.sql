-- The permission closure of one object as a function, so object_closure and diary_with_closure
-- (infra/sql/tuples.sql) share one definition of the walk: the object, and recursively each
-- object its tuples lead to, a subject set (`Group:g#members`) always, a whole object only
-- through the relations named by (arrow_ns, arrow_rel) (the model's arrows and owner paths).
-- max_depth bounds the levels; UNION makes cycles end. An object without tuples comes back
-- once, its relation NULL (it was reached: it has none). A single-SELECT SQL function, STABLE:
-- the planner inlines it into the calling statement.
CREATE FUNCTION permission_closure(
    root_ns text, root_id text, arrow_ns text[], arrow_rel text[], max_depth integer
) RETURNS TABLE (
    namespace text, object_id text, relation text,
    subject_ns text, subject_id text, subject_relation text
)
LANGUAGE sql STABLE
AS $$
WITH RECURSIVE reached (namespace, object_id, depth) AS (
    SELECT root_ns, root_id, 0
  UNION
    SELECT t.subject_ns, t.subject_id, r.depth + 1
    FROM reached r
    JOIN relation_tuples t ON t.namespace = r.namespace AND t.object_id = r.object_id
    WHERE r.depth < max_depth
      AND (t.subject_relation <> ''
           OR (t.namespace, t.relation) IN (SELECT * FROM unnest(arrow_ns, arrow_rel)))
)
SELECT o.namespace, o.object_id, t.relation, t.subject_ns, t.subject_id, t.subject_relation
FROM (SELECT DISTINCT r.namespace, r.object_id FROM reached r) o
LEFT JOIN relation_tuples t ON t.namespace = o.namespace AND t.object_id = o.object_id
$$;
