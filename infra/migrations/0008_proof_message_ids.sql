-- Two rules of SPEC 2 the first schema missed.

-- 2.3: an agent's OAuth2 client metadata carries `proof`, the registration's evidence
-- (DECISIONS "Identity and authentication": {"kind": "voucher", "voucherId": ...}). New clients
-- get it at registration; clients registered before get the voucher their agent redeemed (the
-- latest, should it have registered again). A client whose agent redeemed none keeps none.
UPDATE oauth_clients AS c
SET metadata = c.metadata || jsonb_build_object(
        'proof', jsonb_build_object('kind', 'voucher', 'voucherId', v.id::text))
FROM (
    SELECT DISTINCT ON (redeemed_by) redeemed_by, id
    FROM agent_vouchers
    WHERE redeemed_by IS NOT NULL
    ORDER BY redeemed_by, redeemed_at DESC
) AS v
WHERE NOT (c.metadata ? 'proof') AND c.metadata ->> 'agent_id' = v.redeemed_by::text;

-- 2.6: task messages have an `id` beside (attempt_id, seq); existing rows get one each.
ALTER TABLE task_messages ADD COLUMN id uuid NOT NULL DEFAULT gen_random_uuid();
ALTER TABLE task_messages ADD CONSTRAINT task_messages_id_key UNIQUE (id);
