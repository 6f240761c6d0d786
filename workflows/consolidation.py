"""Consolidation (issue 26): near-duplicate entries get a `proposed` relation, never a merge.

- `EntryConsolidation` (`consolidation/entries/<batchId>`) runs over the entries an API process
  created since its last flush (`api.hygiene`, every few seconds: the create's latency does not
  include it, and a burst of writes costs one run, not one per entry): one step proposes, from
  each entry to its nearest older live entry of the same diary, `supersedes` (or `elaborates`
  when the newer content contains the older) when their cosine similarity reaches the
  threshold; the relation carries the workflow id and `similarity`.
- `ConsolidationSweep` (`maintenance/consolidation`, on a daily Temporal Schedule the worker
  makes) does the same for the entries whose vector was stored or replaced since the sweep
  last probed them (`consolidation_pending`, marked by a trigger: migration 0025), oldest
  change first, a page per step, each page's marks cleared once probed: a run's cost follows
  what changed since the last one, and a new entry is still probed against every older entry
  of its diary. After `pages_per_run` steps it continues as new, so a long backlog (the
  entries written before migration 0025) is cleaned in bounded histories and resumes where it
  stood.

- `RetrievalsRecord` (`retrievals/<uuid>`) stores a batch of the entry ids searches and packs
  returned, as the API collected them (`api.hygiene`): the search path itself writes nothing.

The consolidation runs are idempotent: a pair related already, in either direction and whatever
the status, gets no proposal, so a second run (or the sweep after the create's run) proposes
nothing twice. A principal decides: accepting the relation (`PATCH /relations/{id}`) marks
`superseded_by`.
"""

from __future__ import annotations

from typing import Final
from uuid import UUID

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities.memory import MemoryActivities
    from schemas.hygiene import (
        ConsolidationInput,
        ConsolidationPage,
        ConsolidationSweepInput,
        ConsolidationSweepResult,
        NearDuplicateProbe,
        NearDuplicateProposals,
        Retrievals,
    )
    from workflows.common import LONG_LIVED, LONG_STEP_HEARTBEAT, run_activity

    # a sweep step is a batched scan: the maintenance steps' timeout and patient retry
    from workflows.maintenance import STEP_RETRY, STEP_TIMEOUT
    from workflows.steps import RequestStep, request_step

SWEEP_WORKFLOW_ID: Final = "maintenance/consolidation"


def consolidation_schedule_id(task_queue: str) -> str:
    """One schedule per deployment (its task queue), even when several share a namespace."""
    return f"consolidation-sweep/{task_queue}"


def entry_consolidation_workflow_id(batch_id: UUID) -> str:
    """One flush of new entries of one API process (a fresh id per batch)."""
    return f"consolidation/entries/{batch_id}"


def _probe(inp: ConsolidationInput) -> NearDuplicateProbe:
    """The batch's probe: the relations it proposes carry this run's id."""
    return NearDuplicateProbe(
        entry_ids=inp.entry_ids,
        workflow_id=workflow.info().workflow_id,
        min_similarity=inp.min_similarity,
    )


# one short query per entry of a small batch: a local step, so the run is one workflow task
@request_step("EntryConsolidation", MemoryActivities.propose_near_duplicates, prepare=_probe)
class EntryConsolidationWorkflow(RequestStep[ConsolidationInput, NearDuplicateProposals]): ...


@workflow.defn(name="ConsolidationSweep", versioning_behavior=LONG_LIVED)
class ConsolidationSweepWorkflow:
    @workflow.run
    async def run(self, inp: ConsolidationSweepInput) -> ConsolidationSweepResult:
        scanned, proposed = inp.scanned, inp.proposed
        for _ in range(inp.pages_per_run):
            page = await run_activity(
                MemoryActivities.consolidate_page,
                ConsolidationPage(
                    limit=inp.page,
                    min_similarity=inp.min_similarity,
                    workflow_id=workflow.info().workflow_id,
                ),
                start_to_close=STEP_TIMEOUT,
                heartbeat=LONG_STEP_HEARTBEAT,
                retry=STEP_RETRY,
            )
            scanned, proposed = scanned + page.scanned, proposed + page.proposed
            if page.scanned < inp.page:
                return ConsolidationSweepResult(scanned=scanned, proposed=proposed)
        # more to do: a fresh history; the next page is wherever the marks left stand
        workflow.continue_as_new(inp.model_copy(update={"scanned": scanned, "proposed": proposed}))


def retrievals_workflow_id(batch_id: UUID) -> str:
    """One flush of one API process (a fresh id per batch)."""
    return f"retrievals/{batch_id}"


@request_step("RetrievalsRecord", MemoryActivities.record_retrievals)
class RetrievalsRecordWorkflow(RequestStep[Retrievals, None]): ...
