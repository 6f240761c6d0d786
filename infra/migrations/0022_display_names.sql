-- Names for people (issue 24): a human may give a display name at registration and change or
-- clear it later; it lives with the identity, beside the email, because a human registers
-- before its `humans` row exists (that row is made at the first login).
ALTER TABLE identities ADD COLUMN display_name varchar(100);
ALTER TABLE identities ADD CONSTRAINT identities_display_name_check
    CHECK (char_length(display_name) >= 1);

-- What a client shows for a subject that permission tuples, foundings, grants and transfers
-- name by id: an agent's fingerprint, a human's email and display name. Reads join this view
-- on (subject_ns, subject_id), so the rule of which column names whom is written once.
CREATE VIEW subject_names AS
SELECT 'Agent'::text AS subject_ns, a.id AS subject_id, a.fingerprint::text AS fingerprint,
       NULL::text AS email, NULL::text AS display_name
FROM agents a
UNION ALL
SELECT 'Human'::text, h.id, NULL::text, i.email, i.display_name::text
FROM humans h
LEFT JOIN identities i ON i.id = h.identity_id;
