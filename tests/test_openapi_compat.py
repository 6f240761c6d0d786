"""The REST compatibility guard (SPEC 9: "removing or renaming a field, changing a type, or making
an optional field required is breaking"). The OpenAPI document is committed as a snapshot
(`api/openapi.snapshot.json`); the live one (`cairn openapi`) must not break it, as judged by
Optic's breaking-changes ruleset (`optic diff <snapshot> <live> --check`, pinned in
tests/openapi-guard/, installed by `make test`). An additive change passes without touching the
snapshot; `make openapi-snapshot` records it. A breaking one fails with Optic's report.

The baseline is the snapshot alone (no git history is read), and a test below holds it equal to
the live document. So an intended breaking change has one way through: it is coordinated, the
snapshot is re-recorded in the commit that makes it, and it is named here, with what Optic
reported against the snapshot before it:

- Issue 34 §6: the console's pages and forms (58 HTML operations under `/console/`) left
  `/openapi.json` for a document of their own (api/openapi.py, `document="console"`), served
  nowhere. Optic's report against the previous snapshot: "58 operations removed", each a
  `/console/` operation, every failed check under one of them (the removal, and with it their
  status codes and problem properties), no other operation changed: no REST answer changed.
  The console's schemas left `components` with them (no API operation referred to them). That
  every other route is still documented is tests/integration/test_api_contract.py's check (the
  API's document and the console's together are exactly the served routes, each in one).

The guard's own proof edits a copy of the snapshot. The copy keeps only the operations that use
the edited schemas: Optic's cost grows with the operations it compares (a minute of CPU for the
whole document), while the verdict on one operation does not depend on the others."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
SNAPSHOT = ROOT / "api" / "openapi.snapshot.json"
OPTIC = ROOT / "tests" / "openapi-guard" / "node_modules" / ".bin" / "optic"
CAIRN = Path(sys.executable).parent / "cairn"
MESSAGES = "/tasks/{id}/attempts/{n}/messages"
CHECK_TIMEOUT_S = 900  # the whole document takes about a minute of CPU on a shared machine


def optic_check(before: dict[str, Any], after: dict[str, Any], folder: Path) -> tuple[int, str]:
    """`optic diff --check` of two documents: its exit code and its report. It runs in an empty
    folder (no optic.yml, no git: the default breaking-changes ruleset) with telemetry off and
    without CI's variable (which would make it look for a cloud setup)."""
    assert OPTIC.exists(), f"{OPTIC} is missing: `make test` installs it (npm ci)"
    old, new = folder / "before.json", folder / "after.json"
    old.write_text(json.dumps(before, indent=2))
    new.write_text(json.dumps(after, indent=2))
    env = {k: v for k, v in os.environ.items() if k != "CI"} | {"OPTIC_TELEMETRY_LEVEL": "off"}
    done = subprocess.run(
        [str(OPTIC), "diff", old.name, new.name, "--check"],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=CHECK_TIMEOUT_S,
    )
    return done.returncode, done.stdout + done.stderr


def live_document() -> dict[str, Any]:
    """What `cairn openapi` prints (with the default base URL, as the snapshot was made)."""
    env = {k: v for k, v in os.environ.items() if k != "SERVICE_BASE_URL"}
    done = subprocess.run(
        [str(CAIRN), "openapi"], env=env, capture_output=True, text=True, check=True, timeout=120
    )
    document: dict[str, Any] = json.loads(done.stdout)
    return document


def snapshot() -> dict[str, Any]:
    document: dict[str, Any] = json.loads(SNAPSHOT.read_text())
    return document


def only(document: dict[str, Any], *paths: str) -> dict[str, Any]:
    kept = copy.deepcopy(document)
    kept["paths"] = {path: kept["paths"][path] for path in paths}
    return kept


def test_the_live_document_is_the_snapshot(tmp_path: Path) -> None:
    """The snapshot records the live document, so the guard judges every route the API serves (a
    route missing from a stale snapshot would be free to break unnoticed). When they differ,
    Optic says which way: a breaking change fails with its report, an additive one asks for
    `make openapi-snapshot` in the same commit. Equal documents leave Optic nothing to judge (a
    minute of CPU to compare a document with itself)."""
    before, live = snapshot(), live_document()
    if live == before:
        return
    code, report = optic_check(before, live, tmp_path)
    assert code == 0, (
        "The REST API changed incompatibly with api/openapi.snapshot.json (SPEC 9). Undo the "
        "breaking change, or, if it is coordinated, refresh the snapshot with "
        f"`make openapi-snapshot` and name the change in this module's docstring. Optic's "
        f"report:\n{report}"
    )
    raise AssertionError(
        "api/openapi.snapshot.json is behind the live document (an additive change): run "
        "`make openapi-snapshot` and commit it with the change"
    )


def rename_seq(document: dict[str, Any]) -> None:
    message = document["components"]["schemas"]["TaskMessage"]
    message["properties"]["sequence"] = message["properties"].pop("seq")
    message["required"] = ["sequence" if r == "seq" else r for r in message["required"]]


def retype_seq(document: dict[str, Any]) -> None:
    seq = {"title": "Seq", "type": "string"}
    document["components"]["schemas"]["TaskMessage"]["properties"]["seq"] = seq


def require_payload(document: dict[str, Any]) -> None:
    document["components"]["schemas"]["AppendMessagesRequest"]["required"] = ["payload"]


def remove_operation(document: dict[str, Any]) -> None:
    """What the console's pages were to the guard (issue 34 §6): a removal is breaking."""
    del document["paths"][MESSAGES]["get"]


@pytest.mark.parametrize(
    ("edit", "says"),
    [
        (rename_seq, "[prevent removing response property]"),
        (retype_seq, "[prevent response property type changes]"),
        (require_payload, "[prevent changing request property to required]"),
        (remove_operation, "[prevent operation removal]"),
    ],
    ids=[
        "renamed-response-field",
        "changed-type",
        "optional-request-field-now-required",
        "removed-operation",
    ],
)
def test_a_breaking_change_fails_the_check_with_the_report(
    tmp_path: Path, edit: Any, says: str
) -> None:
    before = only(snapshot(), MESSAGES)
    after = copy.deepcopy(before)
    edit(after)
    code, report = optic_check(before, after, tmp_path)
    assert code != 0, report
    assert says in report and "This is a breaking change." in report, report


def test_an_additive_change_passes(tmp_path: Path) -> None:
    before = only(snapshot(), MESSAGES)
    after = copy.deepcopy(before)
    message = after["components"]["schemas"]["TaskMessage"]
    message["properties"]["source"] = {"title": "Source", "type": "string"}  # optional, new
    after["paths"]["/tasks/{id}/attempts/{n}/summary"] = {
        "get": {"operationId": "getSummary", "responses": {"200": {"description": "a new route"}}}
    }
    code, report = optic_check(before, after, tmp_path)
    assert code == 0, report
    assert "added" in report, report
