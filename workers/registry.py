"""The workflows and activities of the workers, used by production, tests and replay: the request
steps and the activities found from their declarations, the other workflows written out."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg
from temporalio import activity

import workflows
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
from workflows.agent_keys import AgentKeyCreateWorkflow, AgentKeyExpiryWorkflow
from workflows.artifacts import ArtifactSweepWorkflow
from workflows.consolidation import ConsolidationSweepWorkflow
from workflows.diary_archive import DiaryImportWorkflow
from workflows.entries import EntryEmbeddingWorkflow, EntryUpdateWorkflow
from workflows.entry_create import EntryCreateWorkflow
from workflows.maintenance import ExpiredRowsPurgeWorkflow, StaleTaskReconcileWorkflow
from workflows.packs import PackSweepWorkflow
from workflows.recovery import RecoveryVerifyWorkflow
from workflows.registration import RegistrationWorkflow
from workflows.signing import SigningRequestWorkflow
from workflows.steps import RequestStep, is_request_step
from workflows.tasks import TaskWorkflow
from workflows.teams import TeamFoundingWorkflow
from workflows.transfers import DiaryTransferWorkflow


def _request_steps() -> tuple[type[RequestStep[Any, Any]], ...]:
    """Every request step declared under workflows/ (`workflows.steps`): its declaration is its
    registration, so a new one needs no line here."""
    found: list[type[RequestStep[Any, Any]]] = []
    for module_info in pkgutil.iter_modules(workflows.__path__):
        module = importlib.import_module(f"{workflows.__name__}.{module_info.name}")
        found += [
            value
            for value in vars(module).values()
            if is_request_step(value) and value.__module__ == module.__name__
        ]
    return tuple(sorted(found, key=lambda cls: cls.__qualname__))


REQUEST_STEPS: Sequence[type[RequestStep[Any, Any]]] = _request_steps()

# The workflows of more than one step (or one that waits), each written out: a test
# (tests/unit/test_registry.py) walks workflows/ for a workflow class missing here.
MULTI_STEP_WORKFLOWS: Sequence[type] = (
    RegistrationWorkflow,
    RecoveryVerifyWorkflow,
    SigningRequestWorkflow,
    TeamFoundingWorkflow,
    DiaryTransferWorkflow,
    TaskWorkflow,
    ArtifactSweepWorkflow,
    DiaryImportWorkflow,
    EntryCreateWorkflow,
    EntryUpdateWorkflow,
    EntryEmbeddingWorkflow,
    ConsolidationSweepWorkflow,
    AgentKeyCreateWorkflow,
    AgentKeyExpiryWorkflow,
    ExpiredRowsPurgeWorkflow,
    StaleTaskReconcileWorkflow,
    PackSweepWorkflow,
)

WORKFLOWS: Sequence[type] = (*MULTI_STEP_WORKFLOWS, *REQUEST_STEPS)

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
    """Every activity of the service queue: each `@activity.defn` method of these objects."""
    return defined_activities(
        IdentityActivities(IdentityRepo(deps.pool, deps.secrets)),
        PermissionActivities(TupleRepository(deps.pool)),
        SigningActivities(SigningRepo(deps.pool)),
        TeamActivities(TeamRepo(deps.pool)),
        TransferActivities(TransferRepo(deps.pool)),
        TaskActivities(TaskRepo(deps.pool)),
        ArtifactActivities(ArtifactRepo(deps.pool), deps.blobs),
        MemoryActivities(MemoryRepo(deps.pool)),
        DiaryArchiveActivities(MemoryRepo(deps.pool), deps.blobs),
        AgentKeyActivities(AgentKeyRepo(deps.pool)),
        MaintenanceActivities(MaintenanceRepo(deps.pool)),
        PackActivities(PackRepo(deps.pool)),
        RuntimeProfileActivities(RuntimeProfileRepo(deps.pool)),
        ConnectorActivities(ConnectorRepo(deps.pool)),
    )


def defined_activities(*instances: object) -> list[Callable[..., Any]]:
    """Each `@activity.defn` method of each instance, bound: an activity class's methods are
    its declarations, so a new one needs no line here."""
    return [
        getattr(instance, name)
        for instance in instances
        for name, method in inspect.getmembers(type(instance), inspect.isfunction)
        if activity._Definition.from_callable(method) is not None
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
