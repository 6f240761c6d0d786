"""The nine built-in task types of SPEC 2.6, as data: one closed input and output schema each.

Every task names a type; its ``input`` is validated against the type's input schema at create,
its ``output`` against the output schema at complete. Both are JSON Schema (Draft 2020-12) and
closed at every object level (``additionalProperties: false``, SPEC 2.6 rule 4); the few
free-form values (a proposed JSON Schema, recipe parameters, judge evidence) say so. The input
schema's CID, the json-codec CID of its RFC 8785 canonical form, is stored on every task so an
executor can tell which contract a task was written against.

Field shapes follow the public reference (anchor-notes section 4). Rules that one schema cannot
say well live in small post-checks run after the schema passes: rubric weights summing to 1,
boolean rubrics for ``pr_review``, a freeform ``outputContract`` typing ``output.result``,
``verification`` when success criteria are set, and judge assertions agreeing with the score.
Validation answers ``FieldError``s whose pointers start at ``/input`` or ``/output``.

Each type's entry in ``TASK_TYPES`` is its one home: schemas, post-checks, the I/O checks the
API runs at create and complete (declared here by name, implemented in ``api/task_type_checks``
because this layer does no I/O), whether it can be continued or verify a rendered pack, and its
A2A skill. Code elsewhere asks these properties and never compares a type's name
(``tests/unit/test_task_type_homes.py`` fails on a type name written as a literal elsewhere).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError, ValidationError, best_match

from schemas.errors import (
    FieldError,
    UnknownTaskType,
)
from schemas.kernel.cids import json_cid
from schemas.limits import (
    CURATE_PACK_MIN_TOKEN_BUDGET,
    RUBRIC_WEIGHT_TOLERANCE,
    TASK_ARTIFACT_BODY_MAX_CHARS,
    TASK_COMMIT_SHA_MIN_CHARS,
    TASK_CONSTRAINTS_MAX,
    TASK_CONTEXT_BINDINGS_MAX,
    TASK_CONTEXT_CONTENT_MAX_CHARS,
    TASK_CONTEXT_SLUG_MAX_CHARS,
    TASK_OUTPUT_ARTIFACTS_MAX,
    TASK_VALIDATION_MAX_ERRORS,
    TASK_VARIANT_LABEL_MAX_CHARS,
)

OutputKind = Literal["artifact", "judgment"]
Schema = dict[str, Any]
CreateHook = Literal["judged_work_is_rendered_pack"]
"""An I/O check at create, by name: `judged_work_is_rendered_pack`: the rendered pack named by
`input.renderedPackId` exists, is readable, renders `input.sourcePackId`, and a `judged_work`
reference carries its CID."""
CompleteHook = Literal["curated_pack_in_diary", "rendered_pack_of_source"]
"""An I/O check at complete, by name: `curated_pack_in_diary`: `output.packId` is a pack of the
task's provenance diary with `output.packCid`; `rendered_pack_of_source`: a non-null
`output.renderedPackId` renders `input.packId` with `output.renderedCid`."""

JSON_SCHEMA_DIALECT: Final = "https://json-schema.org/draft/2020-12/schema"
_MESSAGE_MAX_CHARS: Final = 300

# --- schema building blocks -------------------------------------------------------------------


def _closed(properties: Mapping[str, Schema], required: Iterable[str] = ()) -> Schema:
    """An object with exactly these properties: the only way objects are built here."""
    schema: Schema = {"type": "object", "properties": dict(properties)}
    required = list(required)
    if required:
        schema["required"] = required
    schema["additionalProperties"] = False
    return schema


def _text(min_length: int = 1, max_length: int | None = None) -> Schema:
    schema: Schema = {"type": "string", "minLength": min_length}
    if max_length is not None:
        schema["maxLength"] = max_length
    return schema


def _list(items: Schema, min_items: int = 0, max_items: int | None = None) -> Schema:
    schema: Schema = {"type": "array", "items": items}
    if min_items:
        schema["minItems"] = min_items
    if max_items is not None:
        schema["maxItems"] = max_items
    return schema


def _integer(minimum: int = 0) -> Schema:
    return {"type": "integer", "minimum": minimum}


def _one_of(*values: str) -> Schema:
    return {"type": "string", "enum": list(values)}


def _omitted_when(description: str, *fields: str) -> Schema:
    """A subschema that fails when any of ``fields`` is present, explaining why."""
    return {"description": description, "not": {"anyOf": [{"required": [f]} for f in fields]}}


UUID: Final[Schema] = {"type": "string", "format": "uuid"}
NULLABLE_UUID: Final[Schema] = {"type": ["string", "null"], "format": "uuid"}
TEXT: Final = _text()
CID: Final = _text(max_length=256)
FRACTION: Final[Schema] = {"type": "number", "minimum": 0, "maximum": 1}
BOOLEAN: Final[Schema] = {"type": "boolean"}
# Free-form by design: data whose shape the task itself defines.
ANY_OBJECT: Final[Schema] = {"type": "object"}
WORKSPACE: Final = _one_of("none", "shared_mount", "dedicated_worktree")
ENTRY_TYPE: Final = _one_of("episodic", "semantic", "procedural", "reflection")

GATE: Final[Schema] = {
    "oneOf": [
        _closed(
            {
                "id": TEXT,
                "kind": {"const": "submit-tool-call"},
                "description": TEXT,
                "required": BOOLEAN,
            },
            ["id", "kind", "description", "required"],
        ),
        _closed(
            {
                "id": TEXT,
                "kind": {"const": "schema-check"},
                "spec": _closed({"schemaCid": CID}, ["schemaCid"]),
                "required": BOOLEAN,
            },
            ["id", "kind", "spec", "required"],
        ),
        _closed(
            {
                "id": TEXT,
                "kind": {"const": "cid-equals"},
                "spec": _closed({"path": TEXT, "expected": CID}, ["path", "expected"]),
                "required": BOOLEAN,
            },
            ["id", "kind", "spec", "required"],
        ),
    ]
}
ASSERTION: Final = _closed(
    {
        "id": TEXT,
        "path": TEXT,
        "op": _one_of("exists", "equals", "matches", "in-range", "min-length"),
        "value": {},  # any JSON value, compared according to op
    },
    ["id", "path", "op"],
)
RUBRIC_CRITERION: Final = _closed(
    {
        "id": TEXT,
        "description": TEXT,
        "weight": FRACTION,
        "scoring": _one_of(
            "llm_score",
            "llm_checklist",
            "boolean",
            "deterministic_signature_check",
            "deterministic_coverage_check",
        ),
    },
    ["id", "description", "weight", "scoring"],
)
RUBRIC: Final = _closed(
    {
        "rubricId": TEXT,
        "version": TEXT,
        "preamble": {"type": "string"},
        "criteria": _list(RUBRIC_CRITERION, min_items=1),
        "scope": {"type": "string"},
        "contentHash": {"type": "string"},
    },
    ["rubricId", "version", "criteria"],
)
SIDE_EFFECTS: Final = _closed(
    {
        "diaryEntryRequired": BOOLEAN,
        "diaryEntryTags": _list(TEXT),
        "referencedEntries": _integer(),
    }
)


def _success_criteria(*, rubric: Literal["optional", "required", "absent"]) -> Schema:
    """``successCriteria``: gates, assertions, optionally a rubric, and side effects."""
    properties: dict[str, Schema] = {
        "version": {"const": 1},
        "gates": _list(GATE),
        "assertions": _list(ASSERTION),
        "sideEffects": SIDE_EFFECTS,
    }
    if rubric != "absent":
        properties["rubric"] = RUBRIC
        properties["minComposite"] = FRACTION
    required = ["version", "rubric"] if rubric == "required" else ["version"]
    return _closed(properties, required)


VERIFICATION: Final = _closed(
    {
        "inputCid": CID,
        "results": _list(
            _closed(
                {
                    "id": TEXT,
                    "kind": _one_of("gate", "assertion", "rubric", "sideEffect"),
                    "status": _one_of("pass", "fail", "skip"),
                    "detail": {"type": "string"},
                },
                ["id", "kind", "status"],
            )
        ),
        "passed": BOOLEAN,
    },
    ["inputCid", "results", "passed"],
)
CONTEXT_BINDING: Final = _closed(
    {
        "slug": {
            "type": "string",
            "minLength": 1,
            "maxLength": TASK_CONTEXT_SLUG_MAX_CHARS,
            "pattern": "^[a-zA-Z0-9_-]+$",
        },
        "binding": _one_of("skill", "context_inline", "prompt_prefix", "user_inline"),
        "content": _text(max_length=TASK_CONTEXT_CONTENT_MAX_CHARS),
    },
    ["slug", "binding", "content"],
)
CONTEXT: Final = _list(CONTEXT_BINDING, max_items=TASK_CONTEXT_BINDINGS_MAX)
VARIANT_LABEL: Final[Schema] = {
    **_text(max_length=TASK_VARIANT_LABEL_MAX_CHARS),
    "not": {"pattern": " - "},
    "description": "must not contain ' - ' (it separates the label from its suffixes)",
}
JUDGE_SCORE: Final = _closed(
    {
        "criterionId": TEXT,
        "score": FRACTION,
        "rationale": {"type": "string"},
        "assertions": _list(
            _closed(
                {"id": TEXT, "text": TEXT, "passed": BOOLEAN, "evidence": {"type": "string"}},
                ["id", "text", "passed", "evidence"],
            ),
            min_items=1,
        ),
        "evidence": ANY_OBJECT,
    },
    ["criterionId", "score"],
)

# --- the nine types ---------------------------------------------------------------------------

FREEFORM_INPUT: Final = _closed(
    {
        "brief": TEXT,
        "expectedOutput": {"type": "string"},
        "constraints": _list(TEXT, max_items=TASK_CONSTRAINTS_MAX),
        "suggestedTaskType": TEXT,  # a hint only: the task stays freeform
        "successCriteria": _success_criteria(rubric="optional"),
        "context": CONTEXT,
        "outputContract": _closed(
            {
                "schema": {
                    **ANY_OBJECT,
                    "description": "a JSON Schema (Draft 2020-12) that output.result must meet",
                },
                "description": {"type": "string"},
            },
            ["schema"],
        ),
        "execution": {
            **_closed(
                {
                    "workspace": WORKSPACE,
                    "revision": {"type": "string", "pattern": "^[0-9a-f]{40}$"},
                }
            ),
            "if": {"properties": {"workspace": {"const": "none"}}, "required": ["workspace"]},
            "then": _omitted_when("a revision needs a workspace to check it out in", "revision"),
        },
        "continueFrom": _closed(
            {"taskId": UUID, "attemptN": _integer(1), "mode": _one_of("extend", "fork")},
            ["taskId"],
        ),
    },
    ["brief"],
) | {
    # SPEC 2.6 rule 3: a continuation runs where its parent ran.
    "dependentSchemas": {
        "continueFrom": {
            "properties": {
                "execution": _omitted_when(
                    "omit execution.workspace with continueFrom: the workspace is derived from "
                    "the parent's runtime context",
                    "workspace",
                )
            }
        }
    }
}
FREEFORM_OUTPUT: Final = _closed(
    {
        "summary": TEXT,
        "result": {"description": "typed by input.outputContract when the task has one"},
        "branch": TEXT,
        "artifacts": _list(
            _closed(
                {
                    "kind": TEXT,
                    "title": TEXT,
                    "description": {"type": "string"},
                    "url": TEXT,
                    "path": TEXT,
                    "cid": CID,
                    "contentType": TEXT,
                    "contentEncoding": TEXT,
                    "sizeBytes": _integer(),
                    "body": {"type": "string", "maxLength": TASK_ARTIFACT_BODY_MAX_CHARS},
                },
                ["kind", "title"],
            ),
            max_items=TASK_OUTPUT_ARTIFACTS_MAX,
        ),
        "proposedTaskType": _closed(
            {"name": TEXT, "rationale": TEXT, "inputShape": ANY_OBJECT, "outputShape": ANY_OBJECT},
            ["name", "rationale"],
        ),
        "diaryEntryIds": _list(UUID),
        "verification": VERIFICATION,
    },
    ["summary"],
)

FULFILL_BRIEF_INPUT: Final = _closed(
    {
        "brief": TEXT,
        "successCriteria": _success_criteria(rubric="optional"),
        "seedFiles": _list(TEXT),
        "scopeHint": {"type": "string"},
    },
    ["brief"],
)
FULFILL_BRIEF_OUTPUT: Final = _closed(
    {
        "branch": TEXT,
        "commits": _list(
            _closed(
                {
                    "sha": _text(TASK_COMMIT_SHA_MIN_CHARS, 64),
                    "message": TEXT,
                    "diaryEntryId": NULLABLE_UUID,
                },
                ["sha", "message", "diaryEntryId"],
            )
        ),
        "pullRequestUrl": {"type": ["string", "null"]},
        "diaryEntryIds": _list(UUID),
        "summary": TEXT,
        "verification": VERIFICATION,
    },
    ["branch", "commits", "pullRequestUrl", "diaryEntryIds", "summary"],
)

ASSESS_BRIEF_INPUT: Final = _closed(
    {"targetTaskId": UUID, "successCriteria": _success_criteria(rubric="required")},
    ["targetTaskId", "successCriteria"],
)
ASSESS_BRIEF_OUTPUT: Final = _closed(
    {
        "scores": _list(
            _closed(
                {
                    "criterionId": TEXT,
                    "score": FRACTION,
                    "rationale": {"type": "string"},
                    "evidence": _closed(
                        {
                            "commitsVerified": _integer(),
                            "commitsTotal": _integer(),
                            "signatureFailures": _list({"type": "string"}),
                        },
                        ["commitsVerified", "commitsTotal", "signatureFailures"],
                    ),
                },
                ["criterionId", "score"],
            ),
            min_items=1,
        ),
        "composite": FRACTION,
        "verdict": TEXT,
        "judgeModel": TEXT,
    },
    ["scores", "composite", "verdict"],
)

PR_REVIEW_INPUT: Final = _closed(
    {
        "subject": _closed(
            {
                "title": TEXT,
                "summary": TEXT,
                "resourceUrls": _list(TEXT),
                "inspectionHints": _list(TEXT),
            },
            ["title", "summary"],
        ),
        "taskPrompt": {"type": "string"},
        "successCriteria": _success_criteria(rubric="required"),
        "context": CONTEXT,
    },
    ["subject", "successCriteria"],
)
PR_REVIEW_OUTPUT: Final = _closed(
    {
        "scores": _list(
            _closed(
                {"criterionId": TEXT, "score": {"enum": [0, 1]}, "rationale": TEXT},
                ["criterionId", "score", "rationale"],
            ),
            min_items=1,
        ),
        "composite": FRACTION,
        "verdict": TEXT,
    },
    ["scores", "composite", "verdict"],
)

CURATE_PACK_INPUT: Final = _closed(
    {
        "diaryId": UUID,
        "taskPrompt": TEXT,
        "entryTypes": {**_list(ENTRY_TYPE, min_items=1), "uniqueItems": True},
        "tagFilters": _closed(
            {"include": _list(TEXT), "exclude": _list(TEXT), "prefix": TEXT},
        ),
        "tokenBudget": _integer(CURATE_PACK_MIN_TOKEN_BUDGET),
        "recipe": _one_of("topic-focused-v1", "scope-inventory-v1"),
        "successCriteria": _success_criteria(rubric="optional"),
    },
    ["diaryId", "taskPrompt"],
)
CURATE_PACK_OUTPUT: Final = _closed(
    {
        "packId": UUID,
        "packCid": CID,
        "entries": _list(
            _closed(
                {"entryId": UUID, "rank": _integer(1), "rationale": TEXT},
                ["entryId", "rank", "rationale"],
            ),
            min_items=1,
        ),
        "recipeParams": ANY_OBJECT,
        "checkpoints": _list(
            _closed(
                {
                    "phase": TEXT,
                    "candidateIds": _list(UUID),
                    "droppedIds": _list(UUID),
                    "notes": {"type": "string"},
                },
                ["phase", "candidateIds", "notes"],
            )
        ),
        "summary": TEXT,
        "verification": VERIFICATION,
    },
    ["packId", "packCid", "entries", "recipeParams", "summary"],
)

RENDER_PACK_INPUT: Final = _closed(
    {
        "packId": UUID,
        "persist": BOOLEAN,
        "pinned": BOOLEAN,
        "successCriteria": _success_criteria(rubric="optional"),
    },
    ["packId"],
)
RENDER_PACK_OUTPUT: Final = _closed(
    {
        "renderedPackId": NULLABLE_UUID,
        "renderedCid": CID,
        "renderMethod": TEXT,
        "byteSize": _integer(),
        "entriesRendered": _integer(),
        "summary": TEXT,
        "verification": VERIFICATION,
    },
    ["renderedPackId", "renderedCid", "renderMethod", "byteSize", "entriesRendered", "summary"],
)

JUDGE_PACK_INPUT: Final = _closed(
    {
        "renderedPackId": UUID,
        "sourcePackId": UUID,
        "successCriteria": _success_criteria(rubric="required"),
    },
    ["renderedPackId", "sourcePackId", "successCriteria"],
)
JUDGE_PACK_OUTPUT: Final = _closed(
    {
        "scores": _list(JUDGE_SCORE, min_items=1),
        "composite": FRACTION,
        "verdict": TEXT,
        "judgeModel": TEXT,
        "rendererBinaryCid": {"type": ["string", "null"]},
    },
    ["scores", "composite", "verdict"],
)

RUN_EVAL_INPUT: Final = _closed(
    {
        "scenario": _closed({"prompt": TEXT, "inputFiles": _list(TEXT)}, ["prompt"]),
        "variantLabel": VARIANT_LABEL,
        "execution": _closed(
            {"mode": _one_of("vitro", "vivo"), "workspace": WORKSPACE}, ["mode", "workspace"]
        ),
        "context": CONTEXT,
        "successCriteria": _success_criteria(rubric="absent"),
    },
    ["scenario", "variantLabel", "execution", "context"],
)
RUN_EVAL_OUTPUT: Final = _closed(
    {
        "response": {"type": "string"},
        "artifacts": _list(_closed({"path": TEXT, "cid": CID}, ["path", "cid"])),
        "totalTokens": _integer(),
        "durationMs": _integer(),
        "traceparent": TEXT,
        "verification": VERIFICATION,
    },
    ["response", "totalTokens", "durationMs"],
)

JUDGE_EVAL_ATTEMPT_INPUT: Final = _closed(
    {
        "targetTaskId": UUID,
        "targetAttemptN": _integer(1),
        "successCriteria": _success_criteria(rubric="optional"),
    },
    ["targetTaskId", "targetAttemptN", "successCriteria"],
)
JUDGE_EVAL_ATTEMPT_OUTPUT: Final = _closed(
    {
        "targetTaskId": UUID,
        "targetAttemptN": _integer(1),
        "variantLabel": VARIANT_LABEL,
        "scores": _list(JUDGE_SCORE, min_items=1),
        "composite": FRACTION,
        "verdict": TEXT,
        "judgeModel": TEXT,
        "traceparent": TEXT,
    },
    ["targetTaskId", "targetAttemptN", "variantLabel", "scores", "composite", "verdict"],
)

# --- cross-field rules (run once the schema passes) ---------------------------------------------

Check = Callable[[Mapping[str, Any], Mapping[str, Any] | None, str | None], Iterator[FieldError]]
"""A post-check: (value, the task's input or None, the task's inputCid or None) -> errors."""


def _rubric_weights_sum_to_one(
    task_input: Mapping[str, Any], _: Mapping[str, Any] | None, __: str | None
) -> Iterator[FieldError]:
    """A judge's composite is the weighted sum of its scores, so weights must add up to 1."""
    rubric = task_input.get("successCriteria", {}).get("rubric")
    if rubric is None:
        return
    total = math.fsum(c["weight"] for c in rubric["criteria"])
    if abs(total - 1) > RUBRIC_WEIGHT_TOLERANCE:
        yield FieldError(
            pointer="/input/successCriteria/rubric/criteria",
            message=f"criterion weights must sum to 1 (they sum to {total:g})",
        )


