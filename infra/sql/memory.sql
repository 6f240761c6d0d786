-- Diaries, entries, grants and relations (SPEC 2.1, 4.2). Entry reads list their columns and
-- `embedding IS NOT NULL AS has_embedding` (what `schemas.memory.entry_from_row` renders); the
-- vector itself never leaves the database.

-- name: memory_insert_diary
INSERT INTO diaries (id, created_by, created_by_ns, team_id, name, visibility, signed)
VALUES ($1, $2, $3, $4, $5, $6, $7)
ON CONFLICT (id) DO NOTHING

-- name: memory_get_diary
SELECT d.id, d.created_by, d.team_id, d.name, d.visibility, d.signed, d.created_at,
       d.updated_at, t.status AS team_status
FROM diaries d
JOIN teams t ON t.id = d.team_id
WHERE d.id = $1

-- name: memory_list_diaries
-- Diaries among $1 (the ids the caller can read), optionally of one team ($2).
SELECT id, created_by, team_id, name, visibility, signed, created_at, updated_at
FROM diaries
WHERE id = ANY($1::uuid[]) AND ($2::uuid IS NULL OR team_id = $2)
ORDER BY created_at, id

-- name: memory_update_diary
UPDATE diaries
SET name = coalesce($2, name), visibility = coalesce($3, visibility), updated_at = now()
WHERE id = $1

-- name: memory_diary_has_signed_entries
SELECT EXISTS (
    SELECT 1 FROM diary_entries WHERE diary_id = $1 AND signing_request_id IS NOT NULL
)

-- name: memory_diary_entry_ids
SELECT id FROM diary_entries WHERE diary_id = $1

-- name: memory_lock_diary
-- held until the delete commits: a task insert naming the diary waits (task_write_lock_diary)
SELECT id FROM diaries WHERE id = $1 FOR UPDATE

-- name: memory_diary_open_references
-- what still needs the diary (infra/foreign_keys.py): non-terminal tasks naming it as their
-- provenance (terminal ones keep the id as history) and its pending transfer
SELECT (SELECT count(*) FROM tasks
        WHERE diary_id = $1 AND status IN ('queued', 'dispatched', 'running')) AS task,
       (SELECT count(*) FROM diary_transfers
        WHERE diary_id = $1 AND status = 'pending') AS transfer

-- name: memory_delete_diary
DELETE FROM diaries WHERE id = $1

-- name: memory_list_grants
-- with each grantee's names (subject_names, migration 0022; none for a group)
SELECT rt.object_id, rt.relation, rt.subject_ns, rt.subject_id, rt.created_at,
       n.fingerprint, n.email, n.display_name
FROM relation_tuples rt
LEFT JOIN subject_names n ON n.subject_ns = rt.subject_ns
    AND n.subject_id = CASE WHEN rt.subject_ns IN ('Agent', 'Human') THEN rt.subject_id::uuid END
WHERE rt.namespace = 'Diary' AND rt.object_id = $1 AND rt.relation IN ('writers', 'managers')
ORDER BY rt.created_at, rt.subject_id

-- name: memory_chain_head
-- The CID a new entry of a signed diary chains to ('' when the diary is empty), kept on the
-- diary row (migration 0025) so that an append reads one row whatever the diary's length.
SELECT chain_head FROM diaries WHERE id = $1

-- name: memory_advance_chain_head
-- In the append's transaction, after its insert: two appends racing for one head meet the
-- unique (diary_id, prev_cid) index first, so only the winner gets here.
UPDATE diaries SET chain_head = $2 WHERE id = $1

-- name: memory_chain_head_from_entries
-- The head found from the entries themselves, for a diary written without its head kept (an
-- import): the entry no other entry names as its predecessor ('' when the diary is empty).
-- Signed entries are never changed or deleted. The same expression fills the existing diaries
-- in migration 0025.
UPDATE diaries d
SET chain_head = coalesce((
    SELECT e.cid
    FROM diary_entries e
    WHERE e.diary_id = d.id
      AND NOT EXISTS (
          SELECT 1 FROM diary_entries n WHERE n.diary_id = e.diary_id AND n.prev_cid = e.cid)
    LIMIT 1
), '')
WHERE d.id = $1

-- name: memory_insert_entry
INSERT INTO diary_entries (
    id, diary_id, title, content, embedding, tags, injection_risk, injection_threats,
    importance, entry_type, cid, prev_cid, signing_request_id, content_signature,
    created_by, created_by_ns)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)
