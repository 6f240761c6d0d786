-- Diary transfers (SPEC 2.2, 3.3): written only by the DiaryTransfer workflow's activities
-- (cairn/infra/repos/transfers.py), read by the transfer routes. At most one transfer per diary
-- is pending (the partial unique index `diary_transfers_one_pending`).

-- name: transfer_get
-- The reads select from diary_transfer_views (migration 0023): the transfer with the names of
-- its initiator, its diary and both teams, joined once there.
SELECT * FROM diary_transfer_views t
WHERE t.id = $1

-- name: transfer_lock
SELECT id, diary_id, source_team_id, destination_team_id, initiated_by, status, workflow_id,
       created_at, resolved_at, expires_at
FROM diary_transfers WHERE id = $1
FOR UPDATE

-- name: transfer_pending_of_diary
SELECT * FROM diary_transfer_views t
WHERE t.diary_id = $1 AND t.status = 'pending'

-- name: transfer_list_of_diary
SELECT * FROM diary_transfer_views t
WHERE t.diary_id = $1
ORDER BY t.created_at DESC, t.id DESC

-- name: transfer_list_pending_to
-- Pending transfers whose destination is one of the teams $1 (the caller owns them); one past
-- its deadline is left out even before its workflow marks it expired.
SELECT * FROM diary_transfer_views t
WHERE t.destination_team_id = ANY($1::uuid[]) AND t.status = 'pending' AND t.expires_at > now()
ORDER BY t.created_at, t.id

-- name: transfer_lock_team
-- Shared lock: the team cannot be archived or deleted while a diary moves into it.
SELECT id, personal, status FROM teams WHERE id = $1 FOR SHARE

-- name: transfer_lock_diary
SELECT id, team_id FROM diaries WHERE id = $1 FOR UPDATE

-- name: transfer_insert
INSERT INTO diary_transfers (
    id, diary_id, source_team_id, destination_team_id, initiated_by, workflow_id, expires_at)
VALUES ($1, $2, $3, $4, $5, $6, $7)
ON CONFLICT (id) DO NOTHING
RETURNING id, diary_id, source_team_id, destination_team_id, initiated_by, status, workflow_id,
          created_at, resolved_at, expires_at

-- name: transfer_move_diary
-- Compare-and-set: the diary moves only from the team the transfer was proposed from.
UPDATE diaries SET team_id = $3, updated_at = now()
WHERE id = $1 AND team_id = $2
RETURNING id

-- name: transfer_resolve
-- Move a pending transfer to its final status ($2: accepted, rejected or expired).
UPDATE diary_transfers SET status = $2, resolved_at = now()
WHERE id = $1 AND status = 'pending'
RETURNING id, diary_id, source_team_id, destination_team_id, initiated_by, status, workflow_id,
          created_at, resolved_at, expires_at
