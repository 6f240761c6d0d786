"""The `ui://` resources of the two interactive apps (spec 4.7), through the SDK's MCP Apps
extension (`mcp.server.apps`): it serves each page as `text/html;profile=mcp-app` and
advertises `io.modelcontextprotocol/ui` in the server's capabilities. The tools that open the
apps carry `_meta.ui.resourceUri` themselves (toolserver/tools/apps.py), like every tool of
the catalogue is declared there."""

from __future__ import annotations

from mcp.server.apps import Apps, ResourceCsp

from schemas.apps import APP_NAMES, app_html, app_uri

TITLES = {"tasks": "Cairn task queue", "entries-map": "Cairn diary map"}


def apps_extension() -> Apps:
    apps = Apps()
    for name in APP_NAMES:
        apps.add_html_resource(
            app_uri(name),
            app_html(name),
            name=f"cairn-{name}",
            title=TITLES[name],
            description=f"{TITLES[name]}: an interactive MCP App (needs a host that mounts apps)",
            # self-contained: no network origin at all; data comes only through tool calls
            csp=ResourceCsp(connect_domains=[], resource_domains=[]),
            prefers_border=True,
        )
    return apps
