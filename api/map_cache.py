"""The diary map's projections, cached in the API process per diary version.

Why here: a projection is derived data, recomputed from the rows in well under a second, and
exact for its version (`infra.repos.app_reads.diary_version`): a process that has not seen a
version computes it once, every later open answers from memory after one small aggregate read.
The API's pool is read-only and a read should not start a workflow, so a table written by an
activity would buy only sharing between API processes, at the price of a write path for what
any process recomputes. Least recently used diaries leave first; the entries are the rendered
JSON bytes, so a hit costs no serialisation either.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from uuid import UUID


@dataclass(frozen=True)
class CachedMap:
    version: str
    body: bytes


class MapCache:
    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._maps: OrderedDict[UUID, CachedMap] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def get(self, diary_id: UUID, version: str) -> bytes | None:
        cached = self._maps.get(diary_id)
        if cached is None or cached.version != version:
            self.misses += 1
            return None
        self._maps.move_to_end(diary_id)
        self.hits += 1
        return cached.body

    def put(self, diary_id: UUID, version: str, body: bytes) -> None:
        self._maps[diary_id] = CachedMap(version, body)
        self._maps.move_to_end(diary_id)
        while len(self._maps) > self._capacity:
            self._maps.popitem(last=False)
