"""The Markdown of the `server:pack-to-docs-v1` render method, as a pure function.

The rendered pack CID hashes this text, so its every byte is part of the content-addressed
contract (a golden file in `tests/unit/` holds it): the reference format of
`reference/anchor-notes.md` 1.5. Entries come in rank order; each prints its current full
content (a pack stores levels and token counts, never compressed text). Lines are joined with
``\\n`` and the document ends with one ``\\n`` after the last content.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Final
from uuid import UUID

from pydantic import BaseModel, ConfigDict

PACK_TO_DOCS_V1: Final = "server:pack-to-docs-v1"
SERVER_METHOD_PREFIX: Final = "server:"
SERVER_RENDER_METHODS: Final = frozenset({PACK_TO_DOCS_V1})


class RenderEntry(BaseModel):
    """What the renderer prints of one pack entry."""

    model_config = ConfigDict(frozen=True)

    entryId: UUID
    rank: int
    title: str | None
    content: str
    entryCidSnapshot: str
    compressionLevel: str
    originalTokens: int | None
    packedTokens: int | None


def is_server_method(render_method: str) -> bool:
    return render_method.startswith(SERVER_METHOD_PREFIX)


def iso_millis(moment: datetime) -> str:
    """JavaScript's `Date.toISOString()`: UTC, milliseconds, a `Z` (what the reference prints)."""
    utc = moment.astimezone(UTC)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"


def _tokens(value: int | None) -> str:
    return "?" if value is None else str(value)


def render_pack_to_docs_v1(
    pack_id: UUID, created_at: datetime, entries: Sequence[RenderEntry]
) -> str:
    """The `server:pack-to-docs-v1` Markdown of a pack."""
    ordered = sorted(entries, key=lambda e: (e.rank, str(e.entryId)))
    lines = [
        f"# Context Pack {pack_id}",
        "",
        f"- Created: {iso_millis(created_at)}",
        f"- Entries: {len(ordered)}",
        "",
    ]
    for i, entry in enumerate(ordered):
        lines += [
            f"### {entry.title if entry.title is not None else f'Entry {i + 1}'}",
            "",
            f"- Entry ID: `{entry.entryId}`",
            f"- CID: `{entry.entryCidSnapshot}`",
            f"- Compression: `{entry.compressionLevel}`",
            f"- Tokens: {_tokens(entry.packedTokens)}/{_tokens(entry.originalTokens)}",
            "",
            entry.content,
            "",
        ]
    return "\n".join(lines)
