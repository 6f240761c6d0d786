"""The task-type registry: nine closed input/output contracts, their rules, and their CIDs."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from schemas.errors import FieldError, ValidationFailed
from schemas.kernel.cids import json_cid
from schemas.kernel.task_types import (
    TASK_TYPE_NAMES,
    TASK_TYPES,
    get_task_type,
    input_schema,
    input_schema_cid,
    output_schema,
    validate_input,
    validate_output,
)
from schemas.limits import TASK_VALIDATION_MAX_ERRORS

U1 = "0b6f7c1e-3a52-4d8e-9c41-7f2a5b6c8d90"
U2 = "5f0c2d1a-8b7e-4c3d-9a2b-1e0f9d8c7b6a"
CID = "bagaaieraoc75thpp3goqf7oqz3cpofqwcyyqbfyeu6n7yczyvdaxehx5k5uq"
SHA = "0123456789abcdef0123456789abcdef01234567"

RUBRIC = {
    "rubricId": "quality",
    "version": "1",
    "preamble": "Judge carefully.",
    "criteria": [
        {"id": "a", "description": "correct", "weight": 0.7, "scoring": "llm_score"},
        {"id": "b", "description": "signed", "weight": 0.3, "scoring": "boolean"},
    ],
    "scope": "repo",
    "contentHash": "abc",
}
BOOLEAN_RUBRIC = {
    "rubricId": "review",
    "version": "2",
    "criteria": [
        {"id": "tests", "description": "has tests", "weight": 0.5, "scoring": "boolean"},
        {"id": "docs", "description": "has docs", "weight": 0.5, "scoring": "boolean"},
    ],
}
FULL_CRITERIA: dict[str, Any] = {
    "version": 1,
    "gates": [
        {"id": "g1", "kind": "submit-tool-call", "description": "submit once", "required": True},
        {"id": "g2", "kind": "schema-check", "spec": {"schemaCid": CID}, "required": False},
        {
            "id": "g3",
            "kind": "cid-equals",
            "spec": {"path": "/x", "expected": CID},
            "required": True,
        },
    ],
    "assertions": [{"id": "a1", "path": "/summary", "op": "min-length", "value": 3}],
    "rubric": RUBRIC,
    "minComposite": 0.5,
    "sideEffects": {"diaryEntryRequired": True, "diaryEntryTags": ["t"], "referencedEntries": 2},
}
EVAL_CRITERIA = {k: v for k, v in FULL_CRITERIA.items() if k not in ("rubric", "minComposite")}
VERIFICATION = {
    "inputCid": CID,
    "results": [{"id": "g1", "kind": "gate", "status": "pass", "detail": "ok"}],
    "passed": True,
}
CONTEXT = [{"slug": "style-guide", "binding": "skill", "content": "Write tests first."}]
JUDGE_SCORES = [
    {
        "criterionId": "a",
        "score": 1,
        "rationale": "all good",
        "assertions": [{"id": "x", "text": "renders", "passed": True, "evidence": "line 3"}],
        "evidence": {"anything": ["goes", 1]},
    }
]

# Smallest accepted input and output per type.
MINIMAL: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "freeform": ({"brief": "Explore the cache."}, {"summary": "Explored."}),
    "fulfill_brief": (
        {"brief": "Add a flag."},
        {
            "branch": "feat/flag",
            "commits": [],
            "pullRequestUrl": None,
            "diaryEntryIds": [],
            "summary": "Added.",
        },
    ),
    "assess_brief": (
        {"targetTaskId": U1, "successCriteria": {"version": 1, "rubric": RUBRIC}},
        {"scores": [{"criterionId": "a", "score": 0.5}], "composite": 0.5, "verdict": "ok"},
    ),
    "pr_review": (
        {
            "subject": {"title": "PR 1", "summary": "Adds a flag."},
            "successCriteria": {"version": 1, "rubric": BOOLEAN_RUBRIC},
        },
        {
            "scores": [{"criterionId": "tests", "score": 1, "rationale": "has them"}],
            "composite": 1,
            "verdict": "approve",
        },
    ),
    "curate_pack": (
        {"diaryId": U1, "taskPrompt": "Pick the auth notes."},
        {
            "packId": U1,
            "packCid": CID,
            "entries": [{"entryId": U2, "rank": 1, "rationale": "core"}],
            "recipeParams": {},
            "summary": "One entry.",
        },
    ),
    "render_pack": (
        {"packId": U1},
        {
            "renderedPackId": None,
            "renderedCid": CID,
            "renderMethod": "server:pack-to-docs-v1",
            "byteSize": 0,
            "entriesRendered": 0,
            "summary": "Rendered.",
        },
    ),
    "judge_pack": (
        {
            "renderedPackId": U1,
            "sourcePackId": U2,
            "successCriteria": {"version": 1, "rubric": RUBRIC},
        },
        {"scores": [{"criterionId": "a", "score": 0.25}], "composite": 0.25, "verdict": "weak"},
    ),
    "run_eval": (
        {
            "scenario": {"prompt": "Fix the bug."},
            "variantLabel": "baseline",
            "execution": {"mode": "vitro", "workspace": "none"},
            "context": [],
        },
        {"response": "", "totalTokens": 0, "durationMs": 0},
    ),
    "judge_eval_attempt": (
        {"targetTaskId": U1, "targetAttemptN": 1, "successCriteria": {"version": 1}},
        {
            "targetTaskId": U1,
            "targetAttemptN": 1,
            "variantLabel": "baseline",
            "scores": [{"criterionId": "a", "score": 0}],
            "composite": 0,
            "verdict": "fail",
        },
    ),
}

# Every optional field filled, so every object level of the schema appears in a value.
MAXIMAL: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "freeform": (
        {
            "brief": "Explore the cache.",
            "expectedOutput": "A summary.",
            "constraints": ["no network"],
            "suggestedTaskType": "fulfill_brief",
            "successCriteria": FULL_CRITERIA,
            "context": CONTEXT,
            "outputContract": {
                "schema": {"type": "object", "properties": {"n": {"type": "integer"}}},
                "description": "a count",
            },
            "execution": {"workspace": "dedicated_worktree", "revision": SHA},
        },
        {
            "summary": "Explored.",
            "result": {"n": 3},
            "branch": "explore",
            "artifacts": [
                {
                    "kind": "report",
                    "title": "Findings",
                    "description": "what we found",
                    "url": "https://example.com/r",
                    "path": "out/r.md",
                    "cid": CID,
                    "contentType": "text/markdown",
                    "contentEncoding": "identity",
                    "sizeBytes": 12,
                    "body": "# Findings",
                }
            ],
            "proposedTaskType": {
                "name": "cache_audit",
                "rationale": "recurring",
                "inputShape": {"type": "object"},
                "outputShape": {"type": "object"},
            },
            "diaryEntryIds": [U1],
            "verification": VERIFICATION,
        },
    ),
    "fulfill_brief": (
        {
            "brief": "Add a flag.",
            "successCriteria": FULL_CRITERIA,
            "seedFiles": ["cli.py"],
            "scopeHint": "cli only",
        },
        {
            "branch": "feat/flag",
            "commits": [{"sha": SHA[:7], "message": "add flag", "diaryEntryId": U2}],
            "pullRequestUrl": "https://example.com/pr/1",
            "diaryEntryIds": [U2],
            "summary": "Added.",
            "verification": VERIFICATION,
        },
    ),
    "assess_brief": (
        {"targetTaskId": U1, "successCriteria": FULL_CRITERIA},
        {
            "scores": [
                {
                    "criterionId": "a",
                    "score": 0.5,
                    "rationale": "half",
                    "evidence": {
                        "commitsVerified": 1,
                        "commitsTotal": 2,
                        "signatureFailures": ["abc1234"],
                    },
                }
            ],
            "composite": 0.5,
            "verdict": "ok",
            "judgeModel": "model-x",
        },
    ),
    "pr_review": (
        {
            "subject": {
                "title": "PR 1",
                "summary": "Adds a flag.",
                "resourceUrls": ["https://example.com/pr/1"],
                "inspectionHints": ["look at cli.py"],
            },
            "taskPrompt": "Review it.",
            "successCriteria": {**FULL_CRITERIA, "rubric": BOOLEAN_RUBRIC},
            "context": CONTEXT,
        },
        MINIMAL["pr_review"][1],
    ),
    "curate_pack": (
        {
            "diaryId": U1,
            "taskPrompt": "Pick the auth notes.",
            "entryTypes": ["semantic", "procedural"],
            "tagFilters": {"include": ["auth"], "exclude": ["old"], "prefix": "area:"},
            "tokenBudget": 500,
            "recipe": "topic-focused-v1",
            "successCriteria": FULL_CRITERIA,
        },
        {
            **MINIMAL["curate_pack"][1],
            "recipeParams": {"k": 5, "nested": {"free": True}},
            "checkpoints": [
                {"phase": "recall", "candidateIds": [U1, U2], "droppedIds": [U1], "notes": "n"}
            ],
            "verification": VERIFICATION,
        },
    ),
    "render_pack": (
        {"packId": U1, "persist": True, "pinned": False, "successCriteria": FULL_CRITERIA},
        {**MINIMAL["render_pack"][1], "renderedPackId": U2, "verification": VERIFICATION},
    ),
    "judge_pack": (
        {"renderedPackId": U1, "sourcePackId": U2, "successCriteria": FULL_CRITERIA},
        {
            "scores": JUDGE_SCORES,
            "composite": 1,
            "verdict": "good",
            "judgeModel": "model-x",
            "rendererBinaryCid": None,
        },
    ),
    "run_eval": (
        {
            "scenario": {"prompt": "Fix the bug.", "inputFiles": ["bug.py"]},
            "variantLabel": "with-memory",
            "execution": {"mode": "vivo", "workspace": "shared_mount"},
            "context": CONTEXT,
            "successCriteria": EVAL_CRITERIA,
        },
        {
            "response": "Fixed.",
            "artifacts": [{"path": "bug.py", "cid": CID}],
            "totalTokens": 1200,
            "durationMs": 3400,
            "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            "verification": VERIFICATION,
        },
    ),
    "judge_eval_attempt": (
        {"targetTaskId": U1, "targetAttemptN": 2, "successCriteria": FULL_CRITERIA},
        {
            **MINIMAL["judge_eval_attempt"][1],
            "scores": JUDGE_SCORES,
            "composite": 1,
            "judgeModel": "model-x",
            "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        },
    ),
}

# Object values whose shape the task defines: open on purpose.
FREE_FORM = {
    "/input/outputContract/schema",
    "/input/outputContract/schema/properties",
    "/input/outputContract/schema/properties/n",
    "/output/result",
    "/output/proposedTaskType/inputShape",
    "/output/proposedTaskType/outputShape",
    "/output/recipeParams",
    "/output/recipeParams/nested",
}
# judge_pack and judge_eval_attempt evidence is free-form; assess_brief's is a closed record.
FREE_FORM_JUDGE_EVIDENCE = "/output/scores/0/evidence"


def _free_form(name: str) -> set[str]:
    if name in ("judge_pack", "judge_eval_attempt"):
        return FREE_FORM | {FREE_FORM_JUDGE_EVIDENCE}
    return FREE_FORM


# Pinned: changing a schema changes these on purpose (and every client must be told).
SCHEMA_CIDS = {
    "freeform": "bagaaieraoc75thpp3goqf7oqz3cpofqwcyyqbfyeu6n7yczyvdaxehx5k5uq",
    "fulfill_brief": "bagaaierazwoiv25ups6rkqik26diov5ketfcxgfse36hsw4wmvekdxambqza",
    "assess_brief": "bagaaieraiiy7sdgmrx6cw6vkfu67hm6lczh3duudxcokvqifyzn3ecb4kuyq",
    "pr_review": "bagaaiera22klkqzaup3jolsx763fbnrf4ei4xlk2f6iu4cckpmf6mw3le2dq",
    "curate_pack": "bagaaierao7eahb4b627c6qtyhzl6uqijea4kajhreky2ywlvumvnfa37fqba",
    "render_pack": "bagaaiera4riyzohkag2jki473cm7si5badw3jknyhv3d3lszzw2aiwlhswwa",
    "judge_pack": "bagaaierayog6xo22qqfofcywtwnox6bt2w33hjepbih3mxdhodlkntbjptoq",
    "run_eval": "bagaaierads4wouiikxxqmre7sv7piqyzmuznwyscawpm3bpnmzwut2ltiirq",
    "judge_eval_attempt": "bagaaieraud4lr3bka27gluuhhxrqszitdxbkzpav43lhhz2rglwubdu455ha",
}


def _pointers(errors: list[FieldError]) -> list[str]:
    return [e.pointer for e in errors]


# --- the registry -----------------------------------------------------------------------------


def test_nine_types_in_the_reference_order() -> None:
    assert TASK_TYPE_NAMES == (
        "freeform",
        "fulfill_brief",
        "assess_brief",
        "pr_review",
        "curate_pack",
        "render_pack",
        "judge_pack",
        "run_eval",
        "judge_eval_attempt",
    )
    assert [t.name for t in TASK_TYPES] == list(TASK_TYPE_NAMES)


def test_output_kinds_and_references_policy() -> None:
    kinds = {t.name: t.output_kind for t in TASK_TYPES}
    assert {n for n, k in kinds.items() if k == "judgment"} == {
        "assess_brief",
        "pr_review",
        "judge_pack",
        "judge_eval_attempt",
    }
    assert [t.name for t in TASK_TYPES if t.requires_references] == ["assess_brief", "judge_pack"]
    assert get_task_type("judge_pack").required_reference_role == "judged_work"


def test_unknown_type() -> None:
    with pytest.raises(ValidationFailed) as raised:
        get_task_type("nope")
    assert raised.value.errors is not None
    assert _pointers(raised.value.errors) == ["/taskType"]
    assert _pointers(validate_input("nope", {})) == ["/taskType"]
    assert _pointers(validate_output("nope", {})) == ["/taskType"]


@pytest.mark.parametrize("task_type", TASK_TYPES, ids=lambda t: t.name)
def test_schemas_are_valid_draft_2020_12(task_type: Any) -> None:
    for schema in (task_type.input_schema, task_type.output_schema):
        Draft202012Validator.check_schema(schema)
        assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"


def _object_nodes(schema: Any, where: str = "#") -> Iterator[tuple[str, dict[str, Any]]]:
    if isinstance(schema, dict):
        if "properties" in schema or schema.get("type") == "object":
            yield where, schema
        for key, value in schema.items():
            if key in ("if", "dependentSchemas"):
                continue  # conditions and additions to an object that is already closed
            yield from _object_nodes(value, f"{where}/{key}")
    elif isinstance(schema, list):
        for i, item in enumerate(schema):
            yield from _object_nodes(item, f"{where}/{i}")


@pytest.mark.parametrize("task_type", TASK_TYPES, ids=lambda t: t.name)
def test_every_declared_object_is_closed(task_type: Any) -> None:
    """Objects with properties forbid others; only the known free-form values are open."""
    open_nodes = []
    for schema in (task_type.input_schema, task_type.output_schema):
        for where, node in _object_nodes(schema):
            if "properties" in node:
                assert node.get("additionalProperties") is False, where
            elif "additionalProperties" not in node:
                open_nodes.append(where.rsplit("/", 1)[-1])
    assert set(open_nodes) <= {"schema", "inputShape", "outputShape", "recipeParams", "evidence"}


def test_schema_accessors_hand_out_copies() -> None:
    schema = input_schema("freeform")
    schema["required"].append("mutated")
    assert "mutated" not in input_schema("freeform")["required"]
    assert output_schema("freeform")["title"] == "freeform output"


# --- minimal and maximal values ---------------------------------------------------------------


@pytest.mark.parametrize("name", TASK_TYPE_NAMES)
def test_minimal_input_and_output_are_accepted(name: str) -> None:
    task_input, output = MINIMAL[name]
    assert validate_input(name, task_input) == []
    assert validate_output(name, output, task_input=task_input) == []


@pytest.mark.parametrize("name", TASK_TYPE_NAMES)
def test_maximal_input_and_output_are_accepted(name: str) -> None:
    task_input, output = MAXIMAL[name]
    assert validate_input(name, task_input) == []
    assert validate_output(name, output, task_input=task_input, input_cid=CID) == []


@pytest.mark.parametrize("name", TASK_TYPE_NAMES)
def test_every_required_field_is_required(name: str) -> None:
    for role, schema, value, validate in (
        ("input", get_task_type(name).input_schema, MINIMAL[name][0], validate_input),
        ("output", get_task_type(name).output_schema, MINIMAL[name][1], validate_output),
    ):
        for field in schema.get("required", []):
            partial = {k: v for k, v in value.items() if k != field}
            assert _pointers(validate(name, partial)) == [f"/{role}/{field}"], field


def _object_paths(value: Any, path: tuple[str | int, ...] = ()) -> Iterator[tuple[str | int, ...]]:
    if isinstance(value, dict):
        yield path
        for key, item in value.items():
            yield from _object_paths(item, (*path, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _object_paths(item, (*path, i))


def _with_extra(value: Any, path: tuple[str | int, ...]) -> Any:
    changed = copy.deepcopy(value)
    node = changed
    for step in path:
        node = node[step]
    node["zzUnknown"] = 1
    return changed


def _pointer(role: str, path: tuple[str | int, ...]) -> str:
    return "/".join([f"/{role}", *(str(p) for p in path)])


@pytest.mark.parametrize("name", TASK_TYPE_NAMES)
def test_unknown_fields_are_rejected_at_every_level(name: str) -> None:
    task_input, output = MAXIMAL[name]
    checked = 0
    for role, value in (("input", task_input), ("output", output)):
        for path in _object_paths(value):
            where = _pointer(role, path)
            if where in _free_form(name):
                continue
            if role == "input":
                errors = validate_input(name, _with_extra(value, path))
            else:
                errors = validate_output(name, _with_extra(value, path))
            assert _pointers(errors) == [f"{where}/zzUnknown"], where
            assert errors[0].message == "unknown field"
            checked += 1
    assert checked >= 2


@pytest.mark.parametrize("name", TASK_TYPE_NAMES)
def test_free_form_values_stay_open(name: str) -> None:
    task_input, output = MAXIMAL[name]
    for role, value in (("input", task_input), ("output", output)):
        for path in _object_paths(value):
            where = _pointer(role, path)
            if where not in _free_form(name) or where.startswith("/input/outputContract/schema/"):
                continue  # (inside a JSON Schema an unknown member is not a schema)
            if where == "/output/result":
                continue  # typed by the output contract, checked below
            changed = _with_extra(value, path)
            validate = validate_input if role == "input" else validate_output
            assert validate(name, changed) == []


@pytest.mark.parametrize(
    ("name", "value", "pointer", "message"),
    [
        ("freeform", {"brief": ""}, "/input/brief", "must have at least 1 characters"),
        ("freeform", {"brief": 3}, "/input/brief", "must be a string"),
        ("freeform", [], "/input", "must be an object"),
        (
            "freeform",
            {"brief": "b", "constraints": ["c"] * 21},
            "/input/constraints",
            "must have at most 20 items",
        ),
        (
            "freeform",
            {"brief": "b", "context": CONTEXT * 6},
            "/input/context",
            "must have at most 5 items",
        ),
        (
            "freeform",
            {"brief": "b", "context": [{**CONTEXT[0], "slug": "bad slug"}]},
            "/input/context/0/slug",
            "must match ^[a-zA-Z0-9_-]+$",
        ),
        (
            "freeform",
            {"brief": "b", "execution": {"workspace": "cloud"}},
            "/input/execution/workspace",
            "must be one of 'none', 'shared_mount', 'dedicated_worktree'",
        ),
        (
            "freeform",
            {"brief": "b", "continueFrom": {"taskId": "not-a-uuid"}},
            "/input/continueFrom/taskId",
            "must be a UUID",
        ),
        (
            "freeform",
            {"brief": "b", "continueFrom": {"taskId": U1, "attemptN": 0}},
            "/input/continueFrom/attemptN",
            "must be at least 1",
        ),
        (
            "freeform",
            {"brief": "b", "continueFrom": {"taskId": U1, "mode": "merge"}},
            "/input/continueFrom/mode",
            "must be one of 'extend', 'fork'",
        ),
        (
            "freeform",
            {"brief": "b", "successCriteria": {"version": 2}},
            "/input/successCriteria/version",
            "must be 1",
        ),
        (
            "curate_pack",
            {"diaryId": U1, "taskPrompt": "p", "tokenBudget": 499},
            "/input/tokenBudget",
            "must be at least 500",
        ),
        (
            "curate_pack",
            {"diaryId": U1, "taskPrompt": "p", "entryTypes": ["semantic", "semantic"]},
            "/input/entryTypes",
            "must not repeat items",
        ),
        (
            "run_eval",
            {**MINIMAL["run_eval"][0], "variantLabel": "a - b"},
            "/input/variantLabel",
            "must not contain ' - ' (it separates the label from its suffixes)",
        ),
        (
            "run_eval",
            {**MINIMAL["run_eval"][0], "variantLabel": "x" * 65},
            "/input/variantLabel",
            "must have at most 64 characters",
        ),
    ],
)
def test_field_errors_point_at_the_field(name: str, value: Any, pointer: str, message: str) -> None:
    assert validate_input(name, value) == [FieldError(pointer=pointer, message=message)]


def test_gate_errors_explain_the_gate_kind_that_was_meant() -> None:
    def gate_errors(gate: dict[str, Any]) -> list[FieldError]:
        return validate_input(
            "freeform", {"brief": "b", "successCriteria": {"version": 1, "gates": [gate]}}
        )

    where = "/input/successCriteria/gates/0"
    assert _pointers(
        gate_errors({"id": "g", "kind": "schema-check", "spec": {}, "required": True})
    ) == [f"{where}/spec/schemaCid"]
    assert gate_errors({"id": "g", "kind": "other", "required": True}) == [
        FieldError(
            pointer=f"{where}/kind",
            message="must be one of 'submit-tool-call', 'schema-check', 'cid-equals'",
        )
    ]


def test_many_errors_are_capped() -> None:
    value = {"brief": "b", "constraints": [1] * 20, **{f"x{i}": 1 for i in range(100)}}
    assert len(validate_input("freeform", value)) == TASK_VALIDATION_MAX_ERRORS


def test_pointers_escape_slash_and_tilde() -> None:
    assert _pointers(validate_input("freeform", {"brief": "b", "a/b~c": 1})) == ["/input/a~1b~0c"]


# --- freeform rules (SPEC 2.6 rules 2 and 3) --------------------------------------------------


def test_workspace_is_rejected_with_continue_from() -> None:
    value = {
        "brief": "Carry on.",
        "continueFrom": {"taskId": U1, "attemptN": 2, "mode": "extend"},
        "execution": {"workspace": "shared_mount"},
    }
    errors = validate_input("freeform", value)
    assert _pointers(errors) == ["/input/execution/workspace"]
    assert "derived from the parent" in errors[0].message


def test_continue_from_without_workspace_is_accepted() -> None:
    for execution in ({}, {"revision": SHA}):
        value = {"brief": "Carry on.", "continueFrom": {"taskId": U1, "mode": "fork"}}
        assert validate_input("freeform", {**value, "execution": execution}) == []
    assert validate_input("freeform", {"brief": "b", "continueFrom": {"taskId": U1}}) == []


def test_workspace_without_continue_from_is_accepted() -> None:
    for workspace in ("none", "shared_mount", "dedicated_worktree"):
        value = {"brief": "b", "execution": {"workspace": workspace}}
        assert validate_input("freeform", value) == []


def test_revision_needs_a_workspace() -> None:
    value = {"brief": "b", "execution": {"workspace": "none", "revision": SHA}}
    assert _pointers(validate_input("freeform", value)) == ["/input/execution/revision"]
    bad_sha = {"brief": "b", "execution": {"revision": "HEAD"}}
    assert _pointers(validate_input("freeform", bad_sha)) == ["/input/execution/revision"]


CONTRACT_INPUT = {
    "brief": "Count the files.",
    "outputContract": {
        "schema": {
            "type": "object",
            "properties": {"count": {"type": "integer", "minimum": 0}},
            "required": ["count"],
            "additionalProperties": False,
        }
    },
}


def test_output_contract_requires_a_typed_result() -> None:
    summary = {"summary": "Counted."}
    assert validate_output("freeform", summary, task_input=CONTRACT_INPUT) == [
        FieldError(pointer="/output/result", message="is required by input.outputContract")
    ]
    good = {**summary, "result": {"count": 3}}
    assert validate_output("freeform", good, task_input=CONTRACT_INPUT) == []
    wrong = {**summary, "result": {"count": -1, "extra": True}}
    assert validate_output("freeform", wrong, task_input=CONTRACT_INPUT) == [
        FieldError(pointer="/output/result/count", message="must be at least 0"),
        FieldError(pointer="/output/result/extra", message="unknown field"),
    ]
    # Without a contract, result is optional and untyped.
    assert validate_output("freeform", summary, task_input={"brief": "b"}) == []
    assert validate_output("freeform", {**summary, "result": [1, "x"]}) == []


def test_output_contract_must_be_a_local_json_schema() -> None:
    assert validate_input("freeform", CONTRACT_INPUT) == []
    not_a_schema = {"brief": "b", "outputContract": {"schema": {"type": 12}}}
    (error,) = validate_input("freeform", not_a_schema)
    assert error.pointer == "/input/outputContract/schema"
    assert error.message.startswith("not a JSON Schema")
    remote = {"brief": "b", "outputContract": {"schema": {"$ref": "https://example.com/s.json"}}}
    assert _pointers(validate_input("freeform", remote)) == ["/input/outputContract/schema"]
    local = {
        "brief": "b",
        "outputContract": {"schema": {"$defs": {"n": {"type": "integer"}}, "$ref": "#/$defs/n"}},
    }
    assert validate_input("freeform", local) == []
    assert validate_output("freeform", {"summary": "s", "result": 4}, task_input=local) == []
    assert _pointers(
        validate_output("freeform", {"summary": "s", "result": "4"}, task_input=local)
    ) == ["/output/result"]


# --- other cross-field rules ------------------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["freeform", "fulfill_brief", "curate_pack", "render_pack", "run_eval"]
)
def test_verification_is_required_when_success_criteria_are_set(name: str) -> None:
    task_input, output = MAXIMAL[name]
    without = {k: v for k, v in output.items() if k != "verification"}
    assert _pointers(validate_output(name, without, task_input=task_input)) == [
        "/output/verification"
    ]
    assert validate_output(name, without) == []  # the input is not known: nothing to tie to
    assert _pointers(validate_output(name, output, task_input=task_input, input_cid="bother")) == [
        "/output/verification/inputCid"
    ]


@pytest.mark.parametrize("name", ["assess_brief", "judge_pack", "pr_review", "judge_eval_attempt"])
def test_rubric_weights_must_sum_to_one(name: str) -> None:
    task_input = copy.deepcopy(MAXIMAL[name][0])
    task_input["successCriteria"]["rubric"]["criteria"][0]["weight"] = 0.2
    (error,) = validate_input(name, task_input)
    assert error.pointer == "/input/successCriteria/rubric/criteria"
    assert "sum to 1" in error.message


def test_weights_within_tolerance_are_accepted() -> None:
    task_input = copy.deepcopy(MINIMAL["assess_brief"][0])
    criteria = task_input["successCriteria"]["rubric"]["criteria"]
    criteria[:] = [
        {"id": str(i), "description": "d", "weight": 0.1, "scoring": "llm_score"} for i in range(10)
    ]
    assert validate_input("assess_brief", task_input) == []  # 0.1 * 10 is not exactly 1.0


@pytest.mark.parametrize("name", ["assess_brief", "judge_pack", "pr_review"])
def test_judges_need_a_rubric(name: str) -> None:
    task_input = copy.deepcopy(MINIMAL[name][0])
    del task_input["successCriteria"]["rubric"]
    assert _pointers(validate_input(name, task_input)) == ["/input/successCriteria/rubric"]


def test_run_eval_criteria_have_no_rubric() -> None:
    task_input = {**MINIMAL["run_eval"][0], "successCriteria": {"version": 1, "rubric": RUBRIC}}
    assert _pointers(validate_input("run_eval", task_input)) == ["/input/successCriteria/rubric"]


def test_pr_review_rubric_is_boolean() -> None:
    task_input = copy.deepcopy(MINIMAL["pr_review"][0])
    task_input["successCriteria"]["rubric"]["criteria"][1]["scoring"] = "llm_score"
    assert _pointers(validate_input("pr_review", task_input)) == [
        "/input/successCriteria/rubric/criteria/1/scoring"
    ]
    output = copy.deepcopy(MINIMAL["pr_review"][1])
    output["scores"][0]["score"] = 0.5
    assert _pointers(validate_output("pr_review", output)) == ["/output/scores/0/score"]


@pytest.mark.parametrize("name", ["judge_pack", "judge_eval_attempt"])
def test_judge_scores_agree_with_their_assertions(name: str) -> None:
    output = copy.deepcopy(MAXIMAL[name][1])
    output["scores"][0]["assertions"].append(
        {"id": "y", "text": "t", "passed": False, "evidence": ""}
    )
    assert _pointers(validate_output(name, output)) == ["/output/scores/0/score"]
    output["scores"][0]["score"] = 0
    assert validate_output(name, output) == []


def test_judge_eval_variant_label_rule_applies_to_output() -> None:
    output = {**MINIMAL["judge_eval_attempt"][1], "variantLabel": "base - v2"}
    assert _pointers(validate_output("judge_eval_attempt", output)) == ["/output/variantLabel"]


# --- schema CIDs ------------------------------------------------------------------------------


def test_schema_cids_are_json_cids_of_the_schemas() -> None:
    for task_type in TASK_TYPES:
        assert input_schema_cid(task_type) == json_cid(task_type.input_schema)
        assert input_schema_cid(task_type.name) == input_schema_cid(task_type)
        assert input_schema_cid(task_type).startswith("bagaaiera")


def test_schema_cids_are_pinned() -> None:
    assert {t.name: input_schema_cid(t) for t in TASK_TYPES} == SCHEMA_CIDS
    assert len(set(SCHEMA_CIDS.values())) == len(SCHEMA_CIDS)


def test_schema_cids_do_not_depend_on_the_process() -> None:
    """A fresh interpreter (new hash seed, fresh dict building) computes the same CIDs."""
    code = (
        "import json; from schemas.kernel.task_types import TASK_TYPES, input_schema_cid;"
        "print(json.dumps({t.name: input_schema_cid(t) for t in TASK_TYPES}))"
    )
    env_seed = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env_seed
    )
    assert json.loads(out.stdout) == SCHEMA_CIDS
