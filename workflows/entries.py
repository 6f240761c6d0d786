"""Entry writes: updates, the late embedding, deletes and relations, and what an entry's
creation (`workflows.entry_create`) shares with them. An entry's text is scanned for prompt
injection and hashed (its CID) in the workflow itself (pure, no round trip), then embedded and
written by local activities.

The API starts the entry workflows on the embedding task queue, whose workers hold the model:
the embedding is a local activity there (micro-batched across the concurrent writes of the
worker process, `activities.embedding.MicroBatcher`) and the write another, so a write is one
workflow task instead of three plus an activity task (bench/memory.py). Runs on the service
queue (started before this change, or by an API of the version before it) keep what they
recorded: the embedding as a regular activity routed to the embedding queue. Which of the two a
run does is in its input (`embed_locally`), so a replay takes the same branch.

An embedding that fails does not fail the write: the entry is stored without a vector (search
falls back to full text for it) and a child workflow, left running on its own, retries the
embedding with backoff and stores the vector once it succeeds.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import timedelta
from typing import Any
from uuid import UUID

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.workflow import ParentClosePolicy

with workflow.unsafe.imports_passed_through():
    from activities.embedding import EmbeddingActivities
    from activities.memory import MemoryActivities
    from schemas.embedding import EmbedRequest, EmbedResult
    from schemas.kernel.cids import entry_cid
    from schemas.kernel.embedding_text import entry_embedding_text
    from schemas.kernel.injection import entry_verdict
    from schemas.memory import (
        EntriesDeleted,
        EntryDraft,
        EntryEmbedding,
        EntryRefs,
        EntryRewrite,
        EntryUpdateInput,
        RelationCreateInput,
        RelationRef,
        RelationStatusChange,
        RelationWritten,
    )
    from workflows.common import (
        LONG_LIVED,
        STEP_FAILURES,
        embedding_task_queue,
        run_local_step,
        run_step,
    )
    from workflows.steps import RequestStep, request_step

# The write waits for at most two quick tries; the background retry is patient.
EMBED_TIMEOUT = timedelta(seconds=15)
EMBED_RETRY = RetryPolicy(initial_interval=timedelta(milliseconds=200), maximum_attempts=2)
ONE_TRY = RetryPolicy(maximum_attempts=1)
LATE_EMBED_FIRST_WAIT = timedelta(seconds=10)
LATE_EMBED_MAX_WAIT = timedelta(minutes=10)
LATE_EMBED_DEADLINE = timedelta(days=1)


def threats_of(title: str | None, content: str) -> tuple[bool, list[dict[str, Any]]]:
    return entry_verdict(title, content)


def embedding_text(draft: EntryDraft) -> str:
    return entry_embedding_text(draft.title, draft.content, draft.tags)


async def embed_now(
    text: str, *, locally: bool, retry: RetryPolicy = EMBED_RETRY
) -> list[float] | None:
    """The entry's vector, or None when the embedding service cannot answer right now."""
    try:
        request = EmbedRequest(texts=[text], fairness_key=workflow.info().priority.fairness_key)
        result = await _embed(request, locally=locally, retry=retry)
    except STEP_FAILURES:
        workflow.logger.warning("embedding failed; the entry is stored without a vector")
        return None
    return result.vectors[0]


async def _embed(request: EmbedRequest, *, locally: bool, retry: RetryPolicy) -> EmbedResult:
    """A local activity when the run was started beside the model (on the embedding queue); a
    regular one routed to that queue for runs started before the move. The choice is part of
    the run's input, so replay takes the branch the run recorded."""
    if locally:
        return await workflow.execute_local_activity_method(
            EmbeddingActivities.embed_passages,
            request,
            start_to_close_timeout=EMBED_TIMEOUT,
            retry_policy=retry,
        )
    return await workflow.execute_activity_method(
        EmbeddingActivities.embed_passages,
        request,
        task_queue=embedding_task_queue(),
        start_to_close_timeout=EMBED_TIMEOUT,
        retry_policy=retry,
    )


