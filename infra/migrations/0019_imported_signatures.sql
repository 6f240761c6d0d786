-- Signatures of entries that arrived in a diary archive (POST /diaries/import). Such an entry
-- was signed through a signing request of another diary, maybe of another server, so there is
-- no local `signing_requests` row to verify it against: the archive's public key and nonce are
-- kept here, beside the signature in `diary_entries.content_signature`. Signed entries are
-- never deleted on their own; the row goes with its entry (a diary delete is refused anyway
-- while it holds signed entries).
CREATE TABLE imported_signatures (
    entry_id    uuid PRIMARY KEY REFERENCES diary_entries (id) ON DELETE CASCADE,
    public_key  text NOT NULL,
    fingerprint text NOT NULL,
    nonce       uuid NOT NULL
);
