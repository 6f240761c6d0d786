"""Task queue names: one rule shared by the worker process (which polls them), the API (which
starts workflows on them) and workflows (which route activities to them), so they cannot
disagree."""

from __future__ import annotations


def embedding_queue_for(task_queue: str) -> str:
    """The embedding task queue paired with a service task queue: the entry workflows and the
    model that embeds their text, in the same worker."""
    return f"{task_queue}-embeddings"
