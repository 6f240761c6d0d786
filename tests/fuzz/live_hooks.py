"""Hooks of the live acceptance run's `schemathesis` process (SCHEMATHESIS_HOOKS=live_hooks):
a diary archive (`application/vnd.ipld.car`) or a zip or gzip peer file is sent as the raw bytes
schemathesis draws for a binary body, as the in-process run does (test_schemathesis.py), so
`POST /diaries/import` is fuzzed too instead of ending the run with "serialization not
possible"."""

from __future__ import annotations

import schemathesis

schemathesis.serializer.alias(
    ["application/vnd.ipld.car", "application/zip", "application/gzip"], "application/octet-stream"
)
