-- Agent keys (SPEC 2.3, 4.6): read by the API (authentication, lists, management checks),
-- written by the agent-key workflows' activities. `status` is the effective status: an active
-- key past its expiry reads as `expired` at once, before the expiry workflow records it.

-- name: agent_key_for_auth
SELECT k.id, k.actor_id, k.metadata, k.secret_hash, k.scopes,
       CASE WHEN k.status = 'active' AND k.expires_at <= now() THEN 'expired' ELSE k.status END
           AS status,
       a.identity_id, a.public_key, a.fingerprint
FROM agent_keys k LEFT JOIN agents a ON a.id = k.actor_id
WHERE k.id = $1

-- name: agent_key_get
SELECT k.id, k.actor_id, k.name, k.metadata, k.scopes, k.expires_at, k.created_at,
       k.rotated_at, k.revoked_at, k.revocation_reason, k.revocation_description,
       CASE WHEN k.status = 'active' AND k.expires_at <= now() THEN 'expired' ELSE k.status END
           AS status,
       a.fingerprint AS agent_fingerprint
FROM agent_keys k LEFT JOIN agents a ON a.id = k.actor_id
WHERE k.id = $1

-- name: agent_key_list
-- $1 binding scope, $2 team (team scope), $3 agent (required for identity scope), $4 status,
-- $5/$6 the keyset position after which to continue (created_at, id), $7 page size
SELECT k.id, k.actor_id, k.name, k.metadata, k.scopes, k.expires_at, k.created_at,
       k.rotated_at, k.revoked_at, k.revocation_reason, k.revocation_description,
       k.effective_status AS status, a.fingerprint AS agent_fingerprint
FROM (
    SELECT k.*,
           CASE WHEN k.status = 'active' AND k.expires_at <= now() THEN 'expired'
                ELSE k.status END AS effective_status
    FROM agent_keys k
    WHERE k.binding_scope = $1
      AND ($2::uuid IS NULL OR k.team_id = $2)
      AND ($3::uuid IS NULL OR k.actor_id = $3)
) k
LEFT JOIN agents a ON a.id = k.actor_id
WHERE ($4::text IS NULL OR k.effective_status = $4)
  AND ($5::timestamptz IS NULL OR (k.created_at, k.id) < ($5, $6::uuid))
ORDER BY k.created_at DESC, k.id DESC
LIMIT $7

-- name: agent_key_insert
INSERT INTO agent_keys (id, actor_id, name, metadata, scopes, secret_hash, expires_at,
                        created_by_ns, created_by_id, idempotency_key_hash)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
ON CONFLICT (id) DO NOTHING

-- name: agent_key_rotate
UPDATE agent_keys SET secret_hash = $2, rotated_at = now(), updated_at = now()
WHERE id = $1 AND status = 'active' AND expires_at > now()

-- name: agent_key_revoke
UPDATE agent_keys
SET status = 'revoked', revoked_at = now(), revocation_reason = $2,
    revocation_description = $3, updated_at = now()
WHERE id = $1 AND status <> 'revoked'

-- name: agent_key_expire
UPDATE agent_keys SET status = 'expired', updated_at = now()
WHERE id = $1 AND status = 'active' AND expires_at <= $2
