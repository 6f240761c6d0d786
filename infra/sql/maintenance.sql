-- The maintenance workflows' purges and the stale-task reconciler (cairn/infra/repos/maintenance.py).
-- Each purge deletes at most $2 rows per call, oldest first, and returns how many.

-- name: maintenance_purge_signing_requests
-- expired requests (and pending ones whose workflow never expired them) past the retention;
-- completed requests stay: they are the record of a signature
WITH doomed AS (
    SELECT id FROM signing_requests
    WHERE status <> 'completed' AND expires_at < $1
    ORDER BY expires_at
    LIMIT $2
), deleted AS (
    DELETE FROM signing_requests s USING doomed WHERE s.id = doomed.id RETURNING 1
)
SELECT count(*) FROM deleted

-- name: maintenance_purge_recovery_nonces
-- a used nonce past its expiry cannot be replayed anyway: its challenge is too old to verify
WITH doomed AS (
    SELECT nonce FROM used_recovery_nonces
    WHERE expires_at < $1
    ORDER BY expires_at
    LIMIT $2
), deleted AS (
    DELETE FROM used_recovery_nonces n USING doomed WHERE n.nonce = doomed.nonce RETURNING 1
)
SELECT count(*) FROM deleted

-- name: maintenance_purge_vouchers
-- unredeemed vouchers past their expiry; a redeemed one stays (an agent's `proof` names it)
WITH doomed AS (
    SELECT id FROM agent_vouchers
    WHERE redeemed_at IS NULL AND expires_at < $1
    ORDER BY expires_at
    LIMIT $2
), deleted AS (
    DELETE FROM agent_vouchers v USING doomed WHERE v.id = doomed.id RETURNING 1
)
SELECT count(*) FROM deleted

-- name: maintenance_purge_connector_codes
-- the browser OAuth connector's authorization codes, used or not, past their expiry (a used
-- code expired minutes after it was issued: one cutoff covers both)
WITH doomed AS (
    SELECT code_hash FROM connector_codes
    WHERE expires_at < $1
    ORDER BY expires_at
    LIMIT $2
), deleted AS (
    DELETE FROM connector_codes c USING doomed WHERE c.code_hash = doomed.code_hash RETURNING 1
)
SELECT count(*) FROM deleted

-- name: maintenance_purge_connector_grants
-- the connector's grants revoked, or whose refresh token expired, before $1: neither can mint
-- a token again
WITH doomed AS (
    SELECT id FROM connector_grants
    WHERE revoked_at < $1 OR refresh_expires_at < $1
    ORDER BY least(revoked_at, refresh_expires_at)
    LIMIT $2
), deleted AS (
    DELETE FROM connector_grants g USING doomed WHERE g.id = doomed.id RETURNING 1
)
SELECT count(*) FROM deleted

-- name: maintenance_nonterminal_tasks
-- one page of tasks that their workflow has not finished and has not written since $3, by id
-- after $1 (null: from the start)
SELECT id, workflow_id
FROM tasks
WHERE status IN ('queued', 'dispatched', 'running') AND updated_at < $3
  AND ($1::uuid IS NULL OR id > $1)
ORDER BY id
LIMIT $2

-- name: maintenance_lock_task
SELECT id, status, claim_agent_id, coalesce(expires_at <= now(), false) AS past_expiry
FROM tasks
WHERE id = $1
FOR UPDATE

-- name: maintenance_settle_task
UPDATE tasks
SET status = $2, claim_agent_id = NULL, claim_expires_at = NULL, completed_at = now(),
    updated_at = now()
WHERE id = $1

-- name: maintenance_settle_attempts
-- the attempt in flight ends with the task; its error says why
UPDATE task_attempts
SET status = 'failed', finished_at = now(), claim_expires_at = NULL, error = $2
WHERE task_id = $1 AND status IN ('claimed', 'running')
RETURNING claimed_by_agent_id
