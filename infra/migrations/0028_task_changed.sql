-- A task's changes for those who follow it (an A2A stream, infra/task_changes.py): a NOTIFY on
-- `task_changed` carrying the task id whenever its row, one of its attempts or a batch of its
-- messages is written, by whichever process wrote it (a worker's activity, an API replica's
-- message append). Postgres delivers it at commit, once per transaction and task, to every
-- listening session; a follower then reads the rows as before.
CREATE FUNCTION notify_task_changed() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    -- two statements: each names a column only the table it runs for has
    IF TG_TABLE_NAME = 'tasks' THEN
        PERFORM pg_notify('task_changed', NEW.id::text);
    ELSE
        PERFORM pg_notify('task_changed', NEW.task_id::text);
    END IF;
    RETURN NULL;
END
$$;

-- messages come in batches: one statement, one lookup of their attempts' tasks
CREATE FUNCTION notify_task_messages() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('task_changed', a.task_id::text)
    FROM (SELECT DISTINCT attempt_id FROM inserted) i
    JOIN task_attempts a ON a.id = i.attempt_id;
    RETURN NULL;
END
$$;

CREATE TRIGGER tasks_changed AFTER INSERT OR UPDATE ON tasks
    FOR EACH ROW EXECUTE FUNCTION notify_task_changed();
CREATE TRIGGER task_attempts_changed AFTER INSERT OR UPDATE ON task_attempts
    FOR EACH ROW EXECUTE FUNCTION notify_task_changed();
CREATE TRIGGER task_messages_changed AFTER INSERT ON task_messages
    REFERENCING NEW TABLE AS inserted
    FOR EACH STATEMENT EXECUTE FUNCTION notify_task_messages();
