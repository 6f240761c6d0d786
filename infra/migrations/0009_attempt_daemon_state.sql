-- What the executing daemon last reported about its slot (SPEC 2.6 `daemonState`, a closed
-- record `{reportedAt, slotResumableUntil}`), stored as the daemon sent it at complete.
ALTER TABLE task_attempts ADD COLUMN daemon_state jsonb;
