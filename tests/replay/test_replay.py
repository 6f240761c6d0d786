"""Replay safety (issue 23, 5): every committed history replays with today's workflows (those of
`workers/registry.py`); every registered workflow type that can outlive a deploy has a committed
history, or a written reason why it cannot; every `workflow.patched` in `workflows/` has a
history recorded by the code before the patch, and one after it.

Histories come from real runs: `make record-histories` re-records those the workflow tests name
(`histories.keep`); the pre-patch ones were recorded by the code of their time (from git
history, run outside the repository) and are never re-recorded."""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

import pytest
from histories import HISTORIES, load_history, patches_of, replay, workflow_type_of
from temporalio.workflow import _Definition

from workers.registry import REQUEST_STEPS, WORKFLOWS
from workflows.steps import LOCAL_RUNNERS, RequestStep, StepDeclaration

ROOT = Path(__file__).resolve().parents[2]
HISTORY_FILES = sorted(HISTORIES.glob("*.json"))

# A request step (`workflows.steps`) runs its one step as a local activity, so it finishes in the
# workflow task that starts it, retries included (seconds): a deploy cannot land in the middle of
# a run, so no run of it is ever replayed by newer code. Every declared one is exempt.
ONE_TASK = (
    "completes in one workflow task (its steps are local activities); cannot outlive a deploy"
)
EXEMPT: dict[str, str] = {cls.declared.name: ONE_TASK for cls in REQUEST_STEPS}
# What would let a run span more than one workflow task (and so a deploy).
SPANS_TASKS = (
    "run_activity",
    "execute_activity",
    "child_workflow",
    "workflow.sleep",
    "wait_condition",
    "continue_as_new",
)

# Each patch, and the committed histories recorded by the code before it.
PRE_PATCH: dict[str, tuple[str, ...]] = {
    "personal-team": ("registration",),
    "local-steps": ("registration_personal_team", "team_founding"),
    "connector-purge": ("maintenance_purge",),
    "verify-before-consume": ("recovery_verify_pre_verify_before_consume",),
    "creator-accepts": ("team_founding_local_steps",),
}


def registered() -> dict[str, type]:
    return {_Definition.must_from_class(cls).name: cls for cls in WORKFLOWS}


def recorded_types() -> set[str]:
    return {workflow_type_of(load_history(path)) for path in HISTORY_FILES}


def patch_ids_in_source() -> set[str]:
    """Every id passed to `workflow.patched` / `workflow.deprecate_patch` under workflows/,
    a literal or a module constant."""
    ids: set[str] = set()
    for source in sorted((ROOT / "workflows").glob("*.py")):
        module = importlib.import_module(f"workflows.{source.stem}")
        for node in ast.walk(ast.parse(source.read_text())):
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("patched", "deprecate_patch")
            ):
                continue
            [arg] = node.args
            if isinstance(arg, ast.Constant):
                ids.add(str(arg.value))
            else:
                assert isinstance(arg, ast.Name), ast.dump(arg)
                ids.add(str(getattr(module, arg.id)))
    return ids


@pytest.mark.parametrize("recorded", HISTORY_FILES, ids=lambda path: path.stem)
async def test_every_committed_history_replays(recorded: Path) -> None:
    await replay(recorded)


def test_every_registered_workflow_type_has_a_history_or_a_written_exemption() -> None:
    types, recorded = set(registered()), recorded_types()
    assert types - recorded - set(EXEMPT) == set(), "record a history (`make record-histories`)"
    assert set(EXEMPT) <= types, "an exemption names a type that is not registered"
    assert recorded & set(EXEMPT) == set(), "a recorded type needs no exemption"
    assert recorded <= types, "a history of a type no worker runs any more"


@pytest.mark.parametrize("name", sorted(EXEMPT))
def test_an_exempt_workflow_cannot_span_workflow_tasks(name: str) -> None:
    """The exemption's reason holds: the run is its declared step alone, run as a local
    activity after a plain function of the input; no timer, wait, regular activity or child."""
    [cls] = [step for step in REQUEST_STEPS if step.declared.name == name]
    declared = cls.declared
    assert declared.runner in LOCAL_RUNNERS
    assert not inspect.iscoroutinefunction(declared.prepare)
    code = (cls, cls.run, RequestStep.run, StepDeclaration.__call__, declared.prepare)
    for source in map(inspect.getsource, code):
        assert [call for call in SPANS_TASKS if call in source] == []


def test_every_patch_has_a_history_from_before_it_and_one_after() -> None:
    assert patch_ids_in_source() == set(PRE_PATCH)
    taken = {path.stem: patches_of(load_history(path)) for path in HISTORY_FILES}
    for patch, before in PRE_PATCH.items():
        for stem in before:
            assert stem in taken, f"{stem}.json, recorded before {patch}, is not committed"
            assert patch not in taken[stem], f"{stem}.json was recorded after {patch}"
        assert any(patch in ids for ids in taken.values()), f"no history taken {patch}"
