"""What Temporal stores outside the sealed payloads carries ids, never content (issue 31 §1).

The payload codec seals inputs, results and memos (tests/integration/test_payload_encryption.py);
three things stay in the clear because the cluster reads them: workflow ids, search attributes
and memo keys. Held here over the source, with `ast`, for every registered workflow:

- every workflow-id function of a registered workflow's module takes only ids (UUIDs, numbers,
  content ids and hashes, names of kinds), never a title, content or an email;
- every search attribute the API or a workflow sets is a Keyword whose value is `str(<an id>)`,
  or a task type's catalogue name;
- the one memo is the keyed run's request fingerprint (sealed by the codec like any payload).
"""

from __future__ import annotations

import ast
import inspect
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, get_args, get_origin, get_type_hints
from uuid import UUID

from pydantic import BaseModel
from temporalio.common import SearchAttributeKey

from infra.devstack import SEARCH_ATTRIBUTES
from workers.registry import WORKFLOWS
from workflows import common

ROOT = Path(__file__).resolve().parent.parent
# `str` parameters of a workflow-id function that name a thing without saying what it holds
ID_STRINGS = {
    "fingerprint",  # an agent's key fingerprint
    "credential_id",  # a session's or agent key's id, or an OAuth client id
    "cid",
    "request_cid",
    "code_hash",
    "old_hash",
    "nonce",
    "client_id",
    "subject_ns",
    "caller_ns",
    "role",
    "task_queue",
    "idempotency_key",  # the client's own opaque key for one request
}
# the search attribute whose value is a catalogue name rather than an id
NAME_VALUED = {"TASK_TYPE": {"task_type", "taskType"}}


def parsed(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


def is_id_type(kind: Any) -> bool:
    """A UUID, a number, a list of UUIDs, a closed set of names, or a model of only those."""
    if kind in (UUID, int) or get_origin(kind) is Literal:
        return True
    if get_origin(kind) in (list, Sequence) and get_args(kind) == (UUID,):
        return True
    if isinstance(kind, type) and issubclass(kind, BaseModel):
        return all(is_id_type(field.annotation) for field in kind.model_fields.values())
    return False


def test_every_workflow_id_is_made_of_ids() -> None:
    offending: list[str] = []
    made = 0
    for module in sorted({sys.modules[flow.__module__] for flow in WORKFLOWS}, key=str):
        for name, function in inspect.getmembers(module, inspect.isfunction):
            if not name.endswith("workflow_id") or function.__module__ != module.__name__:
                continue
            made += 1
            hints = get_type_hints(function)
            for param in inspect.signature(function).parameters:
                kind = hints[param]
                if not (is_id_type(kind) or (kind is str and param in ID_STRINGS)):
                    offending.append(f"{module.__name__}.{name}({param}: {kind})")
    assert made > 40, "the workflow-id functions moved: update this test"
    assert not offending, offending


def set_search_attributes(root: Path) -> list[tuple[str, ast.expr, ast.expr]]:
    """(where, key, value) of every `SearchAttributePair(key, value)` and `key.value_set(value)`."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(parsed(path)):
            if not isinstance(node, ast.Call):
                continue
            where = f"{path.relative_to(ROOT)}:{node.lineno}"
            if isinstance(node.func, ast.Name) and node.func.id == "SearchAttributePair":
                found.append((where, node.args[0], node.args[1]))
            elif isinstance(node.func, ast.Attribute) and node.func.attr == "value_set":
                found.append((where, node.func.value, node.args[0]))
    return found


def is_an_id(value: ast.expr) -> bool:
    """`str(x.some_id)`, `str(diary_id)`, `str(body.agentId)`."""
    if not (isinstance(value, ast.Call) and ast.unparse(value.func) == "str"):
        return False
    name = ast.unparse(value.args[0]).rsplit(".", 1)[-1]
    return name.endswith(("_id", "Id"))


def test_every_search_attribute_is_a_keyword_holding_an_id() -> None:
    assert set(SEARCH_ATTRIBUTES.values()) == {"Keyword"}
    keys = {name for name, value in vars(common).items() if isinstance(value, SearchAttributeKey)}
    offending: list[str] = []
    sets = set_search_attributes(ROOT / "api") + set_search_attributes(ROOT / "workflows")
    for where, key, value in sets:
        name = ast.unparse(key)
        if name not in keys:
            offending.append(f"{where}: {name} is not one of workflows/common.py's keys")
        elif name in NAME_VALUED:
            if ast.unparse(value).rsplit(".", 1)[-1] not in NAME_VALUED[name]:
                offending.append(f"{where}: {name} = {ast.unparse(value)}")
        elif not is_an_id(value):
            offending.append(f"{where}: {name} = {ast.unparse(value)}")
    assert len(sets) > 20, "the search attributes moved: update this test"
    assert not offending, offending


def test_the_one_memo_is_the_request_fingerprint() -> None:
    memos = []
    for root in ("api", "workflows", "workers"):
        for path in sorted((ROOT / root).rglob("*.py")):
            for node in ast.walk(parsed(path)):
                if isinstance(node, ast.keyword) and node.arg == "memo":
                    memos.append(ast.unparse(node.value))
    assert memos and set(memos) == {"_memo(key)"}
    flows = (ROOT / "api" / "flows.py").read_text()
    assert "return None if key is None else {FINGERPRINT_MEMO: key.fingerprint}" in flows