def _rubric_is_boolean(
    task_input: Mapping[str, Any], _: Mapping[str, Any] | None, __: str | None
) -> Iterator[FieldError]:
    """``pr_review`` scores are 0 or 1, which only a boolean criterion can produce."""
    criteria = task_input["successCriteria"]["rubric"]["criteria"]
    for i, criterion in enumerate(criteria):
        if criterion["scoring"] != "boolean":
            yield FieldError(
                pointer=f"/input/successCriteria/rubric/criteria/{i}/scoring",
                message="pr_review rubrics score every criterion as 'boolean'",
            )


def _output_contract_is_a_schema(
    task_input: Mapping[str, Any], _: Mapping[str, Any] | None, __: str | None
) -> Iterator[FieldError]:
    contract = task_input.get("outputContract")
    if contract is None:
        return
    pointer = "/input/outputContract/schema"
    try:
        Draft202012Validator.check_schema(contract["schema"])
    except SchemaError as exc:
        yield FieldError(pointer=pointer, message=_bounded(f"not a JSON Schema: {exc.message}"))
        return
    for ref in _refs(contract["schema"]):
        if not ref.startswith("#"):
            # Resolving a remote reference would make validation depend on the network.
            yield FieldError(pointer=pointer, message=f"only local $ref is allowed, got {ref!r}")