ON CONFLICT (id) DO NOTHING
-- the columns of `schemas.memory.entry_from_row`: the API answers with them (no read-back)
RETURNING id, diary_id, title, content, tags, importance, entry_type, injection_risk,
          injection_threats, cid, prev_cid, signing_request_id, content_signature, superseded_by,
          embedding IS NOT NULL AS has_embedding, access_count, last_accessed_at, created_by,
          created_at, updated_at, origin

-- name: memory_lock_content_digest
-- Serializes creates of one content in one diary until the insert commits, so that two racing
-- exact duplicates cannot both find none (the digest index is not unique: migration 0020).
SELECT pg_advisory_xact_lock(hashtextextended($1::uuid::text || md5(btrim($2, E' \t\n\r\f\v')), 0))

-- name: memory_find_exact_duplicate
-- The oldest entry of diary $1 whose content equals $2 after trimming whitespace (the index
-- expression of migration 0020, spelt the same).
SELECT id, cid
FROM diary_entries
WHERE diary_id = $1
  AND md5(btrim(content, E' \t\n\r\f\v')) = md5(btrim($2, E' \t\n\r\f\v'))
  AND btrim(content, E' \t\n\r\f\v') = btrim($2, E' \t\n\r\f\v')
ORDER BY created_at, id
LIMIT 1

-- name: memory_record_refused_duplicate
INSERT INTO entry_duplicates_refused (entry_id, diary_id, duplicate_of)
VALUES ($1, $2, $3)
ON CONFLICT (entry_id) DO NOTHING

-- name: memory_propose_near_duplicate
-- The consolidation of entry $1: its nearest older live entry of the same diary, when their
-- cosine similarity is at least $2, gets a `proposed` relation from $1 (id $3, by workflow $4):
-- `elaborates` when the newer content contains the older, else `supersedes`. Nothing when the
-- pair is related already in either direction (a proposal, accepted or rejected, is a decision
-- made or pending), so running it again proposes nothing twice.
WITH e AS (
    SELECT id, diary_id, embedding, created_at, cid, btrim(content) AS body
    FROM diary_entries
    WHERE id = $1 AND embedding IS NOT NULL AND superseded_by IS NULL
), nearest AS (
    SELECT o.id, o.cid, btrim(o.content) AS body, 1 - (o.embedding <=> e.embedding) AS similarity
    FROM e
    JOIN diary_entries o ON o.diary_id = e.diary_id
    WHERE o.embedding IS NOT NULL
      AND o.superseded_by IS NULL
      AND (o.created_at, o.id) < (e.created_at, e.id)
    ORDER BY o.embedding <=> e.embedding
    LIMIT 1
)
INSERT INTO entry_relations (
    id, source_id, target_id, relation, status, source_cid_snapshot, target_cid_snapshot,
    workflow_id, metadata)
SELECT $3, e.id, n.id,
       CASE WHEN strpos(e.body, n.body) > 0 THEN 'elaborates' ELSE 'supersedes' END,
       'proposed', e.cid, n.cid, $4,
       jsonb_build_object('similarity', round(n.similarity::numeric, 4))
FROM e, nearest n
WHERE n.similarity >= $2
  AND NOT EXISTS (
      SELECT 1 FROM entry_relations r
      WHERE (r.source_id = e.id AND r.target_id = n.id)
         OR (r.source_id = n.id AND r.target_id = e.id))
ON CONFLICT DO NOTHING
RETURNING id

-- name: memory_pending_page
-- A page of the consolidation sweep: the entries whose vector changed since the sweep last
-- probed them (migration 0025), oldest change first.
SELECT entry_id AS id, seq FROM consolidation_pending ORDER BY seq LIMIT $1

-- name: memory_pending_done
-- The page's marks, once probed; a mark made again meanwhile has a new seq and stays.
DELETE FROM consolidation_pending p
USING unnest($1::uuid[], $2::bigint[]) AS done (entry_id, seq)
WHERE p.entry_id = done.entry_id AND p.seq = done.seq

-- name: memory_record_retrievals
-- A batch of entries searches and packs returned (api/hygiene.py), dated in their own table
-- (migration 0025): the entries' rows are not written. Entries deleted meanwhile are skipped;
-- the sorted ids keep concurrent batches from deadlocking on each other's rows.
INSERT INTO entry_retrievals (entry_id, last_retrieved_at)
SELECT id, now() FROM diary_entries WHERE id = ANY($1::uuid[]) ORDER BY id
ON CONFLICT (entry_id) DO UPDATE SET last_retrieved_at = excluded.last_retrieved_at

