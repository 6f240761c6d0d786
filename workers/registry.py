"""The one list of workflows and activities, used by production workers, tests and replay."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg

from activities.agent_keys import AgentKeyActivities
from activities.artifacts import ArtifactActivities
from activities.connector import ConnectorActivities
from activities.diary_archive import DiaryArchiveActivities, ImportEmbeddingActivities
from activities.embedding import EmbeddingActivities
from activities.identity import IdentityActivities
from activities.maintenance import MaintenanceActivities
from activities.memory import MemoryActivities
from activities.packs import PackActivities
from activities.permissions import PermissionActivities
from activities.runtime_profiles import RuntimeProfileActivities
from activities.signing import SigningActivities
from activities.tasks import TaskActivities
from activities.teams import TeamActivities
from activities.transfers import TransferActivities
from infra.permissions import TupleRepository
from infra.repos.agent_keys import AgentKeyRepo
from infra.repos.artifacts import ArtifactRepo
from infra.repos.connector import ConnectorRepo
from infra.repos.identity import IdentityRepo
from infra.repos.maintenance import MaintenanceRepo
from infra.repos.memory import MemoryRepo
from infra.repos.packs import PackRepo
from infra.repos.runtime_profiles import RuntimeProfileRepo
from infra.repos.signing import SigningRepo
from infra.repos.tasks import TaskRepo
from infra.repos.teams import TeamRepo
from infra.repos.transfers import TransferRepo
from infra.s3 import BlobStore
from schemas.kernel.keyring import SecretKeyring
from workflows.agent_keys import AGENT_KEY_WORKFLOWS
from workflows.artifacts import (
    ArtifactAttachWorkflow,
    ArtifactStageWorkflow,
    ArtifactSweepWorkflow,
)
from workflows.connector import CONNECTOR_WORKFLOWS
from workflows.consolidation import (
    ConsolidationSweepWorkflow,
    EntryConsolidationWorkflow,
    RetrievalsRecordWorkflow,
)
from workflows.credentials import CredentialRehashWorkflow
from workflows.diaries import (
    DiaryCreateWorkflow,
    DiaryDeleteWorkflow,
    DiaryGrantRevokeWorkflow,
    DiaryGrantWriteWorkflow,
    DiaryUpdateWorkflow,
)
from workflows.diary_archive import DiaryImportWorkflow
from workflows.entries import (
    EntryCreateWorkflow,
    EntryDeleteWorkflow,
    EntryEmbeddingWorkflow,
    EntryUpdateWorkflow,
    RelationCreateWorkflow,
    RelationDeleteWorkflow,
    RelationUpdateWorkflow,
)
from workflows.humans import (
    HumanRegistrationWorkflow,
    ProfileChangeWorkflow,
    SessionCloseWorkflow,
    SessionOpenWorkflow,
)
from workflows.maintenance import ExpiredRowsPurgeWorkflow, StaleTaskReconcileWorkflow
from workflows.packs import PACK_WORKFLOWS
from workflows.recovery import RecoveryRedeemWorkflow, RecoveryVerifyWorkflow
from workflows.registration import RegistrationWorkflow
from workflows.runtime_profiles import RUNTIME_PROFILE_WORKFLOWS
from workflows.signing import SigningRequestWorkflow
from workflows.signing_keys import SigningKeysWorkflow
from workflows.task_grants import TASK_GRANT_WORKFLOWS
from workflows.tasks import TaskWorkflow
from workflows.teams import TEAM_WORKFLOWS
from workflows.transfers import DiaryTransferWorkflow
from workflows.vouchers import VoucherIssueWorkflow

WORKFLOWS: Sequence[type] = (
    RegistrationWorkflow,
    VoucherIssueWorkflow,
    SigningKeysWorkflow,
    CredentialRehashWorkflow,
    RecoveryVerifyWorkflow,
    RecoveryRedeemWorkflow,
    HumanRegistrationWorkflow,
    ProfileChangeWorkflow,
    SessionOpenWorkflow,
    SessionCloseWorkflow,
    SigningRequestWorkflow,
    *TEAM_WORKFLOWS,
    *TASK_GRANT_WORKFLOWS,
    *RUNTIME_PROFILE_WORKFLOWS,
    DiaryTransferWorkflow,
    TaskWorkflow,
    ArtifactStageWorkflow,
    ArtifactAttachWorkflow,
    ArtifactSweepWorkflow,
    DiaryCreateWorkflow,
    DiaryUpdateWorkflow,
    DiaryDeleteWorkflow,
    DiaryGrantWriteWorkflow,
    DiaryGrantRevokeWorkflow,
    DiaryImportWorkflow,
    EntryCreateWorkflow,
    EntryUpdateWorkflow,
    EntryEmbeddingWorkflow,
    EntryDeleteWorkflow,
    RelationCreateWorkflow,
    RelationUpdateWorkflow,
    RelationDeleteWorkflow,
    EntryConsolidationWorkflow,
    ConsolidationSweepWorkflow,
    RetrievalsRecordWorkflow,
    *AGENT_KEY_WORKFLOWS,
    ExpiredRowsPurgeWorkflow,
    StaleTaskReconcileWorkflow,
    *PACK_WORKFLOWS,
    *CONNECTOR_WORKFLOWS,
)

# The workflows the API starts on the embedding task queue (their embedding is a local activity
# there, beside the model). They stay in WORKFLOWS too: runs started on the service queue before
# the move finish there, routing their embedding to this queue as a regular activity.
EMBEDDING_WORKFLOWS: Sequence[type] = (
    EntryCreateWorkflow,
    EntryUpdateWorkflow,
    EntryEmbeddingWorkflow,
)


@dataclass(frozen=True)
class ActivityDeps:
    """What activities are built from: a writable pool and the server secrets."""

    pool: asyncpg.Pool
    secrets: SecretKeyring
    # S3, for the artifact sweep's deletes (None in tests that never sweep)
    blobs: BlobStore | None = None


def activities(deps: ActivityDeps) -> list[Callable[..., Any]]:
    identity = IdentityActivities(IdentityRepo(deps.pool, deps.secrets))
    permissions = PermissionActivities(TupleRepository(deps.pool))
    signing = SigningActivities(SigningRepo(deps.pool))
    teams = TeamActivities(TeamRepo(deps.pool))
    transfers = TransferActivities(TransferRepo(deps.pool))
    tasks = TaskActivities(TaskRepo(deps.pool))
    artifacts = ArtifactActivities(ArtifactRepo(deps.pool), deps.blobs)
    memory = MemoryActivities(MemoryRepo(deps.pool))
    archives = DiaryArchiveActivities(MemoryRepo(deps.pool), deps.blobs)
    agent_keys = AgentKeyActivities(AgentKeyRepo(deps.pool))
    maintenance = MaintenanceActivities(MaintenanceRepo(deps.pool))
    packs = PackActivities(PackRepo(deps.pool))
    profiles = RuntimeProfileActivities(RuntimeProfileRepo(deps.pool))
    connector = ConnectorActivities(ConnectorRepo(deps.pool))
    return [
        connector.register_client,
        connector.issue_code,
        connector.redeem_code,
        connector.rotate_refresh,
        connector.revoke_grant,
        identity.check_voucher,
        identity.create_identity,
        identity.delete_identity,
        identity.bind_agent,
        identity.create_oauth_client,
        identity.issue_voucher,
        identity.ensure_signing_key,
        identity.rehash_credential,
        identity.check_recovery_nonce,
        identity.consume_recovery_nonce,
        identity.find_agent,
        identity.create_recovery_flow,
        identity.redeem_recovery,
        identity.open_session,
        identity.close_session,
        identity.set_display_name,
        permissions.write_tuples,
        permissions.delete_tuples,
        permissions.replace_tuples,
        permissions.delete_object,
        signing.insert_request,
        signing.record_signature,
        signing.expire_request,
        teams.create_personal_team,
        teams.create_team,
        teams.seed_founding,
        teams.accept_founding,
        teams.finish_founding,
        teams.delete_team,
        teams.change_member_role,
        teams.remove_member,
        teams.create_invite,
        teams.delete_invite,
        teams.join,
        teams.create_group,
        teams.delete_group,
        teams.add_group_member,
        teams.remove_group_member,
        teams.create_project,
        transfers.insert_transfer,
        transfers.accept_transfer,
        transfers.reject_transfer,
        transfers.expire_transfer,
        tasks.insert_task,
        tasks.project,
        profiles.create,
        profiles.update,
        profiles.delete,
        artifacts.stage,
        artifacts.attach,
        artifacts.expire_staged,
        artifacts.delete_unreferenced_blobs,
        memory.create_diary,
        memory.update_diary,
        memory.delete_diary,
        memory.write_grant,
        memory.revoke_grant,
        memory.insert_entry,
        memory.rewrite_entry,
        memory.set_embedding,
        memory.delete_entries,
        memory.create_relation,
        memory.set_relation_status,
        memory.delete_relation,
        memory.propose_near_duplicates,
        memory.consolidate_page,
        memory.record_retrievals,
        archives.write,
        archives.discard,
        agent_keys.insert,
        agent_keys.rotate,
        agent_keys.revoke,
        agent_keys.expire,
        maintenance.purge_signing_requests,
        maintenance.purge_recovery_nonces,
        maintenance.purge_vouchers,
        maintenance.purge_connector_codes,
        maintenance.purge_connector_grants,
        maintenance.find_stale_tasks,
        maintenance.settle_stale_task,
        packs.create_pack,
        packs.update_pack,
        packs.render,
        packs.update_rendered,
        packs.delete_expired_rendered,
        packs.delete_expired_packs,
    ]


def embedding_activities(
    embedding: EmbeddingActivities, pool: asyncpg.Pool
) -> list[Callable[..., Any]]:
    """The activities of the embedding task queue (`Settings.embedding_task_queue`): one loaded
    model per worker process, shared by every call through its micro-batcher, and the entry
    writes that `EMBEDDING_WORKFLOWS` run beside it as local activities."""
    memory = MemoryActivities(MemoryRepo(pool))
    imports = ImportEmbeddingActivities(embedding, MemoryRepo(pool))
    return [
        embedding.embed_passages,
        imports.embed_entries,
        memory.insert_entry,
        memory.rewrite_entry,
        memory.set_embedding,
    ]