def _refs(node: Any) -> Iterator[str]:
    if isinstance(node, Mapping):
        for key, value in node.items():
            if key in ("$ref", "$dynamicRef") and isinstance(value, str):
                yield value
            else:
                yield from _refs(value)
    elif isinstance(node, list):
        for item in node:
            yield from _refs(item)


def _result_meets_output_contract(
    output: Mapping[str, Any], task_input: Mapping[str, Any] | None, _: str | None
) -> Iterator[FieldError]:
    """SPEC 2.6 rule 2: an ``outputContract`` requires a typed ``output.result``."""
    contract = (task_input or {}).get("outputContract")
    if contract is None:
        return
    if "result" not in output:
        yield FieldError(pointer="/output/result", message="is required by input.outputContract")
        return
    validator = Draft202012Validator(
        contract["schema"], format_checker=Draft202012Validator.FORMAT_CHECKER
    )
    yield from _field_errors(validator.iter_errors(output["result"]), "/output/result")


def _verification_when_criteria_set(
    output: Mapping[str, Any], task_input: Mapping[str, Any] | None, input_cid: str | None
) -> Iterator[FieldError]:
    """Success criteria are checked by the executor, which reports how in ``verification``."""
    if task_input is not None and "successCriteria" in task_input and "verification" not in output:
        yield FieldError(
            pointer="/output/verification",
            message="is required because input.successCriteria is set",
        )
    verification = output.get("verification")
    if input_cid is not None and verification is not None and verification["inputCid"] != input_cid:
        yield FieldError(
            pointer="/output/verification/inputCid", message="must be the task's inputCid"
        )


