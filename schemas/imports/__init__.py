"""Imports from other memory systems (issue 33 §2; docs/imports.md): Mem0's `get_all` JSON, a
Letta Agent File, and a COGX 0.1 archive, each read by a pure parser into `PeerFile`, the one
shape the diary import writes (`schemas.imports.peer.to_archive`). No I/O here."""
