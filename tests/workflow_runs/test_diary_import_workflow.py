"""The DiaryImport workflow on Temporal's test server: the staged file is discarded whether
the write succeeds or is refused, so a failed import leaves nothing behind in S3 either."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

import pytest
from temporalio import activity
from temporalio.client import WorkflowFailureError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from schemas.diary_archive import DiaryImported, DiaryImportInput, staged_archive_key
from schemas.errors import ArchiveInvalid
from workers.interceptors import DomainErrorInterceptor
from workflows.diary_archive import DiaryImportWorkflow, diary_import_workflow_id


@dataclass
class StagedFiles:
    """The write and discard steps over an in-memory set of staged keys; `refuse` makes the
    write fail the way a refused archive does."""

    staged: set[str] = field(default_factory=set)
    refuse: bool = False

    @activity.defn(name="diary_archive.write")
    async def write(self, inp: DiaryImportInput) -> DiaryImported:
        assert inp.archive_key in self.staged
        if self.refuse:
            raise ArchiveInvalid("block b...: its bytes do not hash")
        return DiaryImported(entries=0)

    @activity.defn(name="diary_archive.discard")
    async def discard(self, inp: DiaryImportInput) -> None:
        self.staged.discard(inp.archive_key)


def import_input() -> DiaryImportInput:
    diary_id = uuid.uuid4()
    return DiaryImportInput(
        diary_id=diary_id,
        team_id=uuid.uuid4(),
        created_by=uuid.uuid4(),
        archive_key=staged_archive_key(diary_id, "bafkreiexample"),
    )


@pytest.mark.parametrize("refuse", [False, True], ids=["written", "refused"])
async def test_the_staged_file_is_discarded_either_way(
    time_skipping_env: WorkflowEnvironment, refuse: bool
) -> None:
    files = StagedFiles(refuse=refuse)
    inp = import_input()
    files.staged.add(inp.archive_key)
    queue = f"imports-{uuid.uuid4().hex[:8]}"
    async with Worker(
        time_skipping_env.client,
        task_queue=queue,
        workflows=[DiaryImportWorkflow],
        activities=[files.write, files.discard],
        interceptors=[DomainErrorInterceptor()],
    ):
        run = time_skipping_env.client.execute_workflow(
            DiaryImportWorkflow.run,
            inp,
            id=diary_import_workflow_id(inp.diary_id),
            task_queue=queue,
        )
        if refuse:
            with pytest.raises(WorkflowFailureError):
                await run
        else:
            assert (await run).entries == 0
    assert files.staged == set()
