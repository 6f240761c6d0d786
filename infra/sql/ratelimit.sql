-- The shared rate limiter (cairn/infra/repos/ratelimit.py, api/ratelimit.py): a GCRA per
-- (key, bucket), decided in one statement so concurrent API processes cannot both take the last
-- place. A bucket of `limit` requests per `period` frees one place every period/limit
-- (`emission`) and lets a caller run up to a whole period ahead (a burst of `limit`). Times are
-- integer microseconds, so `limit` emissions never add up to more than the period.

-- name: rate_limit_take
-- $1 keys, $2 buckets, $3 emissions, $4 periods (one element per bucket, in lock order), $5 now.
-- An admitted request moves `tat_us` one emission on from max(tat_us, now); a refused one leaves
-- it. On a conflict, excluded.tat_us - $5 is the bucket's emission.
INSERT INTO rate_limits AS r (key, bucket, tat_us, period_us, admitted)
SELECT a.key, a.bucket, $5 + a.emission, a.period, true
FROM unnest($1::text[], $2::text[], $3::int8[], $4::int8[]) AS a(key, bucket, emission, period)
ON CONFLICT (key, bucket) DO UPDATE SET
    tat_us = CASE
        WHEN greatest(r.tat_us, $5) + excluded.tat_us - $5 - $5 <= excluded.period_us
        THEN greatest(r.tat_us, $5) + excluded.tat_us - $5
        ELSE r.tat_us
    END,
    period_us = excluded.period_us,
    admitted = greatest(r.tat_us, $5) + excluded.tat_us - $5 - $5 <= excluded.period_us
RETURNING bucket, tat_us, admitted

-- name: rate_limit_give_back
-- Return one place to a bucket ($3: its emission) for a request that created nothing; the
-- bucket never gets more than full ($4: now).
UPDATE rate_limits
SET tat_us = greatest(tat_us - $3, $4)
WHERE key = $1 AND bucket = $2

-- name: rate_limit_sweep
-- Rows whose tat_us has passed ($1: now) carry no state; at most $2 per call.
WITH doomed AS (
    SELECT key, bucket FROM rate_limits WHERE tat_us < $1 LIMIT $2
), deleted AS (
    DELETE FROM rate_limits r USING doomed
    WHERE r.key = doomed.key AND r.bucket = doomed.bucket AND r.tat_us < $1
    RETURNING 1
)
SELECT count(*) FROM deleted