async def embed_later(entry_id: UUID, text: str, cid: str, *, locally: bool) -> None:
    await workflow.start_child_workflow(
        EntryEmbeddingWorkflow.run,
        EntryEmbedding(entry_id=entry_id, text=text, cid=cid, embed_locally=locally),
        id=entry_embedding_workflow_id(entry_id, cid),
        parent_close_policy=ParentClosePolicy.ABANDON,
    )


def entry_create_workflow_id(entry_id: UUID) -> str:
    return f"entries/{entry_id}/create"


def entry_update_workflow_id(entry_id: UUID) -> str:
    """Keyed by the entry: one update of an entry at a time (409 `entry-busy` otherwise)."""
    return f"entries/{entry_id}/update"


@workflow.defn(name="EntryUpdate")
class EntryUpdateWorkflow:
    @workflow.run
    async def run(self, inp: EntryUpdateInput) -> None:
        merged = inp.merged
        risk, threats = threats_of(merged.title, merged.content)
        cid = entry_cid(merged.content, merged.title, merged.tags, merged.entry_type)
        text = embedding_text(merged)
        vector = await embed_now(text, locally=merged.embed_locally) if inp.text_changed else None
        await run_local_step(
            MemoryActivities.rewrite_entry,
            EntryRewrite(
                change=inp.change,
                cid=cid,
                injection_risk=risk,
                injection_threats=threats,
                embedding=vector,
                reembed=inp.text_changed,
            ),
        )
        if inp.text_changed and vector is None:
            await embed_later(merged.entry_id, text, cid, locally=merged.embed_locally)


def entry_embedding_workflow_id(entry_id: UUID, cid: str) -> str:
    """The late embedding of one version (CID) of an entry."""
    return f"entries/{entry_id}/embedding/{cid}"


@workflow.defn(name="EntryEmbedding", versioning_behavior=LONG_LIVED)
class EntryEmbeddingWorkflow:
    """Retries an entry's embedding until it succeeds (or a day passes), then stores it.

    The backoff is a workflow timer between single tries, so an operator sees each wait in the
    history and a test server can skip it."""

    @workflow.run
    async def run(self, inp: EntryEmbedding) -> None:
        deadline = workflow.now() + LATE_EMBED_DEADLINE
        wait = LATE_EMBED_FIRST_WAIT
        while (
            vector := await embed_now(inp.text, locally=inp.embed_locally, retry=ONE_TRY)
        ) is None:
            if workflow.now() + wait > deadline:
                workflow.logger.error("giving up on the embedding; the entry stays text-only")
                return
            await workflow.sleep(wait)
            wait = min(wait * 2, LATE_EMBED_MAX_WAIT)
        await run_step(
            MemoryActivities.set_embedding,
            EntryEmbedding(entry_id=inp.entry_id, text="", cid=inp.cid, embedding=vector),
        )


def entries_delete_workflow_id(entry_ids: Sequence[UUID]) -> str:
    """Keyed by the set of entries deleted (a digest of the sorted ids, in any order): a retried
    batch delete hits the same id; another set runs beside it."""
    digest = hashlib.sha256(",".join(sorted(str(i) for i in entry_ids)).encode()).hexdigest()
    return f"entries/delete/{digest[:32]}"


@request_step("EntryDelete", MemoryActivities.delete_entries)
class EntryDeleteWorkflow(RequestStep[EntryRefs, EntriesDeleted]): ...


def relation_create_workflow_id(relation_id: UUID) -> str:
    return f"relations/{relation_id}/create"


@request_step("RelationCreate", MemoryActivities.create_relation)
class RelationCreateWorkflow(RequestStep[RelationCreateInput, RelationWritten]): ...


def relation_update_workflow_id(relation_id: UUID) -> str:
    """Keyed by the relation: a retried status change hits the same id, and two changes of one
    relation never run at once (409 "This relation is being updated")."""
    return f"relations/{relation_id}/update"


@request_step("RelationUpdate", MemoryActivities.set_relation_status)
class RelationUpdateWorkflow(RequestStep[RelationStatusChange, None]): ...


def relation_delete_workflow_id(relation_id: UUID) -> str:
    return f"relations/{relation_id}/delete"


@request_step("RelationDelete", MemoryActivities.delete_relation)
class RelationDeleteWorkflow(RequestStep[RelationRef, None]): ...
