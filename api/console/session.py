"""Who is looking at a console page, and the token that proves a form is the console's own.

The console's routes authenticate as `auth="browser"`: a valid human session cookie is the
logged-in human (counted in that human's own rate-limit buckets), anything else a visitor.
Every form carries a CSRF token: an HMAC under the server secret of what binds the browser —
the session once logged in, before that a random cookie of its own (the signed double-submit
pattern), so that a login or sign-up form cannot be posted by another site either.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from aiohttp import web

from api import keys
from api.auth import cookie_secure, optional_principal, session_token_of
from api.endpoint import invoke
from api.routes import identity
from schemas.errors import CsrfRefused
from schemas.identity import Whoami
from schemas.principals import Principal

CSRF_COOKIE = "cairn_csrf"
_FRESH_BINDING = web.RequestKey("console_fresh_binding", str)
_BINDING = web.RequestKey("console_csrf_binding", str)


@dataclass(frozen=True)
class ConsoleUser:
    """The logged-in human as the console shows them: a name, never a bare id."""

    principal: Principal
    email: str
    display_name: str | None

    @property
    def name(self) -> str:
        return self.display_name or self.email


async def know_visitor(request: web.Request) -> ConsoleUser | None:
    """Resolve the logged-in human (if any) and the page's form token, for the templates."""
    principal = optional_principal(request)
    user = None
    if principal is not None and principal.subject_type == "human":
        me: Whoami = await invoke(request, identity.whoami)
        user = ConsoleUser(principal, me.email or "", me.displayName)
        request[keys.CONSOLE_USER] = user
    binding = _binding(request)
    request[_BINDING] = binding
    request[keys.CSRF_TOKEN] = _token(request, binding)
    return user


def _binding(request: web.Request) -> str:
    session = session_token_of(request) if request.get(keys.CONSOLE_USER) else None
    if session:
        return "session:" + session
    cookie = request.cookies.get(CSRF_COOKIE)
    if cookie and len(cookie) == 43:
        return "visitor:" + cookie
    fresh = secrets.token_urlsafe(32)
    request[_FRESH_BINDING] = fresh
    return "visitor:" + fresh


def _token(request: web.Request, binding: str) -> str:
    """The form token of a binding, under the current server secret (the page shows it)."""
    return request.app[keys.SETTINGS].secret_ring.mac(_token_message(binding))


def _token_message(binding: str) -> bytes:
    return b"console-csrf\0" + binding.encode()


def check_form_token(request: web.Request, presented: str) -> None:
    """403 unless the form carries this browser's token under any server secret (a page
    rendered before a rotation still submits; constant-time compares)."""
    binding = request.get(_BINDING)
    fresh = request.get(_FRESH_BINDING) is not None  # no binding came with the form at all
    ring = request.app[keys.SETTINGS].secret_ring
    if fresh or binding is None or not ring.mac_matches(_token_message(binding), presented):
        raise CsrfRefused("Reload the page and send the form again")


def keep_binding(request: web.Request, response: web.StreamResponse) -> None:
    """A visitor's first page sets the cookie its form tokens are bound to."""
    fresh = request.get(_FRESH_BINDING)
    if fresh is not None:
        response.set_cookie(
            CSRF_COOKIE,
            fresh,
            httponly=True,
            samesite="Strict",
            secure=cookie_secure(request.app[keys.SETTINGS].base_url),
            path="/console/",
        )
