"""The service's version, read once from the installed distribution (pyproject.toml is the one
source): the OpenAPI document's `info.version` and the MCP server's `serverInfo.version`."""

from __future__ import annotations

from importlib import metadata

VERSION = metadata.version("cairn")
