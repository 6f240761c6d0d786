"""The consent page's CSP lets its form be redirected to the client's redirect URI (browsers
check `form-action` on every hop), and to nothing else."""

from __future__ import annotations

import pytest

from api.routes.connector import _consent_policy


@pytest.mark.parametrize(
    ("redirect_uri", "allowed"),
    [
        ("http://127.0.0.1:33418/callback?x=1", "'self' http://127.0.0.1:33418"),
        ("https://host.example/oauth/cb", "'self' https://host.example"),
        ("https://[::1]:8443/cb", "'self' https://[::1]:8443"),
        ("cursor://anysphere.cursor-retrieval/oauth/callback", "'self' cursor:"),
        ("com.example.app:/oauth2redirect", "'self' com.example.app:"),
        # nothing that could read as another CSP source or directive
        ("https://user@evil.example/cb", "'self'"),
    ],
)
def test_form_action_names_the_redirect_uris_origin(redirect_uri: str, allowed: str) -> None:
    policy = _consent_policy(redirect_uri)
    directives = dict(d.strip().split(" ", 1) for d in policy.split(";"))
    assert directives["default-src"] == "'none'"
    assert directives["frame-ancestors"] == "'none'"
    assert directives["form-action"].startswith(allowed)
    assert directives["form-action"].count(" ") == allowed.count(" ")
