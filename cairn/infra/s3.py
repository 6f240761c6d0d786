"""The S3 blob store (boto3, path-style, any S3 endpoint; rclone on the embedded stack).

boto3 is synchronous: every call runs in a worker thread so the event loop never blocks.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

from cairn.infra.settings import Settings


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

    def ensure_bucket(self) -> None:
        try:
            self.client.head_bucket(Bucket=self.bucket)
        except ClientError:
            self.client.create_bucket(Bucket=self.bucket)

    def close(self) -> None:
        self.client.close()
