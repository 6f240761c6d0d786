"""The console's sharing pages (issue 24): see api/console/__init__.py."""

from __future__ import annotations

from aiohttp import web

routes = web.RouteTableDef()
