-- Runtime profiles (cairn/infra/repos/runtime_profiles.py): the team's profiles, read by the API
-- and written by the RuntimeProfile* workflows.

-- name: runtime_profile_get
SELECT id, team_id, name, revision, policy, created_by_agent_id, created_by_human_id,
       created_at, updated_at
FROM runtime_profiles
WHERE id = $1

-- name: runtime_profile_list
SELECT id, team_id, name, revision, policy, created_by_agent_id, created_by_human_id,
       created_at, updated_at
FROM runtime_profiles
WHERE team_id = $1
ORDER BY created_at, id

-- name: runtime_profile_by_name
SELECT id, team_id, name, revision, policy, created_by_agent_id, created_by_human_id,
       created_at, updated_at
FROM runtime_profiles
WHERE team_id = $1 AND name = $2

-- name: runtime_profile_lock_team
-- Serialises the creates of one team (the per-team count stays within its limit).
SELECT id FROM teams WHERE id = $1 FOR UPDATE

-- name: runtime_profile_count
SELECT count(*) FROM runtime_profiles WHERE team_id = $1

-- name: runtime_profile_insert
INSERT INTO runtime_profiles (id, team_id, name, policy, created_by_agent_id, created_by_human_id)
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (id) DO NOTHING
RETURNING revision

-- name: runtime_profile_update
-- An update of revision $2 (none when another update came first); $3 / $4 NULL: unchanged.
UPDATE runtime_profiles
SET name = coalesce($3, name), policy = coalesce($4::jsonb, policy),
    revision = revision + 1, updated_at = now()
WHERE id = $1 AND revision = $2
RETURNING revision

-- name: runtime_profile_delete
DELETE FROM runtime_profiles WHERE id = $1
