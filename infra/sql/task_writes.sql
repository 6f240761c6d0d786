-- The attempt workflow's writes (cairn/infra/repos/tasks.py, one transaction per transition) and
-- the reads its routes need (cairn/api/routes/task_attempts.py). Other task reads: tasks.sql.

-- name: task_write_insert
-- The queued task and its relation tuples ($25: a jsonb array of objects named by the
-- `relation_tuples` columns) in one statement, once: nothing when the row exists already (a
-- retry after a committed attempt; `inserted` is then NULL). The provenance diary is locked
-- against a concurrent delete until the row commits (the column has no foreign key: terminal
-- tasks keep the id of a deleted diary); a diary gone already inserts nothing
-- (`diary_found` false).
WITH diary AS (
    SELECT id FROM diaries WHERE id = $3 FOR KEY SHARE
),
inserted AS (
    INSERT INTO tasks (
        id, team_id, diary_id, project_id, task_type, title, input, input_cid, input_schema_cid,
        output_kind, correlation_id, "references", claim_condition, allowed_profiles,
        required_trust_level, max_attempts, dispatch_timeout_sec, running_timeout_sec,
        expires_at, proposed_by_agent_id, proposed_by_human_id, idempotency_key,
        idempotency_cid, workflow_id)
    SELECT $1, $2, diary.id, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17,
           $18, $19, $20, $21, $22, $23, $24
    FROM diary
    ON CONFLICT (id) DO NOTHING
    RETURNING id
),
granted AS (
    INSERT INTO relation_tuples
        (namespace, object_id, relation, subject_ns, subject_id, subject_relation)
    SELECT g.namespace, g.object_id, g.relation, g.subject_ns, g.subject_id, g.subject_relation
    FROM jsonb_populate_recordset(NULL::relation_tuples, $25::jsonb) AS g
    WHERE EXISTS (SELECT 1 FROM inserted)
    ON CONFLICT DO NOTHING
)
SELECT EXISTS (SELECT 1 FROM diary) AS diary_found, (SELECT id FROM inserted) AS inserted

-- name: task_write_projection
-- One transition in one statement: the attempt's row upserted to the workflow's values ($1, a
-- jsonb object named by the `task_attempts` columns; NULL for a task without an attempt), the
-- task's state ($2, a jsonb object named by the `tasks` columns), and the relation tuples the
-- transition grants ($3) and revokes ($4), jsonb arrays of objects named by the
-- `relation_tuples` columns (the claimant's, on a claim and when the claim ends; `[]` for
-- none). `infra.repos.tasks` builds all four from typed models (`AttemptColumns`,
-- `TaskColumns`, `RelationTuple`). Every part runs, read or not, in the statement's one
-- transaction: a claim or a result is one round trip while its workflow task waits.
WITH attempt AS (
    INSERT INTO task_attempts (
        id, task_id, attempt_n, workflow_id, lease_id, claimed_by_agent_id, status,
        lease_ttl_sec, claimed_at, started_at, last_heartbeat_at, claim_expires_at, finished_at,
        output, output_cid, content_signature, usage, error, timeout_reason, traceparent,
        runtime_id, daemon_state, runtime_profile_id, runtime_profile_revision, policy_snapshot,
        policy_snapshot_hash)
    SELECT a.id, a.task_id, a.attempt_n, a.workflow_id, a.lease_id, a.claimed_by_agent_id,
           a.status, a.lease_ttl_sec, a.claimed_at, a.started_at, a.last_heartbeat_at,
           a.claim_expires_at, a.finished_at, a.output, a.output_cid, a.content_signature,
           a.usage, a.error, a.timeout_reason, a.traceparent, a.runtime_id, a.daemon_state,
           a.runtime_profile_id, a.runtime_profile_revision, a.policy_snapshot,
           a.policy_snapshot_hash
    FROM jsonb_populate_record(NULL::task_attempts, $1::jsonb) AS a
    WHERE $1::jsonb IS NOT NULL
    -- the runtime profile columns are written once, at claim, and never updated
    ON CONFLICT (task_id, attempt_n) DO UPDATE
    SET status = EXCLUDED.status, lease_ttl_sec = EXCLUDED.lease_ttl_sec,
        started_at = EXCLUDED.started_at, last_heartbeat_at = EXCLUDED.last_heartbeat_at,
        claim_expires_at = EXCLUDED.claim_expires_at, finished_at = EXCLUDED.finished_at,
        output = EXCLUDED.output, output_cid = EXCLUDED.output_cid,
        content_signature = EXCLUDED.content_signature, usage = EXCLUDED.usage,
        error = EXCLUDED.error, timeout_reason = EXCLUDED.timeout_reason,
        daemon_state = EXCLUDED.daemon_state
),
granted AS (
    INSERT INTO relation_tuples
        (namespace, object_id, relation, subject_ns, subject_id, subject_relation)
    SELECT g.namespace, g.object_id, g.relation, g.subject_ns, g.subject_id, g.subject_relation
    FROM jsonb_populate_recordset(NULL::relation_tuples, $3::jsonb) AS g
    ON CONFLICT DO NOTHING
),
revoked AS (
    DELETE FROM relation_tuples AS r
    USING jsonb_populate_recordset(NULL::relation_tuples, $4::jsonb) AS d
    WHERE r.namespace = d.namespace AND r.object_id = d.object_id AND r.relation = d.relation
      AND r.subject_ns = d.subject_ns AND r.subject_id = d.subject_id
      AND r.subject_relation = d.subject_relation
)
UPDATE tasks AS t
SET status = s.status, attempt_count = s.attempt_count, claim_agent_id = s.claim_agent_id,
    claim_expires_at = s.claim_expires_at, cancelled_by_agent_id = s.cancelled_by_agent_id,
    cancelled_by_human_id = s.cancelled_by_human_id, cancel_reason = s.cancel_reason,
    cancelled_at = s.cancelled_at, completed_at = s.completed_at, updated_at = now()
