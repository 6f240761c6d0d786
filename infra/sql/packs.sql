-- Context packs and rendered packs (infra/repos/packs.py).

-- name: pack_entries_for_selection
-- The selected entries of a diary, with what compiling, the injection gate and `asOf` need
-- (and the title a pack's entries are shown by).
SELECT id, diary_id, cid, title, content, injection_risk, injection_threats, created_at
FROM diary_entries
WHERE id = ANY($1::uuid[])

-- name: pack_get
SELECT p.id, p.diary_id, p.pack_cid, p.pack_type, p.params, p.payload, p.token_budget,
       p.created_by, p.supersedes_pack_id, p.pinned, p.expires_at, p.created_at, p.updated_at,
       s.entry_count, s.total_tokens
FROM context_packs p
CROSS JOIN LATERAL (
    SELECT count(*)::int AS entry_count, coalesce(sum(packed_tokens), 0)::int AS total_tokens
    FROM context_pack_entries WHERE pack_id = p.id
) s
WHERE p.id = $1

-- name: pack_get_by_cid
SELECT p.id, p.diary_id, p.pack_cid, p.pack_type, p.params, p.payload, p.token_budget,
       p.created_by, p.supersedes_pack_id, p.pinned, p.expires_at, p.created_at, p.updated_at,
       s.entry_count, s.total_tokens
FROM context_packs p
CROSS JOIN LATERAL (
    SELECT count(*)::int AS entry_count, coalesce(sum(packed_tokens), 0)::int AS total_tokens
    FROM context_pack_entries WHERE pack_id = p.id
) s
WHERE p.pack_cid = $1

-- name: pack_list_by_diary
SELECT p.id, p.diary_id, p.pack_cid, p.pack_type, p.params, p.payload, p.token_budget,
       p.created_by, p.supersedes_pack_id, p.pinned, p.expires_at, p.created_at, p.updated_at,
       s.entry_count, s.total_tokens, count(*) OVER () AS total
FROM context_packs p
CROSS JOIN LATERAL (
    SELECT count(*)::int AS entry_count, coalesce(sum(packed_tokens), 0)::int AS total_tokens
    FROM context_pack_entries WHERE pack_id = p.id
) s
WHERE p.diary_id = $1
ORDER BY p.created_at DESC, p.id DESC
LIMIT $2 OFFSET $3

-- name: pack_count_by_diary
SELECT count(*) FROM context_packs WHERE diary_id = $1

-- name: pack_list_by_team
-- The packs of a team's diaries, optionally only those holding entry $2.
SELECT p.id, p.diary_id, p.pack_cid, p.pack_type, p.params, p.payload, p.token_budget,
       p.created_by, p.supersedes_pack_id, p.pinned, p.expires_at, p.created_at, p.updated_at,
       s.entry_count, s.total_tokens, count(*) OVER () AS total
FROM context_packs p
JOIN diaries d ON d.id = p.diary_id
CROSS JOIN LATERAL (
    SELECT count(*)::int AS entry_count, coalesce(sum(packed_tokens), 0)::int AS total_tokens
    FROM context_pack_entries WHERE pack_id = p.id
) s
WHERE d.team_id = $1
  AND ($2::uuid IS NULL OR EXISTS (
      SELECT 1 FROM context_pack_entries e WHERE e.pack_id = p.id AND e.entry_id = $2))
ORDER BY p.created_at DESC, p.id DESC
LIMIT $3 OFFSET $4

-- name: pack_count_by_team
SELECT count(*)
FROM context_packs p
JOIN diaries d ON d.id = p.diary_id
WHERE d.team_id = $1
  AND ($2::uuid IS NULL OR EXISTS (
      SELECT 1 FROM context_pack_entries e WHERE e.pack_id = p.id AND e.entry_id = $2))

-- name: pack_entries_of
-- The entries of packs $1, by pack then rank, with each entry's current title (none once the
-- entry is deleted).
SELECT e.pack_id, e.entry_id, e.entry_cid_snapshot, e.rank, e.compression_level,
       e.original_tokens, e.packed_tokens, d.title
FROM context_pack_entries e
LEFT JOIN diary_entries d ON d.id = e.entry_id
WHERE e.pack_id = ANY($1::uuid[])
ORDER BY e.pack_id, e.rank

-- name: pack_ancestors
-- The packs pack $1 supersedes, transitively, up to $2 hops (hops >= 1), nearest first.
WITH RECURSIVE chain (id, hops) AS (
    SELECT supersedes_pack_id, 1 FROM context_packs
    WHERE id = $1 AND supersedes_pack_id IS NOT NULL
  UNION
    SELECT p.supersedes_pack_id, c.hops + 1
    FROM chain c JOIN context_packs p ON p.id = c.id
    WHERE p.supersedes_pack_id IS NOT NULL AND c.hops < $2
)
SELECT id, min(hops) AS hops FROM chain GROUP BY id ORDER BY hops

-- name: pack_render_entries
-- A pack's entries with the current title and content of each (NULL when deleted since).
SELECT pe.entry_id, pe.rank, pe.entry_cid_snapshot, pe.compression_level, pe.original_tokens,
       pe.packed_tokens, de.id IS NOT NULL AS present, de.title, de.content
FROM context_pack_entries pe
LEFT JOIN diary_entries de ON de.id = pe.entry_id
WHERE pe.pack_id = $1
ORDER BY pe.rank, pe.entry_id

-- name: pack_insert
INSERT INTO context_packs (id, diary_id, pack_cid, pack_type, params, payload, token_budget,
                           created_by, created_by_ns, supersedes_pack_id, pinned, expires_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11,
        CASE WHEN $11 THEN NULL ELSE now() + make_interval(secs => $12) END)
