-- The shared rate limiter (cairn/infra/repos/ratelimit.py, api/ratelimit.py): a GCRA per
-- (key, bucket), decided in one statement so concurrent API processes cannot both take the last
-- place. A bucket of `limit` requests per `period` frees one place every period/limit
-- (`emission`) and lets a caller run up to a whole period ahead (a burst of `limit`). Times are
-- integer microseconds, so `limit` emissions never add up to more than the period.

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
-- Places for one request or one API process's lease (api/ratelimit.py), in one statement: per
-- (key, bucket), first return $6 places of a lapsed lease (the bucket never gets more than
-- full), then take up to $5 places, as many as fit within the burst ($4 the period, $3 the
-- emission; 0 when none fits: refused, `tat_us` kept). A request's own place in a strict bucket
-- is a lease of one. $1 keys, $2 buckets, one element per bucket; $7 now. Rows are locked in
-- (key, bucket) order. A bucket without a row starts with the places the API computed ($8 its
-- `tat_us`: now + those places, at most a burst); one another process made meanwhile is left
-- alone and not returned (ask again).
WITH ask AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::int8[], $4::int8[], $5::int8[], $6::int8[],
                         $8::int8[])
        AS a(key, bucket, emission, period, want, give, fresh_tat)
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
), updated AS (
    UPDATE rate_limits r
    SET tat_us = d.base + d.granted * d.emission,
        period_us = d.period,
        admitted = d.granted > 0
    FROM decided d
    WHERE r.key = d.key AND r.bucket = d.bucket
    RETURNING r.bucket, r.tat_us, d.granted
), made AS (
    INSERT INTO rate_limits (key, bucket, tat_us, period_us, admitted)
    SELECT a.key, a.bucket, a.fresh_tat, a.period, true
    FROM ask a
    WHERE NOT EXISTS (SELECT 1 FROM held h WHERE h.key = a.key AND h.bucket = a.bucket)
    ORDER BY a.key, a.bucket
    ON CONFLICT (key, bucket) DO NOTHING
    RETURNING key, bucket, tat_us
)
SELECT bucket, tat_us, granted FROM updated
UNION ALL
SELECT m.bucket, m.tat_us, (m.tat_us - $7) / a.emission AS granted
FROM made m JOIN ask a ON a.key = m.key AND a.bucket = m.bucket

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
