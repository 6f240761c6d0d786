-- The attempt workflow's writes (cairn/infra/repos/tasks.py, one transaction per transition) and
-- the reads its routes need (cairn/api/routes/task_attempts.py). Other task reads: tasks.sql.

-- name: task_write_insert
INSERT INTO tasks (
    id, team_id, diary_id, project_id, task_type, title, input, input_cid, input_schema_cid,
    output_kind, correlation_id, "references", claim_condition, allowed_profiles,
    required_trust_level, max_attempts, dispatch_timeout_sec, running_timeout_sec, expires_at,
    proposed_by_agent_id, proposed_by_human_id, idempotency_key, idempotency_cid, workflow_id)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19,
        $20, $21, $22, $23, $24)
ON CONFLICT (id) DO NOTHING
RETURNING id

-- name: task_write_projection
-- One transition in one statement: the attempt's row upserted to the workflow's values (skipped
-- when $1 is false: a task without an attempt) and the task's state. $2..$21 are the attempt's
-- columns, $22..$31 the task's.
WITH attempt AS (
    INSERT INTO task_attempts (
        id, task_id, attempt_n, workflow_id, lease_id, claimed_by_agent_id, status,
        lease_ttl_sec, claimed_at, started_at, last_heartbeat_at, claim_expires_at, finished_at,
        output, output_cid, content_signature, usage, error, timeout_reason, traceparent)
    SELECT $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19,
           $20, $21
    WHERE $1::boolean
    ON CONFLICT (task_id, attempt_n) DO UPDATE
    SET status = EXCLUDED.status, lease_ttl_sec = EXCLUDED.lease_ttl_sec,
        started_at = EXCLUDED.started_at, last_heartbeat_at = EXCLUDED.last_heartbeat_at,
        claim_expires_at = EXCLUDED.claim_expires_at, finished_at = EXCLUDED.finished_at,
        output = EXCLUDED.output, output_cid = EXCLUDED.output_cid,
        content_signature = EXCLUDED.content_signature, usage = EXCLUDED.usage,
        error = EXCLUDED.error, timeout_reason = EXCLUDED.timeout_reason
)
UPDATE tasks
SET status = $23, attempt_count = $24, claim_agent_id = $25, claim_expires_at = $26,
    cancelled_by_agent_id = $27, cancelled_by_human_id = $28, cancel_reason = $29,
    cancelled_at = $30, completed_at = $31, updated_at = now()
WHERE id = $22

-- name: task_flow_attempt_target
-- What an attempt route decides on: the task, and attempt $2 of it when there is one ($3: also
-- the task's input, which only complete needs).
SELECT t.id, t.team_id, t.status, t.task_type, t.input_cid, t.workflow_id, t.cancel_reason,
       CASE WHEN $3::boolean THEN t.input END AS input,
       a.status AS attempt_status, a.claimed_by_agent_id, a.claim_expires_at, a.lease_ttl_sec
FROM tasks t
LEFT JOIN task_attempts a ON a.task_id = t.id AND a.attempt_n = $2
WHERE t.id = $1

-- name: task_flow_claim_target
-- What a claim decides on: the task, and the status of the task its claim condition names.
SELECT t.id, t.team_id, t.status, t.workflow_id, t.claim_condition, c.status AS condition_status
FROM tasks t
LEFT JOIN tasks c ON c.id = (t.claim_condition ->> 'taskId')::uuid
WHERE t.id = $1

-- name: task_flow_attempt
SELECT id, task_id, attempt_n, workflow_id, runtime_id, lease_id, claimed_by_agent_id, status,
       lease_ttl_sec, claimed_at, started_at, last_heartbeat_at, claim_expires_at, finished_at,
       output, output_cid, content_signature, usage, error, timeout_reason
FROM task_attempts
WHERE task_id = $1 AND attempt_n = $2

-- name: task_flow_agent_key
SELECT public_key FROM agents WHERE id = $1

-- name: task_write_bind_inputs
-- The task's input artifacts, bound from the CIDs its team staged ($3..$7: one element per
-- reference), in the transaction that inserts the task. Returns the CIDs bound.
INSERT INTO task_artifacts (
    id, team_id, task_id, attempt_n, cid, kind, title, role, content_type, content_encoding,
    size_bytes, created_by_agent_id, created_by_human_id)
SELECT w.id, $1, $2, NULL, w.cid, w.kind, w.title, w.role,
       coalesce(w.content_type, s.content_type), s.content_encoding, b.size_bytes, $8, $9
FROM unnest($3::uuid[], $4::text[], $5::text[], $6::text[], $7::text[], $10::text[])
    AS w (id, cid, kind, title, role, content_type)
JOIN staged_artifacts s ON s.team_id = $1 AND s.cid = w.cid
JOIN artifact_blobs b ON b.cid = w.cid
ON CONFLICT DO NOTHING
RETURNING cid