def _scores_agree_with_assertions(
    output: Mapping[str, Any], _: Mapping[str, Any] | None, __: str | None
) -> Iterator[FieldError]:
    """A score backed by assertions is 1 when they all passed and 0 otherwise."""
    for i, score in enumerate(output["scores"]):
        assertions = score.get("assertions")
        if assertions is None:
            continue
        expected = 1 if all(a["passed"] for a in assertions) else 0
        if score["score"] != expected:
            yield FieldError(
                pointer=f"/output/scores/{i}/score",
                message=f"must be {expected}: it is {'all' if expected else 'not all'} of its "
                "assertions passing",
            )


# --- the registry -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Skill:
    """How a type is offered as an A2A skill on the Agent Card (its id is the type's name)."""

    name: str
    description: str
    tags: tuple[str, ...]
    examples: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class TaskType:
    """One task type. Schemas are shared data: read them, never mutate them."""

    name: str
    output_kind: OutputKind
    description: str
    input_schema: Schema
    output_schema: Schema
    skill: Skill
    requires_references: bool = False
    # a reference of this role must be among them (judge_pack: its `judged_work`)
    required_reference_role: str | None = None
    input_checks: tuple[Check, ...] = ()
    output_checks: tuple[Check, ...] = ()
    create_hooks: tuple[CreateHook, ...] = ()
    complete_hooks: tuple[CompleteHook, ...] = ()
    # a completed task of this type can be continued by a new one of the same type through
    # `input.continueFrom` (SPEC 2.6 rule 3)
    continuable: bool = False
    # a completed task of this type may be recorded as a rendered pack's `verifiedTaskId`
    verifies_rendered_packs: bool = False
    _input_validator: Draft202012Validator = field(init=False, repr=False, compare=False)
    _output_validator: Draft202012Validator = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for schema in (self.input_schema, self.output_schema):
            Draft202012Validator.check_schema(schema)
        checker = Draft202012Validator.FORMAT_CHECKER
        inp = Draft202012Validator(self.input_schema, format_checker=checker)
        out = Draft202012Validator(self.output_schema, format_checker=checker)
        object.__setattr__(self, "_input_validator", inp)
        object.__setattr__(self, "_output_validator", out)


