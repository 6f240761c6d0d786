"""The registry is the one list of workflows and activities: an activity defined but not
registered makes every workflow that calls it wait forever for a worker that never comes (the
API request with it), and a workflow type no worker has is a start that never runs. So every
`@activity.defn` under activities/ and every workflow class under workflows/ (a declared request
step, or any class with `@workflow.defn`) must be in the registry's lists."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from typing import Any, cast

from temporalio import activity, workflow

import activities as activities_package
import workflows as workflows_package
from activities.embedding import EmbeddingActivities
from workers.registry import (
    EMBEDDING_WORKFLOWS,
    WORKFLOWS,
    ActivityDeps,
    activities,
    embedding_activities,
)
from workflows.steps import RequestStep
from workflows.teams import TeamCreateWorkflow, TeamFoundingWorkflow


def _activity_name(fn: Any) -> str | None:
    definition = activity._Definition.from_callable(fn)
    return definition.name if definition else None


def _defined_activity_names() -> set[str]:
    names: set[str] = set()
    for module_info in pkgutil.iter_modules(activities_package.__path__):
        module = importlib.import_module(f"activities.{module_info.name}")
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ != module.__name__:
                continue
            for _, fn in inspect.getmembers(cls, inspect.isfunction):
                if (name := _activity_name(fn)) is not None:
                    names.add(name)
    return names


def _defined_workflow_classes() -> set[type]:
    """Every class of a module under workflows/ that is a workflow or means to be one: a
    `RequestStep` subclass left undeclared is not a workflow at all, and no worker runs it."""
    defined: set[type] = set()
    for module_info in pkgutil.iter_modules(workflows_package.__path__):
        module = importlib.import_module(f"workflows.{module_info.name}")
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ != module.__name__ or cls is RequestStep:
                continue
            if workflow._Definition.from_class(cls) or issubclass(cls, RequestStep):
                defined.add(cls)
    return defined


def _registered_activity_names() -> set[str]:
    # The constructors only keep their clients, so placeholders are enough to list the methods.
    deps = ActivityDeps(pool=cast(Any, None), secrets=cast(Any, None))
    embedding = EmbeddingActivities.__new__(EmbeddingActivities)
    registered = [*activities(deps), *embedding_activities(embedding, cast(Any, None))]
    return {name for fn in registered if (name := _activity_name(fn)) is not None}


def test_every_defined_activity_is_registered() -> None:
    defined = _defined_activity_names()
    assert "identity.check_recovery_nonce" in defined  # the walk finds the activities
    assert defined - _registered_activity_names() == set()


def test_every_defined_workflow_is_registered() -> None:
    defined = _defined_workflow_classes()
    assert {TeamFoundingWorkflow, TeamCreateWorkflow} <= defined  # the walk finds both kinds
    assert defined - set(WORKFLOWS) == set()


def test_every_registered_workflow_has_a_unique_name() -> None:
    names = [cls.__temporal_workflow_definition.name for cls in WORKFLOWS]  # type: ignore[attr-defined]
    assert len(names) == len(set(names))


def test_the_embedding_queue_runs_only_registered_workflows() -> None:
    # a workflow of the embedding queue that the service worker lacks could not finish the runs
    # started on the service queue before the move
    assert set(EMBEDDING_WORKFLOWS) <= set(WORKFLOWS)
