"""Acceptance (issue 23): schemathesis' own runner over the live `/openapi.json`, as an
authenticated agent whose requests name real resources, and over the console's own document
(its pages, which left `/openapi.json` in issue 34; `api.openapi`), as a person of the team.

A world is seeded through the API (a team, a diary with entries and a relation, a pack and its
rendering, a task, a signing request, an agent key, a group, an invite, a project), and the
`schemathesis run` command gets those ids as fixed parameter values per operation, so requests
reach handlers past their 404s. Every check runs, over the examples, coverage and fuzzing phases
(`CAIRN_FUZZ_LIVE_EXAMPLES` cases per operation, 25 by default) and, under `make fuzz`, the
stateful phase (links between operations). Any 5xx or conformance failure fails the test, with
schemathesis' own report.

It runs only when `CAIRN_FUZZ_LIVE` is set (`make fuzz`): a full run takes long on a shared
machine. `make test` keeps the bounded in-process run of test_schemathesis.py.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from actors import Actor, join_team

from api.openapi import build_openapi

LIVE = os.environ.get("CAIRN_FUZZ_LIVE")
EXAMPLES = int(os.environ.get("CAIRN_FUZZ_LIVE_EXAMPLES", "25"))
PHASES = os.environ.get("CAIRN_FUZZ_LIVE_PHASES", "examples,coverage,fuzzing")
# operations that end the agent's own access (later operations would only see 401s); their
# contract is covered by their own integration tests
EXCLUDED = ("/self-service/logout",)

# schemathesis' rejections, and the server's own for an oversized request line or header
REJECTIONS = [400, 401, 403, 404, 405, 406, 409, 413, 414, 415, 422, 428, 429, 431]

pytestmark = pytest.mark.skipif(not LIVE, reason="set CAIRN_FUZZ_LIVE (make fuzz)")


async def _made(actor: Actor, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
    status, body = await actor.call(method, path, **kwargs)
    assert status in (200, 201), (method, path, status, body)
    return dict(body)


async def seed(owner: Actor) -> dict[str, str]:
    """Real ids of every kind of resource the agent can reach, by parameter name."""
    team = await _made(owner, "POST", "/teams", json={"name": "fuzzed"})
    team_id = team["id"]
    diary = await _made(
        owner, "POST", "/diaries", json={"name": "fuzzed", "visibility": "private"}, team=team_id
    )
    diary_id = diary["id"]
    entries = [
        await _made(
            owner,
            "POST",
            f"/diaries/{diary_id}/entries",
            json={"content": f"Fuzzing note {n}: the service answers 400 to bad input."},
        )
        for n in (1, 2)
    ]
    relation = await _made(
        owner,
        "POST",
        f"/entries/{entries[0]['id']}/relations",
        json={"targetId": entries[1]["id"], "relation": "supports"},
    )
    selection = [{"entryId": entry["id"], "rank": rank} for rank, entry in enumerate(entries, 1)]
    pack = await _made(
        owner, "POST", f"/diaries/{diary_id}/packs", json={"entries": selection, "pinned": True}
    )
    rendered = await _made(
        owner,
        "POST",
        f"/packs/{pack['packId']}/render",
        json={"renderMethod": "server:pack-to-docs-v1"},
    )
    task_body = {
        "taskType": "freeform",
        "teamId": team_id,
        "diaryId": diary_id,
        "input": {"brief": "Fuzzed"},
    }
    task = await _made(owner, "POST", "/tasks", json=task_body, team=team_id)
    signing = await _made(owner, "POST", "/crypto/signing-requests", json={"message": "fuzz"})
    key = await _made(
        owner,
        "POST",
        "/agent-keys",
        json={"agentId": str(owner.subject_id), "name": "fuzzed"},
        team=team_id,
        headers={"Idempotency-Key": uuid.uuid4().hex},
    )
    group = await _made(owner, "POST", f"/teams/{team_id}/groups", json={"name": "fuzzed"})
    invite = await _made(owner, "POST", f"/teams/{team_id}/invites", json={"role": "member"})
    await _made(owner, "POST", f"/teams/{team_id}/projects", json={"name": "fuzzed"})
    profile = await _made(
        owner, "POST", "/runtime-profiles", json={"teamId": team_id, "name": "fuzzed"}, team=team_id
    )
    # what the destructive operations get, so the resources above live through the run
    spare_team = (await _made(owner, "POST", "/teams", json={"name": "spare"}))["id"]
    spare_diary = (
        await _made(
            owner, "POST", "/diaries", json={"name": "spare", "visibility": "private"}, team=team_id
        )
    )["id"]
    spare_entry = await _made(
        owner, "POST", f"/diaries/{diary_id}/entries", json={"content": "Spare note."}
    )
    spare_relation = await _made(
        owner,
        "POST",
        f"/entries/{entries[1]['id']}/relations",
        json={"targetId": spare_entry["id"], "relation": "references"},
    )
    spare_group = await _made(owner, "POST", f"/teams/{team_id}/groups", json={"name": "spare"})
    transfer = await _made(
        owner, "POST", f"/diaries/{spare_diary}/transfers", json={"destinationTeamId": spare_team}
    )
    return {
        "profile": profile["id"],
        "pack_cid": pack["packCid"],
        "transfer": transfer["id"],
        "spare_team": spare_team,
        "spare_diary": spare_diary,
        "spare_entry": spare_entry["id"],
        "spare_relation": spare_relation["id"],
        "spare_group": spare_group["id"],
        "team": team_id,
        "diary": diary_id,
        "entry": entries[0]["id"],
        "other_entry": entries[1]["id"],
        "relation": relation["id"],
        "pack": pack["packId"],
        "rendered": rendered.get("id") or rendered.get("renderedPackId", ""),
        "task": task["id"],
        "signing": signing.get("request_id") or signing.get("id", ""),
        "key": key["id"],
        "group": group["id"],
        "invite": invite["id"],
        "agent": str(owner.subject_id),
        "fingerprint": owner.fingerprint,
    }


def config(ids: dict[str, str], auth: dict[str, str], person: dict[str, str], document: str) -> str:
    """schemathesis.toml for one document: the agent's credential and team on every request,
    and real ids as the values of path parameters (an `id` means what its path says). The
    console's pages are asked as a person of the team (`person`: a human's session, no bearer),
    so their handlers run on the real resources instead of sending an agent to the login
    page."""
    by_operation = {
        "DELETE /teams/{id}": {"path.id": ids["spare_team"]},
        "DELETE /diaries/{diaryId}": {"path.diaryId": ids["spare_diary"]},
        "DELETE /entries/{entryId}": {"path.entryId": ids["spare_entry"]},
        "DELETE /relations/{relationId}": {"path.relationId": ids["spare_relation"]},
        "DELETE /groups/{id}": {"path.id": ids["spare_group"]},
    }
    by_prefix = {
        "^/runtime-profiles/": ids["profile"],
        "^/agent-keys/": ids["key"],
        "^/crypto/signing-requests/": ids["signing"],
        "^/packs/": ids["pack"],
        "^/rendered-packs/": ids["rendered"],
        "^/tasks/": ids["task"],
        "^/teams/": ids["team"],
        "^/groups/": ids["group"],
    }
    common = {
        "diaryId": ids["diary"],
        "entryId": ids["entry"],
        "relationId": ids["relation"],
        "otherId": ids["pack"],
        "inviteId": ids["invite"],
        "subjectId": ids["agent"],
        "teamId": ids["team"],
        "taskId": ids["task"],
        "keyId": ids["key"],
        "groupId": ids["group"],
        "fingerprint": ids["fingerprint"],
        "transferId": ids["transfer"],
        "cid": ids["pack_cid"],
        "otherCid": ids["pack_cid"],
        "n": 1,
    }
    lines = [
        # A 400 to schema-valid data is a rule the document states in words, not in its schema:
        # an opaque cursor this list did not issue, an id that must name an existing resource
        # of the same team or diary, a signature or key that must verify, one field that needs
        # another (the problem names the field and the rule). Every other check stays strict.
        "[checks.positive_data_acceptance]",
        'expected-statuses = ["2xx", "400", "401", "403", "404", "409", "410", "429"]',
        "",
        "[checks.negative_data_rejection]",
        f"expected-statuses = {REJECTIONS}",
        "",
        "[headers]",
        *(f"{json.dumps(name)} = {json.dumps(value)}" for name, value in auth.items()),
        f'"x-service-team-id" = {json.dumps(ids["team"])}',
        "",
        "[parameters]",
        *(f'"path.{name}" = {json.dumps(value)}' for name, value in common.items()),
    ]
    if document == "console":
        return "\n".join(lines + console_pages(ids, person)) + "\n"
    for name, parameters in by_operation.items():
        values = ", ".join(f"{json.dumps(k)} = {json.dumps(v)}" for k, v in parameters.items())
        lines += ["", "[[operations]]", f"include-name = {json.dumps(name)}"]
        lines += [f"parameters = {{ {values} }}"]
    for prefix, value in by_prefix.items():
        lines += [
            "",
            "[[operations]]",
            f"include-path-regex = {json.dumps(prefix)}",
            f'parameters = {{ "path.id" = {json.dumps(value)} }}',
        ]
    return "\n".join(lines) + "\n"


def console_pages(ids: dict[str, str], person: dict[str, str]) -> list[str]:
    """The console's pages, asked as the person, with the seeded id each `{id}` names."""
    headers = ", ".join(
        f"{json.dumps(k)} = {json.dumps(v)}" for k, v in {"Authorization": "", **person}.items()
    )
    lines = []
    for prefix, value in CONSOLE_PAGES.items():
        lines += ["", "[[operations]]", f"include-path-regex = {json.dumps(prefix)}"]
        lines += [f"headers = {{ {headers} }}"]
        if value:
            lines += [f'parameters = {{ "path.id" = {json.dumps(ids[value])} }}']
    return lines


