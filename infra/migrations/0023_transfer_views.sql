-- A diary transfer as its reads show it (issue 24): the transfer with the names of its
-- initiator (subject_names; an initiator is an agent or a human, and ids are unique across
-- both), its diary and both teams, so that a person deciding a transfer reads what moves where.
-- The transfer reads select from this view: the joins are written once.
CREATE VIEW diary_transfer_views AS
SELECT t.id, t.diary_id, t.source_team_id, t.destination_team_id, t.initiated_by, t.status,
       t.workflow_id, t.created_at, t.resolved_at, t.expires_at,
       n.fingerprint AS initiator_fingerprint, n.email AS initiator_email,
       n.display_name AS initiator_display_name,
       d.name AS diary_name, st.name AS source_team_name, dt.name AS destination_team_name
FROM diary_transfers t
LEFT JOIN subject_names n ON n.subject_id = t.initiated_by
LEFT JOIN diaries d ON d.id = t.diary_id
LEFT JOIN teams st ON st.id = t.source_team_id
LEFT JOIN teams dt ON dt.id = t.destination_team_id;
