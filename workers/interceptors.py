"""Worker interceptors: a DomainError raised in an activity becomes a non-retryable
ApplicationError carrying the problem body, so the API can answer with the same problem."""

from __future__ import annotations

from typing import Any

from temporalio.worker import (
    ActivityInboundInterceptor,
    ExecuteActivityInput,
    Interceptor,
)

from schemas.errors import DomainError
from workflows.common import domain_failure


class _DomainErrorActivityInbound(ActivityInboundInterceptor):
    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        try:
            return await super().execute_activity(input)
        except DomainError as error:
            raise domain_failure(error) from None


class DomainErrorInterceptor(Interceptor):
    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _DomainErrorActivityInbound(next)