def _type(
    name: str,
    output_kind: OutputKind,
    description: str,
    input_schema: Schema,
    output_schema: Schema,
    *,
    skill: Skill,
    requires_references: bool = False,
    required_reference_role: str | None = None,
    input_checks: Sequence[Check] = (),
    output_checks: Sequence[Check] = (),
    create_hooks: Sequence[CreateHook] = (),
    complete_hooks: Sequence[CompleteHook] = (),
    continuable: bool = False,
    verifies_rendered_packs: bool = False,
) -> TaskType:
    def titled(schema: Schema, role: str) -> Schema:
        return {"$schema": JSON_SCHEMA_DIALECT, "title": f"{name} {role}", **schema}

    return TaskType(
        name=name,
        output_kind=output_kind,
        description=description,
        input_schema=titled(input_schema, "input"),
        output_schema=titled(output_schema, "output"),
        skill=skill,
        requires_references=requires_references,
        required_reference_role=required_reference_role,
        input_checks=tuple(input_checks),
        output_checks=tuple(output_checks),
        create_hooks=tuple(create_hooks),
        complete_hooks=tuple(complete_hooks),
        continuable=continuable,
        verifies_rendered_packs=verifies_rendered_packs,
    )


_PRODUCER_OUTPUT_CHECKS: Final = (_verification_when_criteria_set,)
_JUDGE_INPUT_CHECKS: Final = (_rubric_weights_sum_to_one,)

