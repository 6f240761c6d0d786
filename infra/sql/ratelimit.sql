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

-- name: rate_limit_reserve
-- A lease of places for one API process to hand out itself (api/ratelimit.py `Lease`): per
-- (key, bucket), first return $6 places of a lapsed lease (the bucket never gets more than
-- full), then take up to $5 places, as many as fit within the burst ($4 the period, $3 the
-- emission; 0 when none fits: refused, `tat_us` kept). $1 keys, $2 buckets, one element per
-- bucket; $7 now. Rows are locked in (key, bucket) order; a bucket without a row is not
-- returned (rate_limit_reserve_fresh makes it).
WITH ask AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::int8[], $4::int8[], $5::int8[], $6::int8[])
        AS a(key, bucket, emission, period, want, give)
), held AS (
    SELECT r.key, r.bucket, greatest(r.tat_us - ask.give * ask.emission, $7) AS base,
        ask.emission, ask.period, ask.want
    FROM rate_limits r JOIN ask ON r.key = ask.key AND r.bucket = ask.bucket
    ORDER BY r.key, r.bucket
    FOR UPDATE OF r
), decided AS (
    SELECT held.*, greatest(0, least(held.want, ($7 + held.period - held.base) / held.emission))
        AS granted
    FROM held
)
UPDATE rate_limits r
SET tat_us = d.base + d.granted * d.emission,
    period_us = d.period,
    admitted = d.granted > 0
FROM decided d
WHERE r.key = d.key AND r.bucket = d.bucket
RETURNING r.bucket, r.tat_us, d.granted

-- name: rate_limit_reserve_fresh
-- The buckets rate_limit_reserve found without a row: each starts with the places the API
-- computed (at most a burst; $4 its `tat_us`, now + those places). $1 keys, $2 buckets, $3
-- periods. A row another process made meanwhile is left alone and not returned (reserve again).
INSERT INTO rate_limits (key, bucket, tat_us, period_us, admitted)
SELECT a.key, a.bucket, a.tat, a.period, true
FROM unnest($1::text[], $2::text[], $3::int8[], $4::int8[]) AS a(key, bucket, period, tat)
ORDER BY a.key, a.bucket
ON CONFLICT (key, bucket) DO NOTHING
RETURNING bucket, tat_us

-- name: rate_limit_return
-- The unused places of lapsed leases given back ($4 per bucket, $3 its emission; $1 keys, $2
-- buckets); a bucket never gets more than full ($5 now). Rows are locked in (key, bucket) order.
WITH held AS (
    SELECT r.key, r.bucket, greatest(r.tat_us - a.give * a.emission, $5) AS tat
    FROM rate_limits r
    JOIN unnest($1::text[], $2::text[], $3::int8[], $4::int8[]) AS a(key, bucket, emission, give)
        ON r.key = a.key AND r.bucket = a.bucket
    ORDER BY r.key, r.bucket
    FOR UPDATE OF r
)
UPDATE rate_limits r
SET tat_us = held.tat
FROM held
WHERE r.key = held.key AND r.bucket = held.bucket
