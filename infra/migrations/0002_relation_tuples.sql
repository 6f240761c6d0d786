-- The permission engine's relation tuples (SPEC section 5):
-- namespace:object_id#relation@subject_ns:subject_id[#subject_relation].
-- subject_relation is '' for a whole subject (an Agent, a Human, a Team) and names a relation
-- for a subject set (Group:g#members); '' rather than NULL keeps it in the primary key.
CREATE TABLE relation_tuples (
    namespace        text NOT NULL CHECK (namespace <> ''),
    object_id        text NOT NULL CHECK (object_id <> ''),
    relation         text NOT NULL CHECK (relation <> ''),
    subject_ns       text NOT NULL CHECK (subject_ns <> ''),
    subject_id       text NOT NULL CHECK (subject_id <> ''),
    subject_relation text NOT NULL DEFAULT '',
    created_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (namespace, object_id, relation, subject_ns, subject_id, subject_relation)
);

-- Reverse lookups start from a subject: "which usersets hold Agent:a?", "which diaries does
-- Team:t bind?", and deleting every tuple that names an object as its subject.
CREATE INDEX relation_tuples_by_subject
    ON relation_tuples (subject_ns, subject_id, subject_relation, namespace, relation);
