-- A task's provenance diary is history, not a dependency (DECISIONS "Trust at the edges"): a
-- diary named by a non-terminal task is not deleted (the delete answers 409 `diary-in-use`,
-- memory_delete_diary's caller counts them under the diary's row lock, and a task insert takes
-- that lock in share mode), while a terminal task keeps its `diaryId` after the diary is gone.
-- So the foreign key goes and the column stays. Every foreign key's delete rule: infra/foreign_keys.py.
ALTER TABLE tasks DROP CONSTRAINT tasks_diary_id_fkey;

-- the delete counts the open tasks naming the diary
CREATE INDEX tasks_open_by_diary ON tasks (diary_id)
    WHERE status IN ('queued', 'dispatched', 'running');
