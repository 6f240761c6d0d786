-- Signing requests (SPEC 2.4): written only by the SigningRequest workflow's activities, read by
-- the API and by signed-entry creation.

-- name: signing_get
SELECT id, agent_id, message, nonce, status, signature, valid, workflow_id,
       created_at, expires_at, completed_at
FROM signing_requests WHERE id = $1

-- name: signing_lock_agent
SELECT pg_advisory_xact_lock(hashtext('signing-agent:' || $1::text))

-- name: signing_open_for_agent
SELECT count(*) AS open,
       ceil(extract(epoch FROM min(expires_at) - now()))::int AS retry_after_sec
FROM signing_requests
WHERE agent_id = $1 AND status = 'pending' AND expires_at > now()

-- name: signing_insert
INSERT INTO signing_requests (id, agent_id, message, nonce, workflow_id, created_at, expires_at)
VALUES ($1, $2, $3, $4, $5, $6, $7)
ON CONFLICT (id) DO NOTHING
RETURNING created_at, expires_at

-- name: signing_record_signature
UPDATE signing_requests
SET status = 'completed', signature = $2, valid = $3, completed_at = now()
WHERE id = $1 AND status = 'pending'

-- name: signing_expire
UPDATE signing_requests SET status = 'expired'
WHERE id = $1 AND status = 'pending'

-- name: signing_list_for_agent
SELECT id, agent_id, message, nonce, status, signature, valid, workflow_id,
       created_at, expires_at, completed_at
FROM signing_requests
WHERE agent_id = $1 AND ($2::text IS NULL OR status = $2)
ORDER BY created_at DESC, id DESC
LIMIT $3 OFFSET $4

-- name: signing_count_for_agent
SELECT count(*) FROM signing_requests
WHERE agent_id = $1 AND ($2::text IS NULL OR status = $2)
