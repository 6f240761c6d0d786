"""An entry's creation, one workflow: scan for prompt injection → compute the CID → embed →
insert the row with its parent tuple. An exact duplicate of a live entry of the diary inserts
nothing: the insert step answers with that entry (`EntryInserted.duplicate`). Where it runs and
what happens when the embedding fails: `workflows.entries`, whose steps it shares.

It has this module to itself because the sandbox re-imports a workflow's module for every new
run, and every run of this one is a new run: defining the six other entry workflows beside it
cost each creation ~5 ms of worker CPU (6.7 ms a run with them, 1.6 ms alone). What it shares
comes from `workflows.entries`, passed through like `workflows.common`.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities.memory import MemoryActivities
    from schemas.kernel.cids import entry_cid
    from schemas.memory import EntryDraft, EntryInsert, EntryInserted
    from workflows.common import run_local_step
    from workflows.entries import embed_later, embed_now, embedding_text, threats_of


@workflow.defn(name="EntryCreate")
class EntryCreateWorkflow:
    @workflow.run
    async def run(self, draft: EntryDraft) -> EntryInserted:
        risk, threats = threats_of(draft.title, draft.content)
        # In a signed diary the CID also covers the predecessor; the insert computes it then.
        cid = entry_cid(draft.content, draft.title, draft.tags, draft.entry_type)
        text = embedding_text(draft)
        vector = await embed_now(text, locally=draft.embed_locally)
        inserted = await run_local_step(
            MemoryActivities.insert_entry,
            EntryInsert(
                draft=draft,
                cid=cid,
                injection_risk=risk,
                injection_threats=threats,
                embedding=vector,
            ),
        )
        if vector is None and not inserted.duplicate:  # a duplicate wrote nothing to embed
            await embed_later(draft.entry_id, text, inserted.cid, locally=draft.embed_locally)
        return inserted
