"""The text an entry is embedded from: `[title\\n]content[\\ntag:<t>…]` (see DECISIONS, Memory)."""

from __future__ import annotations

from collections.abc import Iterable


def entry_embedding_text(title: str | None, content: str, tags: Iterable[str] = ()) -> str:
    """Join an entry's title, content and tags the way every embedding of an entry is made.

    A missing or blank title is left out; each tag becomes its own `tag:<t>` line, in order.
    The embedder truncates to its token limit, so the title comes first and the tags last.
    """
    lines = [title] if title and title.strip() else []
    lines.append(content)
    lines.extend(f"tag:{tag}" for tag in tags)
    return "\n".join(lines)
