"""What happens to the rows that name a row when it is deleted: one decided rule per foreign key.

DECISIONS "Trust at the edges": a row other rows need is not deleted by surprise. Each foreign
key of the schema (by its constraint name in `pg_constraint`) is one of
- `cascade`: the child is part of the parent and goes with it (ON DELETE CASCADE);
- `set null`: the child outlives the parent and forgets it (ON DELETE SET NULL);
- `refuse`: the parent's delete path refuses while children exist, answering 409 with the code
  named here, or the parent is only ever deleted once nothing names it (NO ACTION keeps the
  database's own guard behind the path's check).
A key whose child keeps the parent's id as history has no foreign key at all (`tasks.diary_id`,
migration 0013). `tests/integration/test_foreign_keys.py` reads the catalog of the migrated
schema: a foreign key without a rule here, or whose ON DELETE differs from its rule, fails it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

OnDelete = Literal["cascade", "set null", "refuse"]


@dataclass(frozen=True)
class DeleteRule:
    on_delete: OnDelete
    why: str
    conflict: str | None = None  # the 409's code, for a `refuse` rule a delete route answers


def _cascade(why: str) -> DeleteRule:
    return DeleteRule("cascade", why)


def _set_null(why: str) -> DeleteRule:
    return DeleteRule("set null", why)


def _refuse(why: str, conflict: str | None = None) -> DeleteRule:
    return DeleteRule("refuse", why, conflict)


_IDENTITY_GONE = "a deleted identity (failed registration, compensated) takes its credentials"
_HUMAN_GONE = "a human's sessions and connector grants mean nothing without the human"
_TEAM_PART = "part of the team: deleting the team (refused while it owns diaries or tasks) ends it"
_TEAM_WORK = (
    "a team that owns tasks or was party to a transfer keeps them as history: DELETE "
    "/teams/{id} answers 409 team-in-use with the referencing kind and count"
)
_BLOB_SWEEP = "a blob is swept only once no staged or bound artifact names it"

DELETE_RULES: Mapping[str, DeleteRule] = MappingProxyType(
    {
        # identities and principals
        "agents_identity_id_fkey": _set_null(
            "the agent outlives its identity (spec 2.3: null when unbound, recreated on recovery)"
        ),
        "humans_identity_id_fkey": _set_null(
            "like an agent's, a human's identity can be recreated"
        ),
        "oauth_clients_identity_id_fkey": _cascade(_IDENTITY_GONE),
        "recovery_flows_identity_id_fkey": _cascade(_IDENTITY_GONE),
        "human_sessions_identity_id_fkey": _cascade(_IDENTITY_GONE),
        "human_sessions_human_id_fkey": _cascade(_HUMAN_GONE),
        "connector_codes_identity_id_fkey": _cascade(_IDENTITY_GONE),
        "connector_codes_human_id_fkey": _cascade(_HUMAN_GONE),
        "connector_codes_client_id_fkey": _cascade("a code is issued to its client only"),
        "connector_grants_identity_id_fkey": _cascade(_IDENTITY_GONE),
        "connector_grants_human_id_fkey": _cascade(_HUMAN_GONE),
        "connector_grants_client_id_fkey": _cascade("a grant is held by its client only"),
        "agent_vouchers_issuer_id_fkey": _set_null("a voucher outlives the agent that issued it"),
        "agent_vouchers_redeemed_by_fkey": _set_null("a redeemed voucher stays spent, as history"),
        "agent_keys_actor_id_fkey": _cascade("a key authenticates its agent only"),
        "signing_requests_agent_id_fkey": _cascade("a signing request belongs to its agent"),
        # teams
        "founding_acceptances_team_id_fkey": _cascade(_TEAM_PART),
        "groups_team_id_fkey": _cascade(_TEAM_PART),
        "team_invites_team_id_fkey": _cascade(_TEAM_PART),
        "projects_team_id_fkey": _cascade(_TEAM_PART),
        "runtime_profiles_team_id_fkey": _cascade(_TEAM_PART),
        "staged_artifacts_team_id_fkey": _cascade("staged bytes not bound to a task are drafts"),
        "diaries_team_id_fkey": _refuse(
            "a team's diaries are deleted or transferred first: DELETE /teams/{id} answers 409 "
            "team-has-diaries with the count",
            "team-has-diaries",
        ),
        "diary_transfers_source_team_id_fkey": _refuse(_TEAM_WORK, "team-in-use"),
        "diary_transfers_destination_team_id_fkey": _refuse(_TEAM_WORK, "team-in-use"),
        "tasks_team_id_fkey": _refuse(_TEAM_WORK, "team-in-use"),
        "task_artifacts_team_id_fkey": _refuse(
            "bound artifacts belong to the team's tasks, which keep the team (team-in-use)"
        ),
        "tasks_project_id_fkey": _refuse(
            "projects are deleted only with their team, which its tasks keep (team-in-use)"
        ),
        # diaries, entries, relations, packs
        "diary_entries_diary_id_fkey": _cascade("entries are the diary's content"),
        "diary_entries_superseded_by_fkey": _set_null("a superseded entry stays, unsuperseded"),
        "entry_relations_source_id_fkey": _cascade("a relation needs both of its entries"),
        "entry_relations_target_id_fkey": _cascade("a relation needs both of its entries"),
        "entry_retrievals_entry_id_fkey": _cascade("an entry's retrieval date is its own"),
        "consolidation_pending_entry_id_fkey": _cascade(
            "a deleted entry has nothing left for the sweep to probe"
        ),
        # a pending transfer refuses the delete first (409 diary-in-use, kind transfer)
        "diary_transfers_diary_id_fkey": _cascade("a settled transfer record describes its diary"),
        "context_packs_diary_id_fkey": _cascade("a pack selects entries of its diary"),
        "context_packs_supersedes_pack_id_fkey": _set_null("a pack outlives its predecessor"),
        "context_pack_entries_pack_id_fkey": _cascade("the selection is the pack's content"),
        "rendered_packs_diary_id_fkey": _cascade("a rendering shows entries of its diary"),
        "rendered_packs_source_pack_id_fkey": _cascade("a rendering is derived from its pack"),
        "entry_duplicates_refused_diary_id_fkey": _cascade(
            "a refused duplicate is counted in its diary's hygiene report"
        ),
        "imported_signatures_entry_id_fkey": _cascade(
            "an imported entry's signer record is part of that entry"
        ),
        "rendered_packs_verified_task_id_fkey": _set_null("a rendering outlives its verification"),
        # tasks
        "task_attempts_task_id_fkey": _cascade("attempts are the task's history"),
        "task_messages_attempt_id_fkey": _cascade("messages are the attempt's stream"),
        "task_artifacts_task_id_fkey": _cascade("spec 2.6: bound artifacts go with the task"),
        "staged_artifacts_cid_fkey": _refuse(_BLOB_SWEEP),
        "task_artifacts_cid_fkey": _refuse(_BLOB_SWEEP),
    }
)
