-- Reads behind the two interactive apps (spec 4.7): the diary map and the queue's counts.

-- name: apps_diary_version
-- What the diary map's projection depends on: how many entries, how many embedded, and the
-- latest change. An insert or a delete changes the count, an update moves updated_at, an
-- embedding arriving later (it is written without touching updated_at) changes `embedded`.
SELECT count(*) AS entries, count(embedding) AS embedded, max(updated_at) AS changed_at
FROM diary_entries
WHERE diary_id = $1

-- name: apps_diary_map_rows
-- The newest $2 entries of a diary with what the map draws, newest first. The content comes
-- along for its token estimate (the kernel's word count, in Python): counting words here with
-- a regular expression was several times slower than sending the text.
-- The embedding comes in pgvector's binary form (`vector_send`), decoded in one numpy call
-- instead of 10 000 calls of the driver's codec.
SELECT id, title, entry_type, tags, injection_risk, content, vector_send(embedding) AS embedding
FROM diary_entries
WHERE diary_id = $1
ORDER BY created_at DESC, id DESC
LIMIT $2

-- name: apps_task_counts
-- A team's tasks counted by status, under the queue view's filters: $2 task type, $3 General
-- only, $4 project id.
SELECT status, count(*) AS tasks
FROM tasks
WHERE team_id = $1
  AND ($2::text IS NULL OR task_type = $2::text)
  AND (NOT $3::boolean OR project_id IS NULL)
  AND ($4::uuid IS NULL OR project_id = $4::uuid)
GROUP BY status