TASK_TYPES: Final[tuple[TaskType, ...]] = (
    _type(
        "freeform",
        "artifact",
        "exploratory work without a narrower contract",
        FREEFORM_INPUT,
        FREEFORM_OUTPUT,
        input_checks=(_output_contract_is_a_schema,),
        output_checks=(_result_meets_output_contract, *_PRODUCER_OUTPUT_CHECKS),
        continuable=True,
        skill=Skill(
            "Freeform task",
            "Any work described in plain words: the message text is the brief; the output is a "
            "summary with optional artifacts, content-addressed and signed by the executor.",
            ("task", "freeform", "brief"),
            ("Summarise the open issues of this repository", "Write a release note for v1.2"),
        ),
    ),
    _type(
        "fulfill_brief",
        "artifact",
        "produce whatever a brief describes",
        FULFILL_BRIEF_INPUT,
        FULFILL_BRIEF_OUTPUT,
        output_checks=_PRODUCER_OUTPUT_CHECKS,
        skill=Skill(
            "Fulfil a brief",
            "Produce a branch with signed commits and a summary for a brief.",
            ("task", "code", "brief"),
            ('{"brief": "Add a --json flag to the CLI"}',),
        ),
    ),
    _type(
        "assess_brief",
        "judgment",
        "grade a fulfilled brief against a rubric",
        ASSESS_BRIEF_INPUT,
        ASSESS_BRIEF_OUTPUT,
        requires_references=True,
        input_checks=_JUDGE_INPUT_CHECKS,
        skill=Skill(
            "Assess a brief",
            "Grade a fulfilled brief against a weighted rubric; needs a reference to the work.",
            ("task", "judge", "rubric"),
        ),
    ),
    _type(
        "pr_review",
        "judgment",
        "score a review subject against a boolean rubric",
        PR_REVIEW_INPUT,
        PR_REVIEW_OUTPUT,
        input_checks=(*_JUDGE_INPUT_CHECKS, _rubric_is_boolean),
        skill=Skill(
            "Review a change",
            "Score a review subject (a pull request, a document) against a boolean rubric.",
            ("task", "review", "judge"),
        ),
    ),
    _type(
        "curate_pack",
        "artifact",
        "select entries for a context pack",
        CURATE_PACK_INPUT,
        CURATE_PACK_OUTPUT,
        output_checks=_PRODUCER_OUTPUT_CHECKS,
        complete_hooks=("curated_pack_in_diary",),
        skill=Skill(
            "Curate a context pack",
            "Select and rank diary entries for a task prompt into a content-addressed pack.",
            ("task", "memory", "pack"),
        ),
    ),
    _type(
        "render_pack",
        "artifact",
        "render a pack to Markdown",
        RENDER_PACK_INPUT,
        RENDER_PACK_OUTPUT,
        output_checks=_PRODUCER_OUTPUT_CHECKS,
        complete_hooks=("rendered_pack_of_source",),
        skill=Skill(
            "Render a context pack",
            "Render a pack to Markdown, optionally persisted as a rendered pack.",
            ("task", "memory", "pack"),
        ),
    ),
    _type(
        "judge_pack",
        "judgment",
        "score a rendered pack",
        JUDGE_PACK_INPUT,
        JUDGE_PACK_OUTPUT,
        requires_references=True,
        required_reference_role="judged_work",
        input_checks=_JUDGE_INPUT_CHECKS,
        output_checks=(_scores_agree_with_assertions,),
        create_hooks=("judged_work_is_rendered_pack",),
        verifies_rendered_packs=True,
        skill=Skill(
            "Judge a rendered pack",
            "Score a rendered context pack against a rubric; the judged_work reference carries "
            "the rendered pack's CID.",
            ("task", "judge", "pack"),
        ),
    ),
    _type(
        "run_eval",
        "artifact",
        "run a scenario under a named variant",
        RUN_EVAL_INPUT,
        RUN_EVAL_OUTPUT,
        output_checks=_PRODUCER_OUTPUT_CHECKS,
        skill=Skill(
            "Run an evaluation",
            "Run a scenario prompt under a named context variant and report the response.",
            ("task", "eval"),
        ),
    ),
    _type(
        "judge_eval_attempt",
        "judgment",
        "grade a completed artifact-producing attempt against a hidden rubric",
        JUDGE_EVAL_ATTEMPT_INPUT,
        JUDGE_EVAL_ATTEMPT_OUTPUT,
        input_checks=_JUDGE_INPUT_CHECKS,
        output_checks=(_scores_agree_with_assertions,),
        skill=Skill(
            "Judge an evaluation attempt",
            "Grade a completed run_eval attempt against a rubric hidden from its executor.",
            ("task", "eval", "judge"),
        ),
    ),
)
_BY_NAME: Final[Mapping[str, TaskType]] = {t.name: t for t in TASK_TYPES}
TASK_TYPE_NAMES: Final[tuple[str, ...]] = tuple(_BY_NAME)
# the type of a task given only words (the CLI's default, an A2A message without a data part)
DEFAULT_TASK_TYPE: Final[TaskType] = _BY_NAME["freeform"]
CONTINUABLE_TYPE_NAMES: Final[tuple[str, ...]] = tuple(t.name for t in TASK_TYPES if t.continuable)