FROM jsonb_populate_record(NULL::tasks, $2::jsonb) AS s
WHERE t.id = s.id

-- name: task_flow_attempt_target
-- What an attempt route decides on: the task, and attempt $2 of it when there is one ($3: also
-- the task's input, which only complete needs).
SELECT t.id, t.team_id, t.status, t.task_type, t.input_cid, t.workflow_id, t.cancel_reason,
       CASE WHEN $3::boolean THEN t.input END AS input,
       a.status AS attempt_status, a.claimed_by_agent_id, a.claim_expires_at, a.lease_ttl_sec,
       a.policy_snapshot
FROM tasks t
LEFT JOIN task_attempts a ON a.task_id = t.id AND a.attempt_n = $2
WHERE t.id = $1

-- name: task_flow_claim_target
-- What a claim (or a cancel) decides on: the task, the status of the task its claim condition
-- names, and in `closure` object_closure's rows for the task as JSON arrays ($2..$4 as
-- object_closure's $3..$5, like diary_with_closure): reading the task and deciding whether its
-- caller may claim it is one statement on one connection. No row when there is no such task.
SELECT t.id, t.team_id, t.status, t.workflow_id, t.claim_condition, c.status AS condition_status,
       t.task_type, t.allowed_profiles,
       (SELECT jsonb_agg(jsonb_build_array(p.namespace, p.object_id, p.relation, p.subject_ns,
                                           p.subject_id, p.subject_relation))
        FROM permission_closure('Task', $1::text, $2::text[], $3::text[], $4::integer) p)
         AS closure
FROM tasks t
LEFT JOIN tasks c ON c.id = (t.claim_condition ->> 'taskId')::uuid
WHERE t.id = $1::text::uuid

-- name: task_flow_attempt
SELECT id, task_id, attempt_n, workflow_id, runtime_id, lease_id, claimed_by_agent_id, status,
       lease_ttl_sec, claimed_at, started_at, last_heartbeat_at, claim_expires_at, finished_at,
       output, output_cid, content_signature, usage, error, timeout_reason, daemon_state,
       runtime_profile_id, runtime_profile_revision, policy_snapshot_hash
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
