"""The tests' payload keyring: every stack of the suite seals its workflow payloads, as a
deployment does (infra/payload_codec.py).

`tests/conftest.py` puts `PAYLOAD_KEYS` in the environment as `SERVICE_PAYLOAD_KEYS`, so every
`Settings()` of a test, and every service process a test starts, has it; a client or test
server made without `Settings` takes `CONVERTER`. The key is a fixed test value, not a secret.
"""

from __future__ import annotations

from infra.payload_codec import PayloadKeyring, encrypting_converter

PAYLOAD_KEYS = "tests-1:xY3nslF1aXw7aQ0SqJ5cG3r4P6oR8Zk2mWbD9eTfV1g="
KEYRING = PayloadKeyring.parse(PAYLOAD_KEYS)
CONVERTER = encrypting_converter(KEYRING)
