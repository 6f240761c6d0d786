-- Teams, founding acceptances, invites, groups and projects (cairn/infra/repos/teams.py and the
-- team routes). Membership itself is relation tuples (tuples.sql): Team relations owners,
-- managers, executors, members hold Agents and Humans directly, so reads join them here.

-- name: team_insert_personal
-- any conflict (this id, or the principal's existing personal team) leaves the row alone
INSERT INTO teams (id, name, personal, created_by, created_by_ns, status)
VALUES ($1, $2, true, $3, $4, 'active')
ON CONFLICT DO NOTHING

-- name: team_personal_of
SELECT id FROM teams WHERE created_by = $1 AND personal

-- name: team_insert
INSERT INTO teams (id, name, personal, created_by, created_by_ns, status, workflow_id)
VALUES ($1, $2, false, $3, $4, $5, $6)
ON CONFLICT (id) DO NOTHING

-- name: team_get
SELECT id, name, personal, created_by, created_by_ns, status, workflow_id, created_at, updated_at
FROM teams WHERE id = $1

-- name: team_lock
SELECT id, personal, status FROM teams WHERE id = $1 FOR UPDATE

-- name: team_finish_founding
UPDATE teams SET status = $2, updated_at = now()
WHERE id = $1 AND status = 'founding'

-- name: team_delete
DELETE FROM teams WHERE id = $1

-- name: team_diary_count
SELECT count(*) FROM diaries WHERE team_id = $1

-- name: team_work_counts
-- what keeps a team (infra/foreign_keys.py): its tasks, and transfers it was party to
SELECT (SELECT count(*) FROM tasks WHERE team_id = $1) AS task,
       (SELECT count(*) FROM diary_transfers
        WHERE source_team_id = $1 OR destination_team_id = $1) AS transfer

-- name: team_list_for_subject
-- teams where the subject holds a role tuple, and teams it was asked to found that never
-- became active (so a co-founder can find the team to accept, and see that it was archived);
-- $3, when set, is the one team a team-bound agent key is confined to
SELECT t.id, t.name, t.personal, t.status, t.created_at, rt.relation, NULL::text AS founding_role,
       NULL::text AS founding_status
FROM relation_tuples rt
JOIN teams t ON t.id = CASE WHEN rt.namespace = 'Team' THEN rt.object_id::uuid END
WHERE rt.subject_ns = $1 AND rt.subject_id = $2 AND rt.subject_relation = ''
  AND rt.namespace = 'Team' AND rt.relation IN ('owners', 'managers', 'executors', 'members')
  AND ($3::uuid IS NULL OR t.id = $3::uuid)
UNION ALL
SELECT t.id, t.name, t.personal, t.status, t.created_at, NULL::text, fa.role, fa.status
FROM founding_acceptances fa
JOIN teams t ON t.id = fa.team_id
WHERE fa.subject_id = $2::uuid AND t.status <> 'active'
  AND ($3::uuid IS NULL OR t.id = $3::uuid)
ORDER BY created_at, id

-- name: team_subject_relations
-- the role relations one subject holds on one team
SELECT relation, subject_ns FROM relation_tuples
WHERE namespace = 'Team' AND object_id = $1::text AND subject_id = $2::text
  AND subject_relation = '' AND relation IN ('owners', 'managers', 'executors', 'members')

-- name: team_members
-- with each member's names (subject_names, migration 0022)
SELECT rt.subject_id::uuid AS subject_id, rt.subject_ns, rt.relation,
       n.fingerprint, n.email, n.display_name
FROM relation_tuples rt
LEFT JOIN subject_names n ON n.subject_ns = rt.subject_ns
    AND n.subject_id = CASE WHEN rt.subject_ns IN ('Agent', 'Human') THEN rt.subject_id::uuid END
WHERE rt.namespace = 'Team' AND rt.object_id = $1::text AND rt.subject_relation = ''
  AND rt.relation IN ('owners', 'managers', 'executors', 'members')
ORDER BY rt.created_at, rt.subject_id

-- name: team_owner_count
SELECT count(*) FROM relation_tuples
WHERE namespace = 'Team' AND object_id = $1::text AND relation = 'owners'

-- name: team_existing_agents
SELECT id FROM agents WHERE id = ANY($1::uuid[])

-- name: team_existing_humans
SELECT id FROM humans WHERE id = ANY($1::uuid[])

-- name: founding_insert
INSERT INTO founding_acceptances (id, team_id, subject_id, subject_ns, role, status, accepted_at)
SELECT s.id, $2, s.subject_id, s.subject_ns, s.role, s.status,
       CASE WHEN s.status = 'accepted' THEN now() END
FROM unnest($1::uuid[], $3::uuid[], $4::text[], $5::text[], $6::text[])
    AS s (id, subject_id, subject_ns, role, status)
ON CONFLICT (team_id, subject_id) DO NOTHING

-- name: founding_accept
UPDATE founding_acceptances SET status = 'accepted', accepted_at = now()
WHERE team_id = $1 AND subject_id = $2 AND status = 'pending'

-- name: founding_list
SELECT f.subject_id, f.subject_ns, f.role, f.status, f.accepted_at,
       n.fingerprint, n.email, n.display_name
FROM founding_acceptances f
LEFT JOIN subject_names n ON n.subject_ns = f.subject_ns AND n.subject_id = f.subject_id
WHERE f.team_id = $1 ORDER BY f.created_at, f.subject_id

-- name: founding_of
SELECT f.subject_id, f.subject_ns, f.role, f.status, f.accepted_at,
       n.fingerprint, n.email, n.display_name
FROM founding_acceptances f
LEFT JOIN subject_names n ON n.subject_ns = f.subject_ns AND n.subject_id = f.subject_id
WHERE f.team_id = $1 AND f.subject_id = $2

-- name: invite_insert
INSERT INTO team_invites (id, team_id, code, role, max_uses, created_by, expires_at)
VALUES ($1, $2, $3, $4, $5, $6, $7)
ON CONFLICT (id) DO NOTHING

-- name: invite_get
SELECT id, team_id, code, role, max_uses, use_count, used_at, created_by, expires_at, created_at
FROM team_invites WHERE id = $1 AND team_id = $2

-- name: invite_list
SELECT id, team_id, code, role, max_uses, use_count, used_at, created_by, expires_at, created_at
FROM team_invites WHERE team_id = $1 ORDER BY created_at DESC, id

-- name: invite_delete
DELETE FROM team_invites WHERE id = $1 AND team_id = $2

-- name: invite_team_of_code
SELECT team_id FROM team_invites WHERE code = $1

-- name: invite_lock_by_code
SELECT id, team_id, role, max_uses, use_count, expires_at, expires_at <= now() AS expired
FROM team_invites WHERE code = $1 FOR UPDATE

-- name: invite_use
UPDATE team_invites SET use_count = use_count + 1, used_at = now()
WHERE id = $1 AND use_count < max_uses

-- name: group_insert
INSERT INTO groups (id, team_id, name) VALUES ($1, $2, $3)
ON CONFLICT (id) DO NOTHING

-- name: group_get
SELECT id, team_id, name, created_at FROM groups WHERE id = $1

-- name: group_list
SELECT id, team_id, name, created_at FROM groups WHERE team_id = $1 ORDER BY name, id

-- name: group_ids_of_team
SELECT id FROM groups WHERE team_id = $1

-- name: group_delete
DELETE FROM groups WHERE id = $1

-- name: group_members
SELECT rt.subject_id::uuid AS subject_id, rt.subject_ns, n.fingerprint, n.email, n.display_name
FROM relation_tuples rt
LEFT JOIN subject_names n ON n.subject_ns = rt.subject_ns
    AND n.subject_id = CASE WHEN rt.subject_ns IN ('Agent', 'Human') THEN rt.subject_id::uuid END
WHERE rt.namespace = 'Group' AND rt.object_id = $1::text AND rt.relation = 'members'
  AND rt.subject_relation = '' AND rt.subject_ns IN ('Agent', 'Human')
ORDER BY rt.created_at, rt.subject_id

-- name: group_memberships_in_team
-- the Group#members tuples of one subject across a team's groups (dropped when it leaves)
SELECT rt.namespace, rt.object_id, rt.relation, rt.subject_ns, rt.subject_id,
       rt.subject_relation
FROM relation_tuples rt
JOIN groups g ON g.id::text = rt.object_id
WHERE g.team_id = $1 AND rt.namespace = 'Group' AND rt.relation = 'members'
  AND rt.subject_id = $2::text AND rt.subject_relation = ''

-- name: project_insert
INSERT INTO projects (id, team_id, name, created_by) VALUES ($1, $2, $3, $4)
ON CONFLICT (id) DO NOTHING

-- name: project_get
SELECT id, team_id, name, created_by, created_at FROM projects WHERE id = $1

-- name: project_list
SELECT id, team_id, name, created_by, created_at FROM projects
WHERE team_id = $1 ORDER BY name, id