-- name: memory_entry_signing_request_used
SELECT id FROM diary_entries WHERE signing_request_id = $1

-- name: memory_get_entry
SELECT e.id, e.diary_id, e.title, e.content, e.tags, e.importance, e.entry_type,
       e.injection_risk, e.injection_threats, e.cid, e.prev_cid, e.signing_request_id,
       e.content_signature, e.superseded_by, e.embedding IS NOT NULL AS has_embedding,
       e.access_count, e.last_accessed_at, e.created_by, e.created_at, e.updated_at, e.origin,
       d.visibility, d.team_id, d.signed AS diary_signed
FROM diary_entries e
JOIN diaries d ON d.id = e.diary_id
WHERE e.id = $1

-- name: memory_get_entries_for_change
-- The entries (with their diary) a batch delete or an update works on.
SELECT e.id, e.diary_id, e.signing_request_id, e.cid, e.title, e.content, e.tags, e.entry_type
FROM diary_entries e
WHERE e.id = ANY($1::uuid[])

-- name: memory_list_entries
-- $5 = as of (NULL: now): the entries created by then, superseded as they were then.
-- No count here: a window count would read (and compute) every matching row for each page;
-- memory_count_entries counts from the (diary_id, created_at, id) index instead.
SELECT id, diary_id, title, content, tags, importance, entry_type, injection_risk,
       injection_threats, cid, prev_cid, signing_request_id, content_signature,
       CASE WHEN $5::timestamptz IS NULL THEN superseded_by
            ELSE superseded_by_as_of(id, $5::timestamptz) END AS superseded_by,
       embedding IS NOT NULL AS has_embedding, access_count, last_accessed_at, created_by,
       created_at, updated_at, origin
FROM diary_entries
WHERE diary_id = $1
  AND ($2::text[] IS NULL OR tags @> $2)
  AND ($3::text[] IS NULL OR NOT tags && $3)
  AND ($4::text IS NULL OR entry_type = $4)
  AND ($5::timestamptz IS NULL OR created_at <= $5::timestamptz)
ORDER BY created_at DESC, id DESC
LIMIT $6 OFFSET $7

-- name: memory_count_entries
SELECT count(*)
FROM diary_entries
WHERE diary_id = $1
  AND ($2::text[] IS NULL OR tags @> $2)
  AND ($3::text[] IS NULL OR NOT tags && $3)
  AND ($4::text IS NULL OR entry_type = $4)
  AND ($5::timestamptz IS NULL OR created_at <= $5::timestamptz)

-- name: memory_tag_histogram
SELECT tag, count(*) AS count
FROM diary_entries, unnest(tags) AS tag
WHERE diary_id = $1
  AND ($2::text IS NULL OR starts_with(tag, $2))
  AND ($4::text IS NULL OR entry_type = $4)
GROUP BY tag
HAVING count(*) >= $3
ORDER BY count(*) DESC, tag

-- name: memory_update_entry
-- $3 = clear the title; the vector is replaced only when $10 (re-embed) is set.
UPDATE diary_entries
SET content = coalesce($2, content),
    title = CASE WHEN $3 THEN NULL ELSE coalesce($4, title) END,
    tags = coalesce($5, tags),
    importance = coalesce($6, importance),
    entry_type = coalesce($7, entry_type),
    cid = $8,
    injection_risk = $9,
    injection_threats = $11,
    embedding = CASE WHEN $10 THEN $12 ELSE embedding END,
    updated_at = now()
WHERE id = $1 AND signing_request_id IS NULL
RETURNING id

-- name: memory_set_embedding
-- Only while the entry still says what was embedded (a later update re-embeds itself).
UPDATE diary_entries SET embedding = $3 WHERE id = $1 AND cid = $2 AND embedding IS NULL
RETURNING id

-- name: memory_delete_entry
DELETE FROM diary_entries WHERE id = $1 AND signing_request_id IS NULL RETURNING id

-- name: memory_insert_relation
INSERT INTO entry_relations (
    id, source_id, target_id, relation, status, source_cid_snapshot, target_cid_snapshot,
    workflow_id, metadata)
SELECT $1, s.id, t.id, $4, $5, s.cid, t.cid, $6, $7
FROM diary_entries s, diary_entries t
WHERE s.id = $2 AND t.id = $3
ON CONFLICT (source_id, target_id, relation) DO NOTHING
RETURNING id

