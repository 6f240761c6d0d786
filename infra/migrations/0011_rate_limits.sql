-- Rate-limit state shared by every API process (DECISIONS "Operations"): one row per
-- (identity or client address, bucket) holding the bucket's GCRA "theoretical arrival time"
-- (`tat_us`, microseconds since the epoch by the API's clock). A row whose `tat_us` has passed
-- says the same as no row; the limiter's sweep deletes those.
--
-- UNLOGGED: a counter is not domain state, so it skips the WAL (no replication, emptied by a
-- crash, which only forgets who was near a limit). fillfactor leaves room on each page so the
-- update of every request stays a HOT update (no index write).
CREATE UNLOGGED TABLE rate_limits (
    key text NOT NULL,
    bucket text NOT NULL,
    tat_us bigint NOT NULL,
    -- the bucket's period as the last request applied it (a setting may change between requests)
    period_us bigint NOT NULL,
    -- whether the last request was admitted (a refused one leaves `tat_us` as it was)
    admitted boolean NOT NULL,
    PRIMARY KEY (key, bucket)
) WITH (fillfactor = 70);
