"""The HTTP server around the app: aiohttp's runner, with the request's head bounded and every
error its parser answers itself (before any middleware runs) rendered as a problem.

aiohttp's low-level parser refuses an oversized request line, an oversized header or a
malformed request before the application sees it, and answers `text/plain`. `ApiRunner` serves
the app through connections whose `handle_error` answers RFC 9457 problems instead: 414 for a
request line over `REQUEST_LINE_MAX_BYTES`, 431 for a header field over `HEADER_FIELD_MAX_BYTES`
or more than `REQUEST_HEADERS_MAX` headers, 400 for any other malformed request.
"""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import LineTooLong
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_request import BaseRequest

from api import keys
from api.forwarded import ClientAddressLogger
from schemas import limits
from schemas.errors import (
    DomainError,
    HeaderFieldsTooLarge,
    InternalError,
    MalformedRequest,
    UriTooLong,
)

PROBLEM_JSON = "application/problem+json"
# aiohttp's message for a request past the header count
_TOO_MANY_HEADERS = "Too many headers"


def parse_problem(status: int, exc: BaseException | None) -> DomainError:
    """The problem for an error aiohttp's server answers outside the application."""
    if isinstance(exc, LineTooLong):
        if exc.args[1] == limits.REQUEST_LINE_MAX_BYTES:
            return UriTooLong(f"The request line exceeds {limits.REQUEST_LINE_MAX_BYTES} bytes")
        return HeaderFieldsTooLarge(f"A header field exceeds {limits.HEADER_FIELD_MAX_BYTES} bytes")
    if exc is not None and _TOO_MANY_HEADERS in str(exc):
        return HeaderFieldsTooLarge(f"More than {limits.REQUEST_HEADERS_MAX} header fields")
    if status < 500:
        return MalformedRequest("The HTTP request is malformed")
    return InternalError("Something went wrong on our side")


class ProblemRequestHandler(RequestHandler):
    """A connection that answers the parser's own errors as problems."""

    def handle_error(
        self,
        request: BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        super().handle_error(request, status, exc, message)  # logs it; refuses a sent response
        body = parse_problem(status, exc).to_problem().model_dump(mode="json", exclude_none=True)
        response = web.Response(
            text=json.dumps(body), status=body["status"], content_type=PROBLEM_JSON
        )
        response.force_close()
        return response


class ApiServer(web.Server):
    def __call__(self) -> RequestHandler:
        return ProblemRequestHandler(self, loop=self._loop, **self._kwargs)


class ApiRunner(web.AppRunner):
    """`web.AppRunner` for the API app, with the head limits of `schemas.limits`, an access log
    that names the client behind trusted proxies, and the settings' shutdown grace."""

    def __init__(self, app: web.Application, **kwargs: Any) -> None:
        super().__init__(
            app,
            access_log_class=ClientAddressLogger,
            shutdown_timeout=app[keys.SETTINGS].shutdown_grace_s,
            max_line_size=limits.REQUEST_LINE_MAX_BYTES,
            max_field_size=limits.HEADER_FIELD_MAX_BYTES,
            max_headers=limits.REQUEST_HEADERS_MAX,
            **kwargs,
        )

    async def _make_server(self) -> web.Server:
        # the app's own server (startup run, handler and request factory bound), serving
        # connections of ProblemRequestHandler: aiohttp has no public hook for the class
        server = await super()._make_server()
        return ApiServer(
            server.request_handler,
            request_factory=server.request_factory,
            handler_cancellation=server.handler_cancellation,
            loop=server._loop,
            **server._kwargs,
        )