def is_continuable(name: str) -> bool:
    """Whether a completed task of the type named ``name`` can be continued (any unknown: no)."""
    return name in CONTINUABLE_TYPE_NAMES


# the types whose completed task may be a rendered pack's `verifiedTaskId`
VERIFYING_TYPE_NAMES: Final[tuple[str, ...]] = tuple(
    t.name for t in TASK_TYPES if t.verifies_rendered_packs
)
_SCHEMA_CIDS: Final[Mapping[str, str]] = {t.name: json_cid(t.input_schema) for t in TASK_TYPES}


def get_task_type(name: str) -> TaskType:
    """The registered type, or a 400 naming ``/taskType`` (SPEC: unknown types are rejected)."""
    task_type = _BY_NAME.get(name)
    if task_type is None:
        raise UnknownTaskType(
            f"unknown task type {name!r}",
            errors=[FieldError(pointer="/taskType", message=_unknown_type_message(name))],
        )
    return task_type


def _unknown_type_message(name: str) -> str:
    return _bounded(f"unknown task type {name!r}; expected one of {', '.join(TASK_TYPE_NAMES)}")


def input_schema_cid(task_type: str | TaskType) -> str:
    """json-codec CID of the RFC 8785 form of the type's input schema (stored on each task)."""
    name = task_type.name if isinstance(task_type, TaskType) else get_task_type(task_type).name
    return _SCHEMA_CIDS[name]


def input_schema(task_type: str | TaskType) -> Schema:
    """A copy of the input schema, safe to hand out (e.g. in ``GET /tasks/schemas``)."""
    return copy.deepcopy(_resolve(task_type).input_schema)


def output_schema(task_type: str | TaskType) -> Schema:
    return copy.deepcopy(_resolve(task_type).output_schema)


def _resolve(task_type: str | TaskType) -> TaskType:
    return task_type if isinstance(task_type, TaskType) else get_task_type(task_type)


def validate_input(task_type: str | TaskType, task_input: Any) -> list[FieldError]:
    """Problems with a task's ``input``, as pointers under ``/input``; empty when valid."""
    found = _lookup(task_type)
    if isinstance(found, FieldError):
        return [found]
    errors = _field_errors(found._input_validator.iter_errors(task_input), "/input")
    if not errors:
        errors = [e for check in found.input_checks for e in check(task_input, None, None)]
    return _capped(errors)


def validate_output(
    task_type: str | TaskType,
    output: Any,
    *,
    task_input: Mapping[str, Any] | None = None,
    input_cid: str | None = None,
) -> list[FieldError]:
    """Problems with an attempt's ``output``, as pointers under ``/output``; empty when valid.

    Pass the task's (valid) ``task_input`` and ``input_cid`` to also check the rules that tie
    output to input: ``outputContract`` typing ``result``, ``verification`` required when
    ``successCriteria`` is set and naming the task's ``inputCid``.
    """
    found = _lookup(task_type)
    if isinstance(found, FieldError):
        return [found]
    errors = _field_errors(found._output_validator.iter_errors(output), "/output")
    if not errors:
        errors = [e for check in found.output_checks for e in check(output, task_input, input_cid)]
    return _capped(errors)


