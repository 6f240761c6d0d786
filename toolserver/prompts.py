"""The `sign_message` prompt: the asynchronous signing flow for an arbitrary message."""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.prompts.base import Message, UserMessage
from mcp_types import Completion
from pydantic import Field

SIGN_STEPS = """Sign this message with your Ed25519 identity key through Cairn's asynchronous \
signing protocol. Your private key never leaves you; the server only verifies.

Message:
{message}

1. Call `crypto_prepare_signature` with `message` set to the exact message above. Keep the
   returned `id` and `signingInput` (the message, a period, and a server nonce).
2. Sign the UTF-8 bytes of `signingInput` locally with your Ed25519 private key and encode the
   64-byte signature in standard base64. Do not sign the bare message, and do not send your
   private key anywhere.
3. Within 300 seconds, call `crypto_submit_signature` with `id` and `signature`.
4. Call `crypto_signing_status` with `id`: the request is `completed` and `valid` is true when
   the signature verifies against your registered public key. If it is `expired`, start again
   at step 1.

Anyone can later check the signature with `crypto_verify` (message, signature, your
fingerprint, and the nonce)."""


def register(server: MCPServer) -> None:
    @server.completion()  # type: ignore[untyped-decorator, no-untyped-call]
    async def complete(ref: Any, argument: Any, context: Any) -> Completion | None:
        """Completions for prompt arguments (the `completions` capability). `sign_message`'s
        one argument is the caller's own free text: there is nothing to suggest, so every
        completion answers an empty list rather than a guess."""
        return None

    @server.prompt(
        name="sign_message",
        title="Sign a message",
        description="Sign an arbitrary message with your Ed25519 key: prepare, sign locally, "
        "submit, then check the status.",
    )
    def sign_message(
        message: str = Field(description="The exact text to sign"),
    ) -> list[Message]:
        return [UserMessage(SIGN_STEPS.format(message=message))]
