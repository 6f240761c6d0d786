-- Diary archives (GET /diaries/{id}/export, POST /diaries/import; schemas.kernel.diary_car).

-- name: archive_entries
-- Every entry of a diary with what its archive block carries; the signer's key and nonce come
-- from the local signing request, or from `imported_signatures` for an entry that was imported.
SELECT e.title, e.content, e.tags, e.entry_type, e.importance, e.prev_cid, e.created_at,
       e.content_signature, coalesce(a.public_key, i.public_key) AS signer_public_key,
       coalesce(s.nonce, i.nonce) AS signature_nonce, e.id
FROM diary_entries e
LEFT JOIN signing_requests s ON s.id = e.signing_request_id
LEFT JOIN agents a ON a.id = s.agent_id
LEFT JOIN imported_signatures i ON i.entry_id = e.id
WHERE e.diary_id = $1
ORDER BY e.created_at, e.id

-- name: archive_relations
-- The relations between two entries of the diary.
SELECT r.source_id, r.target_id, r.relation, r.status, r.metadata
FROM entry_relations r
JOIN diary_entries s ON s.id = r.source_id
JOIN diary_entries t ON t.id = r.target_id
WHERE s.diary_id = $1 AND t.diary_id = $1
ORDER BY r.created_at, r.id

-- name: archive_insert_entry
-- An imported entry keeps its CID, chain link, signature and creation time; one from another
-- memory system also its origin ($17).
INSERT INTO diary_entries (
    id, diary_id, title, content, tags, injection_risk, injection_threats, importance,
    entry_type, cid, prev_cid, signing_request_id, content_signature, created_by,
    created_by_ns, created_at, updated_at, origin)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $16, $17)

-- name: archive_insert_signature
INSERT INTO imported_signatures (entry_id, public_key, fingerprint, nonce)
VALUES ($1, $2, $3, $4)

-- name: archive_entries_to_embed
-- Entries among $1 still without a vector, with what their embedding text is made of.
SELECT id, cid, title, content, tags
FROM diary_entries
WHERE id = ANY($1::uuid[]) AND embedding IS NULL
ORDER BY created_at, id

-- name: archive_first_of_each_content
-- For each content of $1 (a new diary's entries, in file order), the position (1-based) of the
-- first one equal to it after trimming whitespace: the comparison of
-- memory_find_exact_duplicate, made for a whole file in one statement.
SELECT n::int AS position,
       first_value(n) OVER (PARTITION BY btrim(c, E' \t\n\r\f\v') ORDER BY n)::int AS first
FROM unnest($1::text[]) WITH ORDINALITY AS t(c, n)
ORDER BY n