def _lookup(task_type: str | TaskType) -> TaskType | FieldError:
    if isinstance(task_type, TaskType):
        return task_type
    found = _BY_NAME.get(task_type)
    if found is None:
        return FieldError(pointer="/taskType", message=_unknown_type_message(task_type))
    return found


# --- jsonschema errors as field errors ----------------------------------------------------------


def _pointer(base: str, path: Iterable[str | int]) -> str:
    """RFC 6901: ``~`` and ``/`` inside a key are escaped."""
    parts = (str(p).replace("~", "~0").replace("/", "~1") for p in path)
    return "".join([base, *(f"/{p}" for p in parts)])


def _bounded(message: str) -> str:
    return (
        message if len(message) <= _MESSAGE_MAX_CHARS else message[: _MESSAGE_MAX_CHARS - 1] + "…"
    )


_TYPE_NAMES: Final = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "object": "an object",
    "array": "an array",
    "boolean": "a boolean",
    "null": "null",
}


def _type_message(expected: str | list[str]) -> str:
    names = [expected] if isinstance(expected, str) else expected
    return "must be " + " or ".join(_TYPE_NAMES.get(n, n) for n in names)


def _field_errors(errors: Iterable[ValidationError], base: str) -> list[FieldError]:
    out: list[FieldError] = []
    for error in errors:
        out.extend(_explain(error, base))
    unique = {(e.pointer, e.message): e for e in out}
    return sorted(unique.values(), key=lambda e: (e.pointer, e.message))


def _explain(error: ValidationError, base: str) -> Iterator[FieldError]:
    """One jsonschema error as the field errors a client can act on."""
    where = _pointer(base, error.absolute_path)
    rule, expected, instance = error.validator, error.validator_value, error.instance
    if rule == "additionalProperties" and isinstance(instance, Mapping):
        allowed = set(error.schema.get("properties", {}))
        for key in sorted(set(instance) - allowed):
            yield FieldError(pointer=_pointer(where, [key]), message="unknown field")
    elif rule == "required" and isinstance(instance, Mapping):
        for key in expected:
            if key not in instance:
                yield FieldError(pointer=_pointer(where, [key]), message="is required")
    elif rule == "not" and isinstance(expected, Mapping) and "anyOf" in expected:
        # _omitted_when: point at the field that must go, with the schema's reason.
        for branch in expected["anyOf"]:
            for key in branch.get("required", ()):
                if isinstance(instance, Mapping) and key in instance:
                    yield FieldError(
                        pointer=_pointer(where, [key]),
                        message=_bounded(error.schema.get("description", "is not allowed here")),
                    )
    elif rule in ("oneOf", "anyOf") and error.context:
        yield from _explain_branches(error, base)
    else:
        yield FieldError(pointer=where, message=_message(rule, expected, error))


def _explain_branches(error: ValidationError, base: str) -> Iterator[FieldError]:
    """Explain a failed ``oneOf`` through the branch the value meant to match.

    Branches are told apart by a ``const`` discriminator (a gate's ``kind``): the branch whose
    discriminator matched is the one to explain. Context errors carry absolute paths.
    """
    by_branch: dict[int | str, list[ValidationError]] = {}
    for sub in error.context or ():
        by_branch.setdefault(sub.relative_schema_path[0], []).append(sub)

    def discriminator_failed(errors: list[ValidationError]) -> bool:
        return any(e.validator == "const" and len(e.relative_path) == 1 for e in errors)

    intended = [errs for errs in by_branch.values() if not discriminator_failed(errs)]
    if len(intended) == 1:
        for sub in intended[0]:
            yield from _explain(sub, base)
        return
    if not intended:
        # Every discriminator failed: name the accepted values once.
        first = next(e for e in error.context or () if e.validator == "const")
        values = ", ".join(
            repr(e.validator_value) for e in error.context or () if e.validator == "const"
        )
        yield FieldError(
            pointer=_pointer(base, first.absolute_path), message=f"must be one of {values}"
        )
        return
    closest = best_match(error.context or ())
    if closest is not None:
        yield from _explain(closest, base)


def _message(rule: str, expected: Any, error: ValidationError) -> str:
    simple: dict[str, Callable[[], str]] = {
        "type": lambda: _type_message(expected),
        "format": lambda: f"must be a {expected.upper() if expected == 'uuid' else expected}",
        "minLength": lambda: f"must have at least {expected} characters",
        "maxLength": lambda: f"must have at most {expected} characters",
        "minItems": lambda: f"must have at least {expected} items",
        "maxItems": lambda: f"must have at most {expected} items",
        "uniqueItems": lambda: "must not repeat items",
        "minimum": lambda: f"must be at least {expected}",
        "maximum": lambda: f"must be at most {expected}",
        "enum": lambda: "must be one of " + ", ".join(repr(v) for v in expected),
        "const": lambda: f"must be {expected!r}",
        "pattern": lambda: f"must match {expected}",
        "not": lambda: str(error.schema.get("description", "is not allowed")),
    }
    explain = simple.get(rule)
    return _bounded(explain() if explain is not None else error.message)


def _capped(errors: list[FieldError]) -> list[FieldError]:
    return errors[:TASK_VALIDATION_MAX_ERRORS]