# The console's pages by path: which seeded id an `{id}` names (one entry matches each page)
CONSOLE_PAGES = {
    "^/console/packs/": "pack",
    "^/console/rendered/": "rendered",
    "^/console/(?!packs/|rendered/)": "",
}


def location(stack: Any, document: str, folder: Path) -> list[str]:
    """Where schemathesis reads the document: the API's as served, the console's from a file
    (served nowhere), against the stack's URL."""
    if document == "api":
        return [f"{stack.base_url}/openapi.json"]
    written = folder / "console-openapi.json"
    written.write_text(json.dumps(build_openapi(stack.base_url, "console")))
    return [str(written), "--url", stack.base_url]


@pytest.mark.parametrize("document", ["api", "console"])
async def test_schemathesis_finds_no_server_error_and_no_conformance_failure(
    stack: Any, actors: Any, tmp_path: Path, document: str
) -> None:
    owner = await actors.agent()
    ids = await seed(owner)
    person: Actor = await actors.human()
    await join_team(owner, ids["team"], person, "manager")
    config_file = tmp_path / "schemathesis.toml"
    config_file.write_text(config(ids, owner.auth, person.auth, document))
    report = tmp_path / "report"
    command = [
        str(Path(sys.executable).with_name("schemathesis")),
        "--config-file",
        str(config_file),
        "run",
        *location(stack, document, tmp_path),
        "--phases",
        PHASES,
        "--max-examples",
        str(EXAMPLES),
        "--checks",
        "all",
        "--workers",
        "1",
        "--no-shrink",
        "--generation-database",
        "none",
        "--report",
        "junit",
        "--report-dir",
        str(report),
        *(arg for path in EXCLUDED for arg in ("--exclude-path", path)),
    ]
    # the runner is another process: this loop keeps serving the API while it runs
    # run in the test's own directory: schemathesis keeps a cache where it runs
    hooks = {"SCHEMATHESIS_HOOKS": "live_hooks", "PYTHONPATH": str(Path(__file__).parent)}
    process = await asyncio.create_subprocess_exec(
        *command,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        cwd=tmp_path,
        env={**os.environ, **hooks},
    )
    output, _ = await process.communicate()
    text = output.decode(errors="replace")
    kept = os.environ.get("CAIRN_FUZZ_LIVE_LOG")  # one log per document
    log = Path(f"{kept}.{document}") if kept else tmp_path / "run.log"
    await asyncio.to_thread(log.write_text, text)
    assert process.returncode == 0, text[-20000:]
