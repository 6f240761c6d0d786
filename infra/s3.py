"""The S3 blob store (boto3, path-style, any S3 endpoint; rclone on the embedded stack).

boto3 is synchronous: every call runs in a worker thread so the event loop never blocks.

Task artifacts are stored once per content, under `artifacts/<cid>` (the CID of the exact
bytes), so identical uploads share one object and a key never changes meaning. Objects are
written from a spooled file and read back in chunks: no call here holds a whole artifact in
memory.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import IO, Any, Final

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

from infra.settings import Settings

ARTIFACT_PREFIX: Final = "artifacts/"
DELETE_OBJECTS_MAX_KEYS: Final = 1000  # S3's limit per DeleteObjects request
_MISSING: Final = frozenset({"404", "NoSuchKey", "NotFound"})


def artifact_key(cid: str) -> str:
    """Where the bytes of an artifact live: their CID is the whole key."""
    return ARTIFACT_PREFIX + cid


def _is_missing(error: ClientError) -> bool:
    return str(error.response.get("Error", {}).get("Code")) in _MISSING


@dataclass
class BlobReader:
    """An object being downloaded: its size, then its bytes a chunk at a time."""

    size: int
    _body: Any

    async def chunks(self, chunk_bytes: int) -> AsyncIterator[bytes]:
        try:
            while chunk := await asyncio.to_thread(self._body.read, chunk_bytes):
                yield chunk
        finally:
            self.close()

    def close(self) -> None:
        self._body.close()


@dataclass
class BlobStore:
    client: Any
    bucket: str

    @classmethod
    def from_settings(cls, settings: Settings) -> BlobStore:
        client = boto3.client(
            "s3",
            endpoint_url=settings.s3_endpoint or None,
            aws_access_key_id=settings.s3_access_key,
            aws_secret_access_key=settings.s3_secret_key.get_secret_value(),
            region_name=settings.s3_region,
            config=Config(
                s3={"addressing_style": "path"},
                retries={"max_attempts": 2, "mode": "standard"},
                connect_timeout=2,
                read_timeout=30,
                request_checksum_calculation="when_required",
                response_checksum_validation="when_required",
            ),
        )
        return cls(client=client, bucket=settings.s3_bucket)

    async def probe(self) -> None:
        """Readiness: the bucket answers."""
        await asyncio.to_thread(self.client.head_bucket, Bucket=self.bucket)

    async def exists(self, key: str) -> bool:
        try:
            await asyncio.to_thread(self.client.head_object, Bucket=self.bucket, Key=key)
        except ClientError as error:
            if _is_missing(error):
                return False
            raise
        return True

    async def put_file(self, key: str, file: IO[bytes], size: int) -> None:
        """Upload `size` bytes from the start of `file` in one request (S3 takes up to 5 GiB);
        botocore streams the file, so memory stays flat whatever the size."""
        file.seek(0)
        await asyncio.to_thread(
            self.client.put_object,
            Bucket=self.bucket,
            Key=key,
            Body=file,
            ContentLength=size,
            ContentType="application/octet-stream",
        )

    async def open(self, key: str) -> BlobReader | None:
        """The object for reading, or None when there is none under `key`."""
        try:
            response = await asyncio.to_thread(self.client.get_object, Bucket=self.bucket, Key=key)
        except ClientError as error:
            if _is_missing(error):
                return None
            raise
        return BlobReader(size=int(response["ContentLength"]), _body=response["Body"])

    async def delete_many(self, keys: Sequence[str]) -> None:
        """Delete objects (missing ones are fine); raises if S3 refuses any of them."""
        for start in range(0, len(keys), DELETE_OBJECTS_MAX_KEYS):
            batch = keys[start : start + DELETE_OBJECTS_MAX_KEYS]
            response = await asyncio.to_thread(
                self.client.delete_objects,
                Bucket=self.bucket,
                Delete={"Objects": [{"Key": key} for key in batch], "Quiet": True},
            )
            failed = [e for e in response.get("Errors", []) if e.get("Code") not in _MISSING]
            if failed:
                raise RuntimeError(f"S3 refused to delete {len(failed)} object(s): {failed[:3]}")

    async def delete_artifacts(self, cids: Sequence[str]) -> None:
        await self.delete_many([artifact_key(cid) for cid in cids])

    def ensure_bucket(self) -> None:
        try:
            self.client.head_bucket(Bucket=self.bucket)
        except ClientError:
            self.client.create_bucket(Bucket=self.bucket)

    def close(self) -> None:
        self.client.close()
