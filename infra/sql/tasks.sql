-- Reads of the task queue that the REST API serves (cairn/infra/repos/task_reads.py), and the
-- one direct API write: append-only task messages (cairn/infra/repos/task_messages.py).
-- The attempt workflow writes every other row (cairn/infra/sql/task_writes.sql).

-- name: task_read_get
SELECT id, team_id, diary_id, project_id, task_type, title, input, input_cid, input_schema_cid,
       output_kind, correlation_id, "references", claim_condition, allowed_profiles,
       required_trust_level, max_attempts, attempt_count, dispatch_timeout_sec,
       running_timeout_sec, expires_at, proposed_by_agent_id, proposed_by_human_id,
       claim_agent_id, claim_expires_at, status, cancelled_by_agent_id, cancelled_by_human_id,
       cancel_reason, cancelled_at, idempotency_key, idempotency_cid, workflow_id, queued_at,
       completed_at, created_at, updated_at
FROM tasks
WHERE id = $1

-- name: task_read_by_idempotency_key
-- The task an Idempotency-Key already names within the creator and team ($2: agent or human id).
SELECT id, idempotency_cid
FROM tasks
WHERE team_id = $1 AND coalesce(proposed_by_agent_id, proposed_by_human_id) = $2
  AND idempotency_key = $3

-- name: task_read_list
-- One page of a team's tasks, newest first, keyset on (created_at, id).
-- $2 statuses, $3 task types, $4 correlation id, $5 General only, $6 project id, $7 diary id,
-- $8 claimable only, $9 a runtime profile (tasks pinned to others are left out), $10 the task
-- types of that profile's policy, $11/$12 the position after which the page starts, $13 size.
-- A claim condition is met when its task has one of the listed statuses (`task_status`) or
-- is completed, i.e. has an accepted attempt (`task_accepted`).
SELECT t.id, t.team_id, t.diary_id, t.project_id, t.task_type, t.title, t.input, t.input_cid,
       t.input_schema_cid, t.output_kind, t.correlation_id, t."references", t.claim_condition,
       t.allowed_profiles, t.required_trust_level, t.max_attempts, t.attempt_count,
       t.dispatch_timeout_sec, t.running_timeout_sec, t.expires_at, t.proposed_by_agent_id,
       t.proposed_by_human_id, t.claim_agent_id, t.claim_expires_at, t.status,
       t.cancelled_by_agent_id, t.cancelled_by_human_id, t.cancel_reason, t.cancelled_at,
       t.workflow_id, t.queued_at, t.completed_at, t.created_at, t.updated_at
FROM tasks t
WHERE t.team_id = $1
  AND ($2::text[] IS NULL OR t.status = ANY ($2::text[]))
  AND ($3::text[] IS NULL OR t.task_type = ANY ($3::text[]))
  AND ($4::uuid IS NULL OR t.correlation_id = $4::uuid)
  AND (NOT $5::boolean OR t.project_id IS NULL)
  AND ($6::uuid IS NULL OR t.project_id = $6::uuid)
  AND ($7::uuid IS NULL OR t.diary_id = $7::uuid)
  AND (NOT $8::boolean OR (
        t.status = 'queued'
        AND (t.claim_condition IS NULL OR EXISTS (
              SELECT 1 FROM tasks c
              WHERE c.id = (t.claim_condition ->> 'taskId')::uuid
                AND CASE t.claim_condition ->> 'kind'
                      WHEN 'task_status' THEN c.status IN (
                          SELECT jsonb_array_elements_text(t.claim_condition -> 'statuses'))
                      WHEN 'task_accepted' THEN c.status = 'completed'
                      ELSE false
                    END))))
  AND ($9::uuid IS NULL OR t.allowed_profiles = '[]'::jsonb
       OR t.allowed_profiles @> jsonb_build_array(jsonb_build_object('profileId', $9::text)))
  AND ($10::text[] IS NULL OR t.task_type = ANY ($10::text[]))
  AND ($11::timestamptz IS NULL OR (t.created_at, t.id) < ($11::timestamptz, $12::uuid))
ORDER BY t.created_at DESC, t.id DESC
LIMIT $13

