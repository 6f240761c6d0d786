-- name: insert_connector_client
INSERT INTO connector_clients (client_id, secret_hash, client_name, redirect_uris, metadata)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (client_id) DO NOTHING

-- name: get_connector_client
SELECT client_id, secret_hash, client_name, redirect_uris, metadata, created_at
FROM connector_clients WHERE client_id = $1

-- name: insert_connector_code
INSERT INTO connector_codes (code_hash, client_id, human_id, identity_id, redirect_uri,
                             redirect_uri_explicit, code_challenge, scopes, resource, expires_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
ON CONFLICT (code_hash) DO NOTHING

-- name: get_connector_code
SELECT code_hash, client_id, human_id, identity_id, redirect_uri, redirect_uri_explicit,
       code_challenge, scopes, resource, expires_at, used_at
FROM connector_codes WHERE code_hash = $1

-- name: use_connector_code
-- one use only: a second redeem finds it used (and the caller revokes the grant it made)
UPDATE connector_codes SET used_at = now()
WHERE code_hash = $1 AND client_id = $2 AND used_at IS NULL AND expires_at > now()
RETURNING human_id, identity_id, scopes, resource

-- name: insert_connector_grant
INSERT INTO connector_grants (id, client_id, code_hash, human_id, identity_id, scopes, resource,
                              refresh_hash, refresh_expires_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)

-- name: get_connector_grant_by_code
SELECT id, client_id, human_id, identity_id, scopes, resource, refresh_hash, revoked_at
FROM connector_grants WHERE code_hash = $1

-- name: revoke_connector_grant
UPDATE connector_grants SET revoked_at = coalesce(revoked_at, now()) WHERE id = $1

-- name: revoke_connector_grant_of_code
UPDATE connector_grants SET revoked_at = coalesce(revoked_at, now()) WHERE code_hash = $1

-- name: get_connector_grant_by_refresh
SELECT id, client_id, human_id, identity_id, scopes, resource, refresh_expires_at, refresh_hash
FROM connector_grants
WHERE refresh_hash = ANY($1::text[]) AND revoked_at IS NULL

-- name: rotate_connector_refresh
UPDATE connector_grants
SET refresh_hash = $4, refresh_expires_at = $5, rotated_at = now()
WHERE id = $1 AND client_id = $2 AND refresh_hash = $3 AND revoked_at IS NULL
  AND refresh_expires_at > now()
RETURNING id, human_id, identity_id, scopes, resource

-- name: get_connector_grant_refresh
SELECT id, human_id, identity_id, scopes, resource, refresh_hash
FROM connector_grants WHERE id = $1

-- name: get_active_connector_grant
SELECT id, client_id, human_id, identity_id, scopes, resource
FROM connector_grants WHERE id = $1 AND revoked_at IS NULL
