"""Workflow payloads encrypted before they reach Temporal, and the keyring that opens them.

Every payload a client or worker hands Temporal (workflow and activity inputs and results,
signals, updates, query answers, memos, failure details and messages) passes through
`PayloadEncryption`: the whole payload, serialized, is sealed with XChaCha20-Poly1305 (PyNaCl)
under the keyring's current key, and the sealed payload says which key in its metadata. The
Temporal cluster stores only ciphertext for the namespace's retention; operators read runs through
the API's codec endpoint (`api/routes/codec.py`), which decodes with the same keyring.

`SERVICE_PAYLOAD_KEYS` is the keyring, `id:base64key,id:base64key,...`: the first key encrypts,
every key decrypts, so a rotation puts a new key first and keeps the old ones until the runs they
sealed are past retention. A payload without the encrypted encoding (histories written before
the codec, the committed replay histories) decodes as it is.

This module is the keyring's one parser; it imports nothing of the service.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import re
import secrets
from collections.abc import Sequence
from dataclasses import dataclass

from nacl.bindings import (
    crypto_aead_xchacha20poly1305_ietf_decrypt,
    crypto_aead_xchacha20poly1305_ietf_encrypt,
    crypto_aead_xchacha20poly1305_ietf_KEYBYTES,
    crypto_aead_xchacha20poly1305_ietf_NPUBBYTES,
)
from nacl.exceptions import CryptoError
from temporalio.api.common.v1 import Payload
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.converter import (
    DataConverter,
    DefaultFailureConverterWithEncodedAttributes,
    PayloadCodec,
)

# the metadata Temporal's own encryption samples use: tools that know them show "encrypted"
ENCODING = b"binary/encrypted"
ENCODING_KEY = "encoding"
KEY_ID_KEY = "encryption-key-id"
KEY_BYTES = crypto_aead_xchacha20poly1305_ietf_KEYBYTES
NONCE_BYTES = crypto_aead_xchacha20poly1305_ietf_NPUBBYTES
_KEY_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")


class KeyringInvalid(ValueError):
    """`SERVICE_PAYLOAD_KEYS` is not a list of `id:base64key` with 32-byte keys."""


class PayloadUndecodable(ValueError):
    """An encrypted payload whose key is not in the keyring, or whose seal does not open."""


@dataclass(frozen=True)
class PayloadKeyring:
    """Key ids to 32-byte keys, the first the one that encrypts; empty means no encryption."""

    keys: tuple[tuple[str, bytes], ...] = ()

    @classmethod
    def parse(cls, text: str) -> PayloadKeyring:
        """`id:base64key,...` (standard or URL-safe base64, padding optional)."""
        keys: list[tuple[str, bytes]] = []
        for item in filter(None, (part.strip() for part in text.split(","))):
            key_id, sep, encoded = item.partition(":")
            if not sep or not _KEY_ID.match(key_id):
                raise KeyringInvalid("each key is id:base64key, the id of [A-Za-z0-9._-]{1,64}")
            if key_id in dict(keys):
                raise KeyringInvalid(f"key id {key_id!r} appears twice")
            keys.append((key_id, _key_bytes(key_id, encoded)))
        return cls(tuple(keys))

    @staticmethod
    def new_entry(key_id: str) -> str:
        """A fresh random key as one keyring item, `id:base64key`."""
        return f"{key_id}:{base64.b64encode(secrets.token_bytes(KEY_BYTES)).decode()}"

    @property
    def current_id(self) -> str | None:
        return self.keys[0][0] if self.keys else None

    def key(self, key_id: str) -> bytes | None:
        return dict(self.keys).get(key_id)


def _key_bytes(key_id: str, encoded: str) -> bytes:
    text = encoded.strip()
    padded = text + "=" * (-len(text) % 4)
    try:
        key = base64.b64decode(padded.replace("-", "+").replace("_", "/"), validate=True)
    except binascii.Error:
        raise KeyringInvalid(f"key {key_id!r} is not base64") from None
    if len(key) != KEY_BYTES:
        raise KeyringInvalid(f"key {key_id!r} must be {KEY_BYTES} bytes, not {len(key)}")
    return key


def is_encrypted(payload: Payload) -> bool:
    return payload.metadata.get(ENCODING_KEY) == ENCODING


def key_id_of(payload: Payload) -> str | None:
    """The id of the key that sealed `payload` (None for a payload in the clear)."""
    return payload.metadata[KEY_ID_KEY].decode() if is_encrypted(payload) else None


class PayloadEncryption(PayloadCodec):
    """The payload codec: seals with the keyring's first key, opens with any of its keys.

    The key id is the AEAD's associated data too, so a sealed payload relabelled with another
    key's id does not open."""

    def __init__(self, keyring: PayloadKeyring) -> None:
        self.keyring = keyring

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [self.seal(payload) for payload in payloads]

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [self.open(payload) for payload in payloads]

    def seal(self, payload: Payload) -> Payload:
        key_id = self.keyring.current_id
        if key_id is None:
            return payload
        nonce = secrets.token_bytes(NONCE_BYTES)
        sealed = crypto_aead_xchacha20poly1305_ietf_encrypt(
            payload.SerializeToString(), key_id.encode(), nonce, self.keyring.keys[0][1]
        )
        return Payload(
            metadata={ENCODING_KEY: ENCODING, KEY_ID_KEY: key_id.encode()}, data=nonce + sealed
        )

    def open(self, payload: Payload) -> Payload:
        key_id = key_id_of(payload)
        if key_id is None:
            return payload  # written in the clear (before the codec): read as it is
        key = self.keyring.key(key_id)
        if key is None:
            raise PayloadUndecodable(f"payload key {key_id!r} is not in SERVICE_PAYLOAD_KEYS")
        nonce, sealed = payload.data[:NONCE_BYTES], payload.data[NONCE_BYTES:]
        try:
            opened = crypto_aead_xchacha20poly1305_ietf_decrypt(sealed, key_id.encode(), nonce, key)
        except CryptoError:
            raise PayloadUndecodable(f"a payload sealed with {key_id!r} does not open") from None
        return Payload.FromString(opened)


def encrypting_converter(keyring: PayloadKeyring) -> DataConverter:
    """The service's data converter: pydantic payloads, sealed by the keyring; failures carry
    their message and stack trace as an encoded (so sealed) attribute, not in the clear."""
    return dataclasses.replace(
        pydantic_data_converter,
        payload_codec=PayloadEncryption(keyring),
        failure_converter_class=DefaultFailureConverterWithEncodedAttributes,
    )