-- name: memory_existing_relation
-- The relation of this source, target and type, and whether this statement accepted it: $4
-- accepts one that is only proposed (a create that asked for `accepted` confirms the proposal
-- it found; a rejected one stays rejected).
WITH accepted AS (
    UPDATE entry_relations SET status = 'accepted', updated_at = now()
    WHERE source_id = $1 AND target_id = $2 AND relation = $3 AND status = 'proposed' AND $4
    RETURNING id
)
SELECT r.id, EXISTS (SELECT 1 FROM accepted) AS accepted
FROM entry_relations r
WHERE r.source_id = $1 AND r.target_id = $2 AND r.relation = $3

-- name: memory_get_relation
SELECT r.id, r.source_id, r.target_id, r.relation, r.status, r.source_cid_snapshot,
       r.target_cid_snapshot, r.workflow_id, r.metadata, r.created_at, r.updated_at,
       s.diary_id, s.title AS source_title, t.title AS target_title
FROM entry_relations r
JOIN diary_entries s ON s.id = r.source_id
JOIN diary_entries t ON t.id = r.target_id
WHERE r.id = $1

-- name: memory_list_relations
-- Both ends' titles come with each relation (one page of the console names them all).
SELECT r.id, r.source_id, r.target_id, r.relation, r.status, r.source_cid_snapshot,
       r.target_cid_snapshot, r.workflow_id, r.metadata, r.created_at, r.updated_at,
       s.title AS source_title, t.title AS target_title, count(*) OVER () AS total
FROM entry_relations r
JOIN diary_entries s ON s.id = r.source_id
JOIN diary_entries t ON t.id = r.target_id
WHERE (($2 IN ('as_source', 'both') AND r.source_id = $1)
       OR ($2 IN ('as_target', 'both') AND r.target_id = $1))
  AND ($3::text IS NULL OR r.relation = $3)
  AND ($4::text IS NULL OR r.status = $4)
ORDER BY r.created_at, r.id
LIMIT $5 OFFSET $6

-- name: memory_update_relation_status
UPDATE entry_relations SET status = $2, updated_at = now() WHERE id = $1
RETURNING source_id, target_id, relation

-- name: memory_delete_relation
DELETE FROM entry_relations WHERE id = $1 RETURNING source_id, target_id, relation

-- name: memory_sync_superseded_by
-- An entry is superseded by the source of the `supersedes` relation onto it accepted last
-- (migration 0021: the same rule `asOf` reads at an earlier instant).
UPDATE diary_entries e
SET superseded_by = superseded_by_as_of(e.id, 'infinity')
WHERE e.id = $1

-- name: memory_get_team
SELECT id, status, personal FROM teams WHERE id = $1

-- name: memory_agent_exists
SELECT id FROM agents WHERE id = $1

-- name: memory_human_exists
SELECT id FROM humans WHERE id = $1

-- name: memory_group_exists
SELECT id FROM groups WHERE id = $1

-- name: memory_entry_signer
-- The signing request behind a signed entry, with the signer's key. An imported signed entry
-- has no local request: it names itself as its request, and its signer is in
-- `imported_signatures` (migration 0019), the message being its CID.
SELECT s.message, s.nonce, s.signature, a.public_key, a.fingerprint
FROM signing_requests s
JOIN agents a ON a.id = s.agent_id
WHERE s.id = $1
UNION ALL
SELECT e.cid, i.nonce, e.content_signature, i.public_key, i.fingerprint
FROM imported_signatures i
JOIN diary_entries e ON e.id = i.entry_id
WHERE i.entry_id = $1

-- name: memory_entry_by_cid
SELECT id FROM diary_entries WHERE diary_id = $1 AND cid = $2 LIMIT 1

-- name: memory_hygiene
-- A diary's hygiene report ($2: seconds without a retrieval after which an entry counts as
-- unretrieved).
SELECT count(*) AS entries,
       (SELECT count(*) FROM entry_duplicates_refused WHERE diary_id = $1) AS duplicates_refused,
       (SELECT count(*) FROM entry_relations r JOIN diary_entries s ON s.id = r.source_id
        WHERE s.diary_id = $1 AND r.status = 'proposed') AS open_proposals,
       count(*) FILTER (WHERE e.superseded_by IS NOT NULL) AS superseded,
       count(*) FILTER (WHERE e.injection_risk) AS injection_flagged,
       count(*) FILTER (WHERE ret.last_retrieved_at IS NULL
                              OR ret.last_retrieved_at < now() - make_interval(secs => $2))
           AS unretrieved
FROM diary_entries e
LEFT JOIN entry_retrievals ret ON ret.entry_id = e.id
WHERE e.diary_id = $1
