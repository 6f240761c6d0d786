-- name: get_client_for_token
SELECT c.client_id, c.secret_hash, c.secret_generation, c.scope, c.identity_id,
       a.id AS agent_id, a.public_key, a.fingerprint
FROM oauth_clients c
JOIN agents a ON a.identity_id = c.identity_id
WHERE c.client_id = $1

-- name: get_agent_of_client
-- The agent an OAuth2 client acts for (the token hook's claims).
SELECT a.id, a.identity_id, a.public_key, a.fingerprint, a.created_at, a.updated_at
FROM oauth_clients c
JOIN agents a ON a.identity_id = c.identity_id
WHERE c.client_id = $1

-- name: get_client_generation
SELECT c.secret_generation, c.scope, a.id AS agent_id, a.public_key, a.fingerprint
FROM oauth_clients c
JOIN agents a ON a.identity_id = c.identity_id
WHERE c.client_id = $1

-- name: list_verification_keys
SELECT kid, sealed_seed, public_key, created_at, retired_at
FROM jwt_signing_keys
WHERE retired_at IS NULL OR retired_at > now() - interval '2 hours'
ORDER BY created_at DESC

-- name: insert_signing_key
INSERT INTO jwt_signing_keys (kid, sealed_seed, public_key)
VALUES ($1, $2, $3)
ON CONFLICT (kid) DO NOTHING

-- name: retire_signing_keys_except
UPDATE jwt_signing_keys SET retired_at = now()
WHERE retired_at IS NULL AND kid <> $1

-- name: get_agent_by_fingerprint
SELECT id, identity_id, public_key, fingerprint, created_at, updated_at
FROM agents WHERE fingerprint = $1

-- name: get_agent_by_public_key
SELECT id, identity_id, public_key, fingerprint, created_at, updated_at
FROM agents WHERE public_key = $1

-- name: get_agent_by_identity
SELECT id, identity_id, public_key, fingerprint, created_at, updated_at
FROM agents WHERE identity_id = $1

-- name: get_open_voucher
SELECT id, code, issuer_id, expires_at
FROM agent_vouchers
WHERE code = $1 AND redeemed_at IS NULL AND expires_at > now()

-- name: count_open_vouchers_for_issuer
SELECT count(*) FROM agent_vouchers
WHERE issuer_id = $1 AND redeemed_at IS NULL AND expires_at > now()

-- name: insert_voucher
INSERT INTO agent_vouchers (id, code, issuer_id, expires_at)
VALUES ($1, $2, $3, $4)
ON CONFLICT (id) DO NOTHING

-- name: get_voucher
SELECT id, code, issuer_id, redeemed_by, expires_at, redeemed_at, created_at
FROM agent_vouchers WHERE id = $1

-- name: list_open_vouchers_for_issuer
SELECT id, code, issuer_id, expires_at, created_at
FROM agent_vouchers
WHERE issuer_id = $1 AND redeemed_at IS NULL AND expires_at > now()
ORDER BY created_at

-- name: lock_issuer
SELECT pg_advisory_xact_lock(hashtext('voucher-issuer:' || $1::text))

-- name: insert_identity
INSERT INTO identities (id, schema_id, traits, password_hash, email, display_name)
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (id) DO NOTHING

-- name: set_display_name
-- A human's display name ($2; NULL clears it): the identity's email and name as they are now.
UPDATE identities SET display_name = $2, updated_at = now()
WHERE id = $1 AND schema_id = 'human'
RETURNING id, email, display_name

-- name: get_human_profile
SELECT id, email, display_name FROM identities WHERE id = $1 AND schema_id = 'human'

-- name: delete_identity
DELETE FROM identities WHERE id = $1

-- name: get_identity
SELECT id, schema_id, traits, state, created_at, updated_at FROM identities WHERE id = $1

-- name: get_identity_by_email
SELECT id, schema_id, traits, state, password_hash FROM identities WHERE email = $1

-- name: upsert_agent
INSERT INTO agents (id, identity_id, public_key, fingerprint)
VALUES ($1, $2, $3, $4)
ON CONFLICT (public_key) DO UPDATE SET identity_id = EXCLUDED.identity_id, updated_at = now()
-- a key bound to a live identity is never taken over; a retry of the same binding is a no-op
WHERE agents.identity_id IS NULL OR agents.identity_id = EXCLUDED.identity_id
RETURNING id, identity_id, (xmax = 0) AS inserted

-- name: redeem_voucher
UPDATE agent_vouchers SET redeemed_by = $2, redeemed_at = now()
WHERE code = $1 AND redeemed_at IS NULL AND expires_at > now()
RETURNING id

-- name: voucher_redeemed_by
SELECT redeemed_by FROM agent_vouchers WHERE code = $1

-- name: voucher_redeemed_by_agent
-- the voucher an agent's registration redeemed (its latest, should it have registered again)
SELECT id FROM agent_vouchers WHERE redeemed_by = $1 ORDER BY redeemed_at DESC LIMIT 1

-- name: insert_oauth_client
INSERT INTO oauth_clients (client_id, identity_id, secret_hash, scope, metadata)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (client_id) DO NOTHING

-- name: rotate_client_secret
UPDATE oauth_clients
SET secret_hash = $2, secret_generation = secret_generation + 1, rotated_at = now()
WHERE identity_id = $1
RETURNING client_id, secret_generation

-- name: recovery_nonce_used
SELECT 1 FROM used_recovery_nonces WHERE nonce = $1

-- name: consume_recovery_nonce
INSERT INTO used_recovery_nonces (nonce, expires_at) VALUES ($1, $2)
ON CONFLICT (nonce) DO NOTHING
RETURNING nonce

-- name: insert_recovery_flow
INSERT INTO recovery_flows (id, identity_id, code_hash, expires_at)
VALUES ($1, $2, $3, $4)
ON CONFLICT (id) DO NOTHING

-- name: lock_recovery_flow
SELECT id, identity_id, code_hash, attempts, expires_at, used_at
FROM recovery_flows WHERE id = $1 FOR UPDATE

-- name: count_recovery_attempt
UPDATE recovery_flows SET attempts = attempts + 1 WHERE id = $1

-- name: use_recovery_flow
UPDATE recovery_flows SET used_at = now() WHERE id = $1

-- name: get_human_by_identity
SELECT id, identity_id, created_at FROM humans WHERE identity_id = $1

-- name: upsert_human_for_identity
INSERT INTO humans (id, identity_id) VALUES ($1, $2)
ON CONFLICT (identity_id) DO UPDATE SET updated_at = now()
RETURNING id

-- name: insert_session
INSERT INTO human_sessions (id, token_hash, identity_id, human_id, expires_at)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (id) DO NOTHING

-- name: revoke_session
UPDATE human_sessions SET revoked_at = now() WHERE id = $1 AND revoked_at IS NULL

-- name: get_session_by_hash
SELECT s.id, s.identity_id, s.human_id, s.token_hash, s.expires_at, i.traits
FROM human_sessions s JOIN identities i ON i.id = s.identity_id
WHERE s.token_hash = ANY($1::text[]) AND s.revoked_at IS NULL AND s.expires_at > now()

-- name: rehash_session
-- A session token's hash moved to the current server secret (compare-and-set).
UPDATE human_sessions SET token_hash = $3 WHERE id = $1::text::uuid AND token_hash = $2

-- name: rehash_oauth_client
UPDATE oauth_clients SET secret_hash = $3 WHERE client_id = $1 AND secret_hash = $2

-- name: rehash_agent_key
UPDATE agent_keys SET secret_hash = $3 WHERE id = $1::text::uuid AND secret_hash = $2

-- name: list_signing_key_seals
SELECT kid, sealed_seed FROM jwt_signing_keys

-- name: reseal_signing_key
UPDATE jwt_signing_keys SET sealed_seed = $3 WHERE kid = $1 AND sealed_seed = $2