-- name: task_read_attempts
-- with the claimant's fingerprint, so a reader names the executor without a lookup per row
SELECT ta.id, ta.task_id, ta.attempt_n, ta.workflow_id, ta.runtime_id, ta.lease_id,
       ta.claimed_by_agent_id, a.fingerprint::text AS claimed_by_fingerprint, ta.status,
       ta.lease_ttl_sec, ta.claimed_at, ta.started_at, ta.last_heartbeat_at, ta.claim_expires_at,
       ta.finished_at, ta.output, ta.output_cid, ta.content_signature, ta.usage, ta.error,
       ta.timeout_reason, ta.daemon_state, ta.runtime_profile_id, ta.runtime_profile_revision,
       ta.policy_snapshot_hash
FROM task_attempts ta
LEFT JOIN agents a ON a.id = ta.claimed_by_agent_id
WHERE ta.task_id = $1
ORDER BY ta.attempt_n

-- name: task_read_attempt
SELECT id, task_id, attempt_n, status, claimed_by_agent_id
FROM task_attempts
WHERE task_id = $1 AND attempt_n = $2

-- name: task_read_project
SELECT id, team_id FROM projects WHERE id = $1

-- name: task_read_staged
-- The staged artifacts of a team among the given CIDs, with their sizes (input references).
SELECT s.cid, s.content_type, s.content_encoding, b.size_bytes
FROM staged_artifacts s
JOIN artifact_blobs b ON b.cid = s.cid
WHERE s.team_id = $1 AND s.cid = ANY ($2::text[])

-- name: task_read_completed_attempt
-- The completed attempt of a task (the source of a continuation); $2 NULL: the latest one.
SELECT attempt_n
FROM task_attempts
WHERE task_id = $1 AND status = 'completed' AND ($2::integer IS NULL OR attempt_n = $2::integer)
ORDER BY attempt_n DESC
LIMIT 1

-- name: task_read_grants
-- with each grantee's names (subject_names, migration 0022; none for a group)
SELECT rt.relation, rt.subject_ns, rt.subject_id, rt.created_at,
       n.fingerprint, n.email, n.display_name
FROM relation_tuples rt
LEFT JOIN subject_names n ON n.subject_ns = rt.subject_ns
    AND n.subject_id = CASE WHEN rt.subject_ns IN ('Agent', 'Human') THEN rt.subject_id::uuid END
WHERE rt.namespace = 'Task' AND rt.object_id = $1 AND rt.relation IN ('writers', 'managers')
ORDER BY rt.created_at, rt.subject_id

-- name: task_read_subject_exists
-- Whether an Agent, a Human or a Group with this id exists ($1 namespace, $2 id).
SELECT CASE $1::text
         WHEN 'Agent' THEN EXISTS (SELECT 1 FROM agents WHERE id = $2)
         WHEN 'Human' THEN EXISTS (SELECT 1 FROM humans WHERE id = $2)
         WHEN 'Group' THEN EXISTS (SELECT 1 FROM groups WHERE id = $2)
         ELSE false
       END

-- name: task_read_messages
SELECT id, seq, ts, kind, payload
FROM task_messages
WHERE attempt_id = $1 AND seq > $2
ORDER BY seq
LIMIT $3

-- name: task_msg_lock_attempt
-- The attempt the messages go to, locked so that concurrent appends take seq numbers one after
-- another and the attempt cannot turn terminal halfway through an append.
SELECT id, status, claimed_by_agent_id, policy_snapshot
FROM task_attempts
WHERE task_id = $1 AND attempt_n = $2
FOR NO KEY UPDATE

-- name: task_msg_append
-- Appends the batch $2 (the JSON text of an array of {kind, payload}) after the attempt's last seq; run
-- after task_msg_lock_attempt in the same transaction (the lock makes max(seq) stable).
WITH appended AS (
    INSERT INTO task_messages (attempt_id, seq, kind, payload)
    SELECT $1, last.seq + m.ord, m.msg ->> 'kind', m.msg -> 'payload'
    FROM (SELECT coalesce(max(seq), 0) AS seq FROM task_messages WHERE attempt_id = $1) AS last,
         jsonb_array_elements($2::text::jsonb) WITH ORDINALITY AS m (msg, ord)
    RETURNING seq
)
SELECT count(*)::integer AS count, min(seq) AS first_seq, max(seq) AS last_seq FROM appended

-- name: task_read_open_counts
-- Tasks not yet finished, by type and status: the queue depth the worker reports as a metric.
SELECT task_type, status, count(*) AS tasks
FROM tasks
WHERE status IN ('queued', 'dispatched', 'running')
GROUP BY task_type, status
