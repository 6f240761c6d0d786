-- Task artifacts (cairn/infra/repos/artifacts.py, cairn/api/routes/task_artifacts.py): blobs by
-- CID, staged input bytes, and the task_artifacts rows that bind them to a task or an attempt.

-- name: artifact_blob_insert
-- one row per distinct content; a second upload of the same bytes finds it
INSERT INTO artifact_blobs (cid, size_bytes) VALUES ($1, $2)
ON CONFLICT (cid) DO NOTHING

-- name: artifact_stage_upsert
-- staging the same bytes again renews the grace period and takes the latest labels
INSERT INTO staged_artifacts (team_id, cid, content_type, content_encoding)
VALUES ($1, $2, $3, $4)
ON CONFLICT (team_id, cid) DO UPDATE
SET content_type = EXCLUDED.content_type,
    content_encoding = EXCLUDED.content_encoding,
    staged_at = now()

-- name: artifact_attempt_lock
-- FOR SHARE: the attempt cannot change status (complete, time out, abort) while an output
-- artifact is attached to it, so an artifact never lands on an attempt that just ended
SELECT status, claimed_by_agent_id
FROM task_attempts
WHERE task_id = $1 AND attempt_n = $2
FOR SHARE

-- name: artifact_output_insert
INSERT INTO task_artifacts (
    id, team_id, task_id, attempt_n, cid, kind, title, content_type, content_encoding,
    size_bytes, created_by_agent_id)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
ON CONFLICT DO NOTHING

-- name: artifact_output_get
SELECT id, team_id, task_id, attempt_n, cid, kind, title, role, content_type, content_encoding,
       size_bytes, created_by_agent_id, created_by_human_id, created_at
FROM task_artifacts
WHERE task_id = $1 AND attempt_n = $2 AND cid = $3

-- name: artifact_attempt_get
SELECT status, claimed_by_agent_id, policy_snapshot
FROM task_attempts
WHERE task_id = $1 AND attempt_n = $2

-- name: artifact_list_page
-- keyset page in creation order (inputs first, then outputs as they were uploaded)
SELECT id, team_id, task_id, attempt_n, cid, kind, title, role, content_type, content_encoding,
       size_bytes, created_by_agent_id, created_by_human_id, created_at
FROM task_artifacts
WHERE task_id = $1
  AND ($2::timestamptz IS NULL OR (created_at, id) > ($2::timestamptz, $3::uuid))
ORDER BY created_at, id
LIMIT $4

-- name: artifact_by_task_cid
-- a CID bound anywhere on the task: the input binding first, else the earliest output
SELECT id, cid, content_type, content_encoding, size_bytes
FROM task_artifacts
WHERE task_id = $1 AND cid = $2
ORDER BY attempt_n NULLS FIRST, created_at, id
LIMIT 1

-- name: artifact_by_attempt_cid
SELECT id, cid, content_type, content_encoding, size_bytes
FROM task_artifacts
WHERE task_id = $1 AND attempt_n = $2 AND cid = $3

-- name: artifact_staged_expire
-- staged rows past their grace that no task of their team binds (a bound one stays, so the
-- same bytes can still be named by later tasks); SKIP LOCKED leaves a row being re-staged alone
DELETE FROM staged_artifacts
WHERE (team_id, cid) IN (
    SELECT s.team_id, s.cid
    FROM staged_artifacts s
    WHERE s.staged_at < $1
      AND NOT EXISTS (
          SELECT 1 FROM task_artifacts a WHERE a.team_id = s.team_id AND a.cid = s.cid)
    ORDER BY s.staged_at
    LIMIT $2
    FOR UPDATE SKIP LOCKED)
RETURNING cid

-- name: artifact_blob_delete_unreferenced
-- blobs nothing names any more (their staged rows swept, their tasks deleted). The foreign keys
-- of staged_artifacts and task_artifacts make this fail, rather than orphan a row, if a
-- reference appears meanwhile; the caller deletes the S3 objects before committing.
DELETE FROM artifact_blobs
WHERE cid IN (
    SELECT b.cid
    FROM artifact_blobs b
    WHERE NOT EXISTS (SELECT 1 FROM staged_artifacts s WHERE s.cid = b.cid)
      AND NOT EXISTS (SELECT 1 FROM task_artifacts a WHERE a.cid = b.cid)
    LIMIT $1
    FOR UPDATE SKIP LOCKED)
RETURNING cid
