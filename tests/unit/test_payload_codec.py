"""The payload codec and its keyring (infra/payload_codec.py), without a server: what it seals
opens again, what it seals shows nothing, a rotated keyring opens the old key's payloads and seals
with the new one, and a payload in the clear reads as it is."""

from __future__ import annotations

import base64
from uuid import uuid4

import pytest
from temporalio.api.common.v1 import Payload
from temporalio.api.failure.v1 import Failure
from temporalio.exceptions import ApplicationError

from infra.payload_codec import (
    ENCODING,
    KEY_ID_KEY,
    KeyringInvalid,
    PayloadEncryption,
    PayloadKeyring,
    PayloadUndecodable,
    encrypting_converter,
    key_id_of,
)
from infra.settings import Settings
from schemas.memory import EntryDraft

OLD = PayloadKeyring.new_entry("old")
NEW = PayloadKeyring.new_entry("new")
SECRET_TEXT = "the diary's private remark about the pharmacy"


def plain(text: str) -> Payload:
    return Payload(metadata={"encoding": b"json/plain"}, data=f'"{text}"'.encode())


async def test_a_sealed_payload_opens_to_the_same_payload_and_shows_nothing() -> None:
    codec = PayloadEncryption(PayloadKeyring.parse(OLD))
    original = plain(SECRET_TEXT)
    [sealed] = await codec.encode([original])
    assert sealed.metadata["encoding"] == ENCODING
    assert key_id_of(sealed) == "old"
    assert SECRET_TEXT.encode() not in sealed.SerializeToString()
    assert b"json/plain" not in sealed.SerializeToString()  # the inner metadata is sealed too
    assert await codec.decode([sealed]) == [original]


async def test_two_seals_of_one_payload_differ() -> None:
    codec = PayloadEncryption(PayloadKeyring.parse(OLD))
    first, second = await codec.encode([plain("same"), plain("same")])
    assert first.data != second.data  # a fresh nonce each time


async def test_a_rotated_keyring_opens_old_payloads_and_seals_with_the_new_key() -> None:
    [old_sealed] = await PayloadEncryption(PayloadKeyring.parse(OLD)).encode([plain("before")])
    rotated = PayloadEncryption(PayloadKeyring.parse(f"{NEW},{OLD}"))
    assert await rotated.decode([old_sealed]) == [plain("before")]
    [new_sealed] = await rotated.encode([plain("after")])
    assert key_id_of(new_sealed) == "new"
    with pytest.raises(PayloadUndecodable, match="'new' is not in"):
        await PayloadEncryption(PayloadKeyring.parse(OLD)).decode([new_sealed])


async def test_a_payload_in_the_clear_decodes_as_it_is() -> None:
    codec = PayloadEncryption(PayloadKeyring.parse(OLD))
    assert await codec.decode([plain("written before the codec")]) == [
        plain("written before the codec")
    ]


async def test_an_empty_keyring_seals_nothing() -> None:
    codec = PayloadEncryption(PayloadKeyring.parse(""))
    assert await codec.encode([plain("clear")]) == [plain("clear")]


async def test_a_tampered_or_relabelled_payload_does_not_open() -> None:
    both = PayloadKeyring.parse(f"{OLD},{NEW}")
    codec = PayloadEncryption(both)
    [sealed] = await codec.encode([plain("x")])
    tampered = Payload()
    tampered.CopyFrom(sealed)
    tampered.data = sealed.data[:-1] + bytes([sealed.data[-1] ^ 1])
    with pytest.raises(PayloadUndecodable, match="does not open"):
        await codec.decode([tampered])
    relabelled = Payload()
    relabelled.CopyFrom(sealed)
    relabelled.metadata[KEY_ID_KEY] = b"new"  # the key id is the seal's associated data
    with pytest.raises(PayloadUndecodable, match="does not open"):
        await codec.decode([relabelled])


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ("nokey", "id:base64key"),
        ("a b:" + base64.b64encode(bytes(32)).decode(), "id:base64key"),
        ("k:not base64!", "not base64"),
        ("k:" + base64.b64encode(bytes(16)).decode(), "must be 32 bytes"),
        (f"{OLD},{OLD}", "appears twice"),
    ],
)
def test_a_malformed_keyring_is_refused(text: str, complaint: str) -> None:
    with pytest.raises(KeyringInvalid, match=complaint):
        PayloadKeyring.parse(text)


def test_the_setting_is_checked_when_read_and_never_shown() -> None:
    with pytest.raises(ValueError, match="must be 32 bytes"):
        Settings(payload_keys="k:" + base64.b64encode(bytes(8)).decode())  # type: ignore[arg-type]
    settings = Settings(payload_keys=f"{NEW},{OLD}")  # type: ignore[arg-type]
    assert settings.payload_keyring.current_id == "new"
    assert NEW.split(":")[1] not in repr(settings)


def test_url_safe_unpadded_keys_are_read() -> None:
    key = bytes(range(32))
    text = "k:" + base64.urlsafe_b64encode(key).decode().rstrip("=")
    assert PayloadKeyring.parse(text).key("k") == key


async def test_the_converter_seals_models_and_failure_messages() -> None:
    converter = encrypting_converter(PayloadKeyring.parse(OLD))
    draft = EntryDraft(entry_id=uuid4(), diary_id=uuid4(), content=SECRET_TEXT, created_by=uuid4())
    [payload] = await converter.encode([draft])
    assert SECRET_TEXT.encode() not in payload.SerializeToString()
    failure = Failure()
    await converter.encode_failure(ApplicationError(SECRET_TEXT, {"note": SECRET_TEXT}), failure)
    assert SECRET_TEXT.encode() not in failure.SerializeToString()
    back = await converter.decode_failure(failure)
    assert isinstance(back, ApplicationError)
    assert back.message == SECRET_TEXT
    assert back.details == ({"note": SECRET_TEXT},)
