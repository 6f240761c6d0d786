"""Temporal Worker Versioning: which deployment and build a worker declares, and making that
version current where no operator does (`cairn dev`, the test stacks).

A versioned worker receives tasks only once its version is the deployment's current (or
ramping) version. Request workflows are pinned to the version they started on, so a deploy
never changes the code under a run in flight; long-lived workflows (tasks, founding, transfers,
sweeps) declare `AUTO_UPGRADE` on their class and move to the current version at their next
workflow task, keeping their `workflow.patched` discipline. docs/deployment.md has the
operator's side (roll out, ramp, roll back).
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import importlib.metadata
import inspect
import logging
from collections.abc import Iterable
from pathlib import Path

from temporalio.api.workflowservice.v1 import (
    DescribeWorkerDeploymentRequest,
    SetWorkerDeploymentCurrentVersionRequest,
)
from temporalio.client import Client
from temporalio.common import VersioningBehavior, WorkerDeploymentVersion
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import WorkerDeploymentConfig

from infra.settings import Settings
from workers.registry import EMBEDDING_WORKFLOWS, WORKFLOWS

log = logging.getLogger("cairn.worker")
PACKAGE = "cairn"
# The server answers NOT_FOUND or FAILED_PRECONDITION until the version's pollers have reached
# it (a moment after start), and RESOURCE_EXHAUSTED when many workers ask about one deployment
# at once (a fleet starting): each is asked again, less and less often.
_NOT_YET = (
    RPCStatusCode.NOT_FOUND,
    RPCStatusCode.FAILED_PRECONDITION,
    RPCStatusCode.RESOURCE_EXHAUSTED,
)
SET_CURRENT_LIMIT_S = 120.0
SET_CURRENT_FIRST_RETRY_S = 0.1
SET_CURRENT_MAX_RETRY_S = 2.0


@functools.cache
def code_build_id(workflows: tuple[type, ...] = (*WORKFLOWS, *EMBEDDING_WORKFLOWS)) -> str:
    """The package version and a hash of the workflow code: every module of the packages the
    registered workflows are defined in (their shared helpers too). The same code gives the
    same id in every process; a change to any workflow module gives a new one. Computed once
    per process (every worker of a process asks)."""
    digest = hashlib.sha256()
    for source in _workflow_sources(workflows):
        digest.update(source.name.encode() + b"\0" + source.read_bytes() + b"\0")
    return f"{importlib.metadata.version(PACKAGE)}-{digest.hexdigest()[:12]}"


def _workflow_sources(workflows: Iterable[type]) -> list[Path]:
    sources: set[Path] = set()
    for root in _code_roots(workflows):
        sources.update(root.rglob("*.py") if root.is_dir() else [root])
    return sorted(sources)


def _code_roots(workflows: Iterable[type]) -> set[Path]:
    """The folder of each workflow's top-level package (a module outside any package: its own
    file), found from the workflow's module file: never from `sys.modules` by the package's
    name, which another folder of that name on the import path (a namespace package) may hold
    instead, with no file to start from."""
    roots = set()
    for cls in workflows:
        module_file = Path(inspect.getfile(cls)).resolve()
        depth = cls.__module__.count(".")
        roots.add(module_file.parents[depth - 1] if depth else module_file)
    return roots


def worker_version(settings: Settings) -> WorkerDeploymentVersion:
    return WorkerDeploymentVersion(
        deployment_name=settings.worker_deployment,
        build_id=settings.worker_build_id or code_build_id(),
    )


def deployment_config(version: WorkerDeploymentVersion) -> WorkerDeploymentConfig:
    """Versioned, and pinned unless the workflow class declares `AUTO_UPGRADE`: a request
    workflow finishes on the code it started on."""
    return WorkerDeploymentConfig(
        version=version,
        use_worker_versioning=True,
        default_versioning_behavior=VersioningBehavior.PINNED,
    )


async def promote(client: Client, version: WorkerDeploymentVersion, settings: Settings) -> None:
    """What `SERVICE_WORKER_SET_CURRENT` asks at start: `always` makes this version current,
    `first` only while the deployment has no current version, `never` leaves it to an operator."""
    if settings.worker_set_current == "always":
        await set_current_version(client, version)
    elif settings.worker_set_current == "first":
        await set_current_version(client, version, only_if_none=True)


async def set_current_version(
    client: Client,
    version: WorkerDeploymentVersion,
    *,
    only_if_none: bool = False,
    limit_s: float = SET_CURRENT_LIMIT_S,
) -> bool:
    """Make `version` its deployment's current version once the server has seen its pollers
    (what `temporal worker deployment set-current-version` does; a no-op when it already is).
    With `only_if_none`, only while the deployment has no current version: the describe's
    conflict token makes a race with another build's promotion lose cleanly. Returns whether
    `version` is current."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit_s
    wait = SET_CURRENT_FIRST_RETRY_S
    while True:
        try:
            token = b""
            if only_if_none:
                current, token = await _current_build(client, version.deployment_name)
                if current:
                    return current == version.build_id
            await client.workflow_service.set_worker_deployment_current_version(
                SetWorkerDeploymentCurrentVersionRequest(
                    namespace=client.namespace,
                    deployment_name=version.deployment_name,
                    build_id=version.build_id,
                    conflict_token=token,
                    identity=client.identity,
                )
            )
            break
        except RPCError as error:
            if error.status not in _NOT_YET or loop.time() > deadline:
                raise
        await asyncio.sleep(wait)
        wait = min(wait * 2, SET_CURRENT_MAX_RETRY_S)
    log.info("worker deployment version %s is current", version.to_canonical_string())
    return True


async def _current_build(client: Client, deployment_name: str) -> tuple[str, bytes]:
    """The deployment's current build id ("" for none) and the token to change it safely."""
    described = await client.workflow_service.describe_worker_deployment(
        DescribeWorkerDeploymentRequest(namespace=client.namespace, deployment_name=deployment_name)
    )
    routing = described.worker_deployment_info.routing_config
    return routing.current_deployment_version.build_id, described.conflict_token
