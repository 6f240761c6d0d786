"""Task queue names: one rule shared by the worker process (which polls them), the API (which
starts workflows on them) and workflows (which route activities to them), so they cannot
disagree."""

from __future__ import annotations

EMBEDDING_QUEUE_SUFFIX = "-embeddings"


def embedding_queue_for(task_queue: str) -> str:
    """The embedding task queue paired with a service task queue: the entry workflows and the
    model that embeds their text, in the same worker."""
    return f"{task_queue}{EMBEDDING_QUEUE_SUFFIX}"


def is_embedding_queue(task_queue: str) -> bool:
    """True for a queue whose workers hold the model (so an embedding can run locally there)."""
    return task_queue.endswith(EMBEDDING_QUEUE_SUFFIX)
