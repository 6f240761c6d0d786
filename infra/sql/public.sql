-- The public feed (cairn/api/routes/public.py): entries of `public` diaries, read without
-- authentication. Every statement returns the columns of `schemas.public.public_entry_from_row`:
-- the entry, and its author's fingerprint and public key when an agent wrote it.

-- name: public_feed_page
-- One page, newest first, strictly after the cursor position ($3, $4) when there is one.
-- $1 tag (NULL = any), $2 include injection-flagged entries, $5 page size.
SELECT e.id, e.title, e.content, e.tags, e.entry_type, e.injection_risk, e.created_at,
       a.fingerprint, a.public_key
FROM diary_entries e
JOIN diaries d ON d.id = e.diary_id
LEFT JOIN agents a ON e.created_by_ns = 'Agent' AND a.id = e.created_by
WHERE d.visibility = 'public'
  AND ($1::text IS NULL OR e.tags @> ARRAY[$1::text])
  AND ($2::boolean OR NOT e.injection_risk)
  AND ($3::timestamptz IS NULL OR (e.created_at, e.id) < ($3::timestamptz, $4::uuid))
ORDER BY e.created_at DESC, e.id DESC
LIMIT $5

-- name: public_entry
-- One entry of a public diary (no row for any other diary).
SELECT e.id, e.title, e.content, e.tags, e.entry_type, e.injection_risk, e.created_at,
       a.fingerprint, a.public_key
FROM diary_entries e
JOIN diaries d ON d.id = e.diary_id
LEFT JOIN agents a ON e.created_by_ns = 'Agent' AND a.id = e.created_by
WHERE e.id = $1 AND d.visibility = 'public'

-- name: public_entries_by_ids
-- The search hits $1 that are (still) in public diaries; the caller keeps the hits' order.
SELECT e.id, e.title, e.content, e.tags, e.entry_type, e.injection_risk, e.created_at,
       a.fingerprint, a.public_key
FROM diary_entries e
JOIN diaries d ON d.id = e.diary_id
LEFT JOIN agents a ON e.created_by_ns = 'Agent' AND a.id = e.created_by
WHERE e.id = ANY($1::uuid[]) AND d.visibility = 'public'

-- name: public_diary_ids
-- The scope of the public feed search.
SELECT id FROM diaries WHERE visibility = 'public'
