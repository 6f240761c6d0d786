"""Files that tools take as base64 text (task artifacts, diary imports): decoded once, bounded
by the limit of the REST route they are sent to."""

from __future__ import annotations

import base64
import binascii

from schemas.errors import InvalidBase64, PayloadTooLarge


def decode_upload(content_base64: str, max_bytes: int, what: str) -> bytes:
    try:
        content = base64.b64decode(content_base64, validate=True)
    except (binascii.Error, ValueError) as error:
        raise InvalidBase64(f"content_base64 is not base64: {error}") from error
    if len(content) > max_bytes:
        raise PayloadTooLarge(f"{what} are at most {max_bytes} bytes")
    return content