ON CONFLICT (pack_cid) DO NOTHING
RETURNING id

-- name: pack_insert_entries
INSERT INTO context_pack_entries (id, pack_id, entry_id, entry_cid_snapshot, compression_level,
                                  original_tokens, packed_tokens, rank)
SELECT gen_random_uuid(), $1, e.entry_id, e.cid, e.level, e.original, e.packed, e.rank
FROM unnest($2::uuid[], $3::text[], $4::text[], $5::int[], $6::int[], $7::int[])
    AS e (entry_id, cid, level, original, packed, rank)

-- name: pack_update
UPDATE context_packs SET pinned = $2, expires_at = $3, updated_at = now()
WHERE id = $1
RETURNING id

-- name: pack_expired
-- Expired, unpinned packs no live rendering still needs (a rendered pack goes with its source).
SELECT p.id
FROM context_packs p
WHERE NOT p.pinned AND p.expires_at <= $1
  AND NOT EXISTS (
      SELECT 1 FROM rendered_packs r
      WHERE r.source_pack_id = p.id AND (r.pinned OR r.expires_at > $1))
ORDER BY p.expires_at
LIMIT $2
FOR UPDATE SKIP LOCKED

-- name: pack_delete_many
DELETE FROM context_packs WHERE id = ANY($1::uuid[])

-- name: pack_ids_of_diary
SELECT id FROM context_packs WHERE diary_id = $1

-- name: rendered_get
SELECT r.id, r.pack_cid, r.source_pack_id, p.pack_cid AS source_pack_cid, r.diary_id,
       CASE WHEN $2::boolean THEN r.content END AS content, r.content_hash, r.render_method,
       r.total_tokens, r.description, r.created_by, r.verified_task_id, r.pinned, r.expires_at,
       r.created_at, r.updated_at
FROM rendered_packs r JOIN context_packs p ON p.id = r.source_pack_id
WHERE r.id = $1

-- name: rendered_get_by_cid
SELECT r.id, r.pack_cid, r.source_pack_id, p.pack_cid AS source_pack_cid, r.diary_id,
       NULL::text AS content, r.content_hash, r.render_method,
       r.total_tokens, r.description, r.created_by, r.verified_task_id, r.pinned, r.expires_at,
       r.created_at, r.updated_at
FROM rendered_packs r JOIN context_packs p ON p.id = r.source_pack_id
WHERE r.pack_cid = $1

-- name: rendered_latest
SELECT r.id, r.pack_cid, r.source_pack_id, p.pack_cid AS source_pack_cid, r.diary_id,
       r.content, r.content_hash, r.render_method,
       r.total_tokens, r.description, r.created_by, r.verified_task_id, r.pinned, r.expires_at,
       r.created_at, r.updated_at
FROM rendered_packs r JOIN context_packs p ON p.id = r.source_pack_id
WHERE r.source_pack_id = $1
ORDER BY r.created_at DESC, r.id DESC
LIMIT 1

-- name: rendered_list
SELECT r.id, r.pack_cid, r.source_pack_id, p.pack_cid AS source_pack_cid, r.diary_id,
       NULL::text AS content, r.content_hash, r.render_method,
       r.total_tokens, r.description, r.created_by, r.verified_task_id, r.pinned, r.expires_at,
       r.created_at, r.updated_at, count(*) OVER () AS total
FROM rendered_packs r JOIN context_packs p ON p.id = r.source_pack_id
WHERE r.diary_id = $1
  AND ($2::uuid IS NULL OR r.source_pack_id = $2)
  AND ($3::text IS NULL OR r.render_method = $3)
ORDER BY r.created_at DESC, r.id DESC
LIMIT $4 OFFSET $5

-- name: rendered_count
SELECT count(*) FROM rendered_packs r
WHERE r.diary_id = $1
  AND ($2::uuid IS NULL OR r.source_pack_id = $2)
  AND ($3::text IS NULL OR r.render_method = $3)

-- name: rendered_summaries_of
SELECT source_pack_id, id, pack_cid, render_method, total_tokens, pinned, created_at
FROM rendered_packs
WHERE source_pack_id = ANY($1::uuid[])
ORDER BY source_pack_id, created_at DESC, id DESC

-- name: rendered_insert
INSERT INTO rendered_packs (id, pack_cid, source_pack_id, diary_id, content, content_hash,
                            render_method, total_tokens, description, created_by, created_by_ns,
                            pinned, expires_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12,
        CASE WHEN $12 THEN NULL ELSE now() + make_interval(secs => $13) END)
ON CONFLICT (pack_cid) DO NOTHING
RETURNING id

-- name: rendered_id_by_cid
SELECT id FROM rendered_packs WHERE pack_cid = $1

-- name: rendered_update
UPDATE rendered_packs
SET pinned = $2, expires_at = $3,
    description = CASE WHEN $4 THEN $5 ELSE description END,
    verified_task_id = coalesce($6, verified_task_id),
    updated_at = now()
WHERE id = $1
RETURNING id

-- name: rendered_delete_expired
WITH doomed AS (
    SELECT id FROM rendered_packs
    WHERE NOT pinned AND expires_at <= $1
    ORDER BY expires_at
    LIMIT $2
    FOR UPDATE SKIP LOCKED
), deleted AS (
    DELETE FROM rendered_packs r USING doomed WHERE r.id = doomed.id RETURNING 1
)
SELECT count(*) FROM deleted

-- name: pack_judge_task
-- A task as the verification of a rendered pack needs it: its type, status and references.
SELECT id, task_type, status, "references" FROM tasks WHERE id = $1

-- name: pack_task_diary
-- The provenance diary of a task (what a curate_pack output's pack must belong to).
SELECT diary_id FROM tasks WHERE id = $1
