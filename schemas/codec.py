"""The bodies of Temporal's remote codec protocol (`POST …/decode`, `POST …/encode`), as the
Temporal UI and `temporal --codec-endpoint` send them: `{"payloads": [...]}`, each payload in the
protobuf JSON form of `temporal.api.common.v1.Payload` (metadata values and data in base64)."""

from __future__ import annotations

import base64
import binascii
from typing import Annotated

from pydantic import AfterValidator, Field

from schemas import limits
from schemas.base import RequestBody, ResponseBody


def _checked_base64(text: str) -> str:
    try:
        base64.b64decode(text, validate=True)
    except binascii.Error:
        raise ValueError("not standard base64") from None
    return text


Base64Text = Annotated[str, AfterValidator(_checked_base64)]


class CodecPayload(RequestBody):
    """One payload: its metadata (`encoding`, `encryption-key-id`, ...) and data, in base64."""

    metadata: dict[Annotated[str, Field(max_length=256)], Base64Text] = Field(
        default_factory=dict, max_length=32
    )
    data: Base64Text = ""

    def metadata_bytes(self) -> dict[str, bytes]:
        return {key: base64.b64decode(value) for key, value in self.metadata.items()}

    def data_bytes(self) -> bytes:
        return base64.b64decode(self.data)


class CodecPayloads(RequestBody):
    """The payloads to decode or encode, in the order they are answered."""

    payloads: list[CodecPayload] = Field(max_length=limits.CODEC_PAYLOADS_MAX)


class CodecAnswerPayload(ResponseBody):
    metadata: dict[str, str]
    data: str


class CodecAnswer(ResponseBody):
    """The decoded (or encoded) payloads, one for each payload sent, in the same order."""

    payloads: list[CodecAnswerPayload]

    @classmethod
    def of(cls, payloads: list[tuple[dict[str, bytes], bytes]]) -> CodecAnswer:
        """From each payload's (metadata, data) as bytes."""
        return cls(
            payloads=[
                CodecAnswerPayload(
                    metadata={key: _b64(value) for key, value in metadata.items()},
                    data=_b64(data),
                )
                for metadata, data in payloads
            ]
        )


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()
