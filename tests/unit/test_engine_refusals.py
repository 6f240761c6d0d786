"""What the workflow engine says when it cannot decide now is a 503 the client may retry, not a
500: found by the many-replicas test (tests/e2e/test_replicas.py), where a worker killed while it
held a task's workflow task made Temporal abort the completion Update with WorkflowNotReady
(gRPC FAILED_PRECONDITION) and the API answered 500."""

from __future__ import annotations

import pytest
from temporalio.service import RPCError, RPCStatusCode

from api.middleware import _from_dependency
from schemas.errors import ServiceUnavailable

ABORTED_UPDATE = (
    "Unable to perform workflow execution update due to unexpected workflow task failure."
)


@pytest.mark.parametrize(
    "status",
    [
        RPCStatusCode.UNAVAILABLE,
        RPCStatusCode.DEADLINE_EXCEEDED,
        RPCStatusCode.RESOURCE_EXHAUSTED,
        RPCStatusCode.FAILED_PRECONDITION,
    ],
)
def test_an_engine_that_cannot_decide_now_is_a_retryable_503(status: RPCStatusCode) -> None:
    problem = _from_dependency(RPCError(ABORTED_UPDATE, status, b""))
    assert isinstance(problem, ServiceUnavailable)
    assert problem.code == "service-unavailable"


@pytest.mark.parametrize(
    "status", [RPCStatusCode.INVALID_ARGUMENT, RPCStatusCode.INTERNAL, RPCStatusCode.UNKNOWN]
)
def test_any_other_engine_refusal_stays_an_internal_error(status: RPCStatusCode) -> None:
    assert _from_dependency(RPCError("no", status, b"")) is None
