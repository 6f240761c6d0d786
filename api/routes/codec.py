"""The remote codec endpoint (Temporal's codec server protocol): operators read sealed runs.

Workflow payloads reach Temporal sealed by the payload codec (infra/payload_codec.py). The
Temporal UI, told `{base_url}/codec` as its codec endpoint, posts a run's payloads to
`/codec/decode` and shows what comes back; `temporal workflow show --codec-endpoint` does the
same. Only an operator is answered: a human whose email is in `SERVICE_OPERATORS`, by their
console session (the cookie the UI sends with "include cross-origin credentials") or their
bearer; anyone else gets 401 or 403. The UI's origin (`SERVICE_TEMPORAL_UI_URL`) is the one
origin answered with CORS headers; each decode is counted (`cairn.codec.decodes`) and logged
with the operator's identity id.
"""

from __future__ import annotations

import logging
from typing import Any

from aiohttp import web
from temporalio.api.common.v1 import Payload

from api import keys
from api.auth import origin_of, require_principal
from api.endpoint import Parsed, endpoint
from infra.payload_codec import PayloadUndecodable as SealDoesNotOpen
from infra.repos import identity_reads
from schemas.codec import CodecAnswer, CodecPayload, CodecPayloads
from schemas.errors import (
    AuthenticationRequired,
    NotAnOperator,
    PayloadUndecodable,
    RequestInvalid,
)
from schemas.principals import Principal

routes = web.RouteTableDef()
TAG = "operators"
log = logging.getLogger("api.codec")
CODEC_PATH = "/codec"  # the codec endpoint the UI is told; it appends /decode and /encode
DECODE_PATH = CODEC_PATH + "/decode"
ENCODE_PATH = CODEC_PATH + "/encode"
# what the Temporal UI's codec calls send (`Authorization` when it passes its own access token)
ALLOWED_HEADERS = "Content-Type, X-Namespace, Authorization, Authorization-Extras"
DECODES = "cairn.codec.decodes"
# both paths: the protocol's body both ways, asked by the UI's page (CORS, its session cookie)
_DECLARED: dict[str, Any] = {
    "tag": TAG,
    "body": CodecPayloads,
    "response": CodecAnswer,
    "errors": (AuthenticationRequired, NotAnOperator, PayloadUndecodable, RequestInvalid),
    "ui_origin": True,
}


@endpoint(routes, "POST", DECODE_PATH, **_DECLARED)
async def decode_payloads(request: web.Request, parsed: Parsed[CodecPayloads]) -> CodecAnswer:
    """Open sealed workflow payloads for an operator (Temporal's codec server protocol)."""
    principal = await _require_operator(request, "decode")
    try:
        opened = [request.app[keys.PAYLOAD_CODEC].open(_payload(p)) for p in parsed.body.payloads]
    except SealDoesNotOpen as exc:
        raise PayloadUndecodable(str(exc)) from None
    request.app[keys.CODEC_DECODES].add(1, {"codec.outcome": "decoded"})
    log.info(
        "operator %s decoded %d payloads of namespace %s",
        principal.identity_id,
        len(opened),
        request.headers.get("X-Namespace", "-")[:100],
    )
    return _answer(opened)


@endpoint(routes, "POST", ENCODE_PATH, **_DECLARED)
async def encode_payloads(request: web.Request, parsed: Parsed[CodecPayloads]) -> CodecAnswer:
    """Seal payloads an operator sends through the UI (a signal's or a start's input)."""
    await _require_operator(request, "encode")
    codec = request.app[keys.PAYLOAD_CODEC]
    return _answer([codec.seal(_payload(p)) for p in parsed.body.payloads])


@routes.options(DECODE_PATH)
@routes.options(ENCODE_PATH)
async def preflight(request: web.Request) -> web.Response:
    """The browser's CORS preflight: headers only for the UI's origin (`allow_the_ui`)."""
    return web.Response(status=204)


async def allow_the_ui(request: web.Request, response: web.StreamResponse) -> None:
    """CORS for the Temporal UI's origin on the codec paths, answers and refusals alike (the UI
    shows a refusal's status); any other origin gets none, so its page cannot read a byte."""
    if request.path not in (DECODE_PATH, ENCODE_PATH):
        return
    origin = request.headers.get("Origin")
    if origin is None or origin != origin_of(request.app[keys.SETTINGS].temporal_ui_url):
        return
    response.headers["Access-Control-Allow-Origin"] = origin
    response.headers["Access-Control-Allow-Credentials"] = "true"
    response.headers.add("Vary", "Origin")
    if request.method == "OPTIONS":
        response.headers["Access-Control-Allow-Methods"] = "POST"
        response.headers["Access-Control-Allow-Headers"] = ALLOWED_HEADERS
        response.headers["Access-Control-Max-Age"] = "600"


async def _require_operator(request: web.Request, operation: str) -> Principal:
    principal = require_principal(request)
    operators = request.app[keys.SETTINGS].operator_emails
    if principal.subject_type == "human" and operators:
        profile = await identity_reads.human_profile(
            request.app[keys.READ_POOL], principal.identity_id
        )
        if profile is not None and profile.email.lower() in operators:
            return principal
    if operation == "decode":
        request.app[keys.CODEC_DECODES].add(1, {"codec.outcome": "refused"})
    raise NotAnOperator("Workflow payloads are shown to the operators of SERVICE_OPERATORS only")


def _payload(sent: CodecPayload) -> Payload:
    return Payload(metadata=sent.metadata_bytes(), data=sent.data_bytes())


def _answer(payloads: list[Payload]) -> CodecAnswer:
    return CodecAnswer.of([(dict(p.metadata), p.data) for p in payloads])
