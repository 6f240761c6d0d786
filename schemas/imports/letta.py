"""Letta Agent File (`.af`, JSON; docs/imports.md "Letta").

    {"agents": [{"id", "name", "block_ids": [...], "passages": [...], ...}, ...],
     "blocks": [{"id", "label", "value", "limit", "description", "metadata"}, ...], ...}

An agent's memory blocks are the top-level blocks its `block_ids` name (older files carry them
inline, as `core_memory`, `blocks` or `memory_blocks`, read too). Each block with a value is a
`semantic` entry titled and tagged with its label, and tagged `agent:<name>`. Archival
passages, where a file carries them (`agents[].passages`, as Cognee's Letta reader expects;
`archival_memory` too), are `episodic` entries tagged `agent:<name>` and `archival`. Messages,
tools, sources and files are not memory and are not imported.
"""

from __future__ import annotations

from typing import Any, Final

from pydantic import Field

from schemas.imports.peer import (
    PeerEntry,
    PeerFile,
    PeerRecord,
    PeerTime,
    RecordRejected,
    entry,
    scope_tags,
    storable,
    validated,
)

ARCHIVAL_TAG: Final = "archival"


class LettaBlock(PeerRecord):
    id: str | None = None
    label: str = Field(min_length=1)
    value: str = ""
    limit: int | None = None
    description: str | None = None
    metadata: dict[str, Any] | None = None
    created_at: PeerTime = None
    updated_at: PeerTime = None


class LettaPassage(PeerRecord):
    id: str | None = None
    text: str
    metadata: dict[str, Any] | None = None
    created_at: PeerTime = None
    updated_at: PeerTime = None


class LettaAgent(PeerRecord):
    id: str | None = None
    name: str = Field(min_length=1)
    block_ids: list[str] = Field(default_factory=list)
    # inline blocks (older files; a create request's `memory_blocks`), under any of these names
    core_memory: list[Any] = Field(default_factory=list)
    blocks: list[Any] = Field(default_factory=list)
    memory_blocks: list[Any] = Field(default_factory=list)
    passages: list[Any] = Field(default_factory=list)
    archival_memory: list[Any] = Field(default_factory=list)


class AgentFile(PeerRecord):
    agents: list[Any] = Field(min_length=1)
    blocks: list[Any] = Field(default_factory=list)


def is_agent_file(document: Any) -> bool:
    return isinstance(document, dict) and isinstance(document.get("agents"), list)


def _shared_blocks(agent_file: AgentFile) -> dict[str, tuple[str, LettaBlock]]:
    """The file's top-level blocks by id, each with where it is in the file."""
    shared = {}
    for n, raw in enumerate(agent_file.blocks):
        where = f"blocks/{n}"
        block: LettaBlock = validated(LettaBlock, raw, where)
        if block.id is not None:
            shared[block.id] = (where, block)
    return shared


def _inline_blocks(agent: LettaAgent) -> tuple[tuple[str, list[Any]], ...]:
    return (
        ("core_memory", agent.core_memory),
        ("blocks", agent.blocks),
        ("memory_blocks", agent.memory_blocks),
    )


def _agent_blocks(
    agent: LettaAgent, agent_at: str, shared: dict[str, tuple[str, LettaBlock]]
) -> list[tuple[str, LettaBlock]]:
    inline_key, inline = next(
        ((key, blocks) for key, blocks in _inline_blocks(agent) if blocks), ("blocks", [])
    )
    blocks = [
        (f"{agent_at}/{inline_key}/{n}", validated(LettaBlock, raw, f"{agent_at}/{inline_key}/{n}"))
        for n, raw in enumerate(inline)
    ]
    for n, block_id in enumerate(agent.block_ids):
        if block_id not in shared:
            raise RecordRejected(f"{agent_at}/block_ids/{n}", f"no block {block_id!r} in the file")
        blocks.append(shared[block_id])
    return blocks


def _block_entry(where: str, block: LettaBlock, agent: LettaAgent) -> PeerEntry:
    return entry(
        f"{where} ({block.label})",
        content=block.value,
        title=block.label,
        tags=[block.label, *scope_tags(agent=agent.name)],
        entry_type="semantic",
        record_id=block.id or f"{agent.name}:{block.label}",
        created_at=block.created_at,
        updated_at=block.updated_at,
        metadata={
            k: v
            for k, v in (
                ("limit", block.limit),
                ("description", block.description),
                ("metadata", block.metadata),
            )
            if v is not None
        },
    )


def _passage_entries(agent: LettaAgent, agent_at: str) -> list[PeerEntry]:
    key = "passages" if agent.passages else "archival_memory"
    entries = []
    for n, raw in enumerate(agent.passages or agent.archival_memory):
        where = f"{agent_at}/{key}/{n}"
        passage: LettaPassage = validated(LettaPassage, raw, where)
        entries.append(
            entry(
                where,
                content=passage.text,
                tags=[*scope_tags(agent=agent.name), ARCHIVAL_TAG],
                entry_type="episodic",
                record_id=passage.id or f"{agent.name}:passage:{n}",
                created_at=passage.created_at,
                updated_at=passage.updated_at,
                metadata=passage.metadata,
            )
        )
    return entries


def to_entries(agent_file: AgentFile) -> tuple[PeerEntry, ...]:
    shared = _shared_blocks(agent_file)
    entries: list[PeerEntry] = []
    for n, raw in enumerate(agent_file.agents):
        agent_at = f"agents/{n}"
        agent: LettaAgent = validated(LettaAgent, raw, agent_at)
        for where, block in _agent_blocks(agent, agent_at, shared):
            if block.value.strip():  # an empty block holds nothing to remember yet
                entries.append(_block_entry(where, block, agent))
        entries += _passage_entries(agent, agent_at)
    return tuple(entries)


def read(document: Any) -> PeerFile:
    agent_file: AgentFile = validated(AgentFile, document, "the file")
    names = [a.get("name") for a in agent_file.agents if isinstance(a, dict)]
    name = str(names[0]) if len(names) == 1 and names[0] else "Letta agents"
    entries = to_entries(agent_file)
    return PeerFile(format="letta", name=storable("agents/0", name[:255]), entries=entries)
