"""Task queue names: one rule shared by the worker process (which polls them) and workflows
(which route activities to them), so the two cannot disagree."""

from __future__ import annotations


def embedding_queue_for(task_queue: str) -> str:
    """The embedding task queue paired with a service task queue."""
    return f"{task_queue}-embeddings"
