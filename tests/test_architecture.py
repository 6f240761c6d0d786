"""The import rules of STYLE.md, held by walking every module's imports with `ast`."""

from __future__ import annotations

import ast
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# layer → module prefixes it must not import (STYLE.md "Who may import whom")
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "schemas": (
        "temporalio",
        "aiohttp",
        "asyncpg",
        "boto3",
        "onnxruntime",
        "workflows",
        "activities",
        "api",
        "infra",
        "workers",
        "client",
    ),
    # client I/O (starting workflows, making schedules) belongs to workers/ and api/, not here
    "workflows": ("api", "infra", "workers", "aiohttp", "asyncpg", "boto3", "temporalio.client"),
    "activities": ("api", "workflows", "workers", "aiohttp"),
    "api": ("activities", "workers"),
    "infra": ("api",),
    "workers": ("api",),
    "toolserver": ("infra", "activities", "workflows", "api"),
    "client": ("infra", "activities", "workflows", "api", "workers"),
}
# activities may name infra types for annotations only
TYPE_CHECKING_ONLY: dict[str, tuple[str, ...]] = {"activities": ("infra", "asyncpg")}


def _imports(tree: ast.Module) -> list[tuple[str, bool]]:
    """(module, under TYPE_CHECKING) for every import in the file."""
    found: list[tuple[str, bool]] = []
    guarded: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in ast.walk(node):
                guarded.add(id(child))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, id(node) in guarded) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.module, id(node) in guarded))
            # `from temporalio import client` imports the module temporalio.client too
            found += [
                (f"{node.module}.{alias.name}", id(node) in guarded)
                for alias in node.names
                if f"{node.module}.{alias.name}" in FORBIDDEN["workflows"]
            ]
    return found


def _modules(layer: str) -> list[Path]:
    return sorted((ROOT / layer).rglob("*.py"))


def _violations(layer: str) -> list[str]:
    problems = []
    for path in _modules(layer):
        for module, type_only in _imports(ast.parse(path.read_text())):
            banned = FORBIDDEN[layer]
            if type_only:
                banned = tuple(b for b in banned if b not in TYPE_CHECKING_ONLY.get(layer, ()))
            elif any(module.startswith(p) for p in TYPE_CHECKING_ONLY.get(layer, ())):
                problems.append(f"{path.relative_to(ROOT)}: {module} outside TYPE_CHECKING")
                continue
            if any(module == b or module.startswith(b + ".") for b in banned):
                problems.append(f"{path.relative_to(ROOT)} imports {module}")
    return problems


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_layer_imports(layer: str) -> None:
    assert _modules(layer), f"layer {layer} has no modules"
    assert _violations(layer) == []


def test_rules_catch_a_violation(tmp_path: Path) -> None:
    """The checker itself fails on a forbidden import (so the test above can fail)."""
    tree = ast.parse("import asyncpg\nfrom typing import TYPE_CHECKING\n")
    assert ("asyncpg", False) in _imports(tree)
    guarded = ast.parse("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import asyncpg\n")
    assert ("asyncpg", True) in _imports(guarded)


def test_client_io_under_workflows_is_caught(tmp_path: Path) -> None:
    """A schedule made (or a workflow started) from workflows/ fails the layer rule."""
    for source in ("from temporalio.client import Client\n", "from temporalio import client\n"):
        modules = [module for module, _ in _imports(ast.parse(source))]
        assert any(
            module == banned or module.startswith(banned + ".")
            for module in modules
            for banned in FORBIDDEN["workflows"]
        ), source


def _imported_modules(path: Path) -> set[str]:
    """Every module the file imports, late (inside a function) or not."""
    return {module for module, _ in _imports(ast.parse(path.read_text()))}


def _module_name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts)


def _route_imports_of_routes(paths: list[Path]) -> list[str]:
    return [
        f"{_module_name(path)} imports {module}"
        for path in paths
        for module in sorted(_imported_modules(path))
        if module.startswith("api.routes.")
    ]


def test_routes_are_leaves() -> None:
    """A route module imports no other route module: what two routes share (loaders,
    permission helpers) lives in `api/access.py` or another module of `api/`."""
    routes = [p for p in _modules("api") if p.parent.name == "routes"]
    assert routes
    assert _route_imports_of_routes(routes) == []


# What the console may not use: it is a door to the REST routes (api.endpoint.invoke), so it
# reads no table, starts no workflow and opens no connection of its own.
CONSOLE_FORBIDDEN = ("infra", "workflows", "activities", "asyncpg", "temporalio", "api.flows")


def test_the_console_reaches_data_only_through_the_rest_routes() -> None:
    console = [p for p in _modules("api") if "console" in p.relative_to(ROOT).parts[:2]]
    assert console
    found = [
        f"{_module_name(path)} imports {module}"
        for path in console
        for module in sorted(_imported_modules(path))
        if any(module == banned or module.startswith(banned + ".") for banned in CONSOLE_FORBIDDEN)
    ]
    assert found == []


# A door calls a route with the route's own models (`TeamPath(id=...)`, its query model, its
# body model), which mypy checks against the handler's `Parsed[...]`; a dict would be checked by
# nothing until the request runs. The calls that take a route's parts (the console's `act`,
# A2A's `_call`, `invoke` under both), and the parts.
ROUTE_CALLS = frozenset({"act", "_call", "invoke"})
ROUTE_PARTS = frozenset({"body", "query", "path"})


def _is_dict(node: ast.expr) -> bool:
    """A dict literal, comprehension or `dict(...)`, or a `|` of one."""
    if isinstance(node, ast.Dict | ast.DictComp):
        return True
    if isinstance(node, ast.BinOp):
        return _is_dict(node.left) or _is_dict(node.right)
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict"


def _dicts_named(scope: ast.AST) -> set[str]:
    """The names a scope binds to a dict (`rest_path = {...}`; `body: dict[...] = {...}`)."""
    names: set[str] = set()
    for node in ast.walk(scope):
        if isinstance(node, ast.Assign) and _is_dict(node.value):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and node.value is not None
            and _is_dict(node.value)
        ):
            names.add(node.target.id)
    return names


def dict_parts(source: str, where: str) -> list[str]:
    """Each call of a route (`act`, `_call`, `invoke`) whose body, query or path is a dict:
    written in the call, or a name its function bound to one."""
    found: list[str] = []
    tree = ast.parse(source)
    scopes = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    for scope in scopes:
        named = _dicts_named(scope)
        for node in ast.walk(scope):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
            if name not in ROUTE_CALLS:
                continue
            for keyword in node.keywords:
                value = keyword.value
                if keyword.arg in ROUTE_PARTS and (
                    _is_dict(value) or (isinstance(value, ast.Name) and value.id in named)
                ):
                    found.append(f"{where}:{node.lineno} {name}({keyword.arg}=a dict)")
    return sorted(set(found))


def test_the_doors_call_routes_with_their_models() -> None:
    console = [p for p in _modules("api") if "console" in p.relative_to(ROOT).parts[:2]]
    assert console
    found = [
        problem
        for path in [*console, ROOT / "api" / "a2a.py"]
        for problem in dict_parts(path.read_text(), str(path.relative_to(ROOT)))
    ]
    assert found == []


def test_a_dict_given_to_a_route_is_found() -> None:
    """The check above finds each way a dict is handed to a route (so its empty answer means
    something)."""
    source = """
async def page(request):
    rest_path = {"id": "1"}
    body: dict[str, str] = {"name": "x"}
    await act(request, teams.get_team, path={"id": "1"})
    await act(request, teams.get_team, path=rest_path)
    await invoke(request, teams.create_team, body=body, query=dict(limit=5))
    await act(request, teams.list_teams, query={"limit": 5} | extra)
    await act(request, teams.get_team, path=TeamPath(id=team_id))
"""
    assert dict_parts(source, "x.py") == [
        "x.py:5 act(path=a dict)",
        "x.py:6 act(path=a dict)",
        "x.py:7 invoke(body=a dict)",
        "x.py:7 invoke(query=a dict)",
        "x.py:8 act(query=a dict)",
    ]


# A2A is a door like the console: its mapping (api/a2a.py) reaches tasks only through the
# routes (api.endpoint.invoke) and the rows its route module reads for it (api/routes/a2a.py).
A2A_FORBIDDEN = CONSOLE_FORBIDDEN
# One web framework in the API process: aiohttp. The SDK's JSON-RPC and REST dispatchers are
# Starlette handlers, so none of them (nor Starlette itself) is imported by api/.
SECOND_FRAMEWORK = ("starlette", "sse_starlette", "fastapi", "a2a.server.routes", "a2a.server.apps")


def _banned_imports(paths: list[Path], banned: tuple[str, ...]) -> list[str]:
    return [
        f"{_module_name(path)} imports {module}"
        for path in paths
        for module in sorted(_imported_modules(path))
        if any(module == b or module.startswith(b + ".") for b in banned)
    ]


def test_a2a_reaches_data_only_through_the_route_layer() -> None:
    assert _banned_imports([ROOT / "api" / "a2a.py"], A2A_FORBIDDEN) == []


def test_the_api_runs_one_web_framework() -> None:
    assert _banned_imports(_modules("api"), SECOND_FRAMEWORK) == []


def test_the_door_checks_can_fail() -> None:
    """A door that reads a repository, or a module that mounts the SDK's Starlette dispatcher,
    is caught."""
    reads = ast.parse("from infra.repos import task_reads\n")
    mounts = ast.parse("from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher\n")
    read_modules = [module for module, _ in _imports(reads)]
    mount_modules = [module for module, _ in _imports(mounts)]
    assert any(m.startswith(b) for m in read_modules for b in A2A_FORBIDDEN)
    assert any(m.startswith(b) for m in mount_modules for b in SECOND_FRAMEWORK)


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import cycles of a module graph (each found once from its first module)."""
    found: list[list[str]] = []

    def walk(module: str, trail: list[str]) -> None:
        for target in sorted(graph.get(module, ())):
            if target == trail[0]:
                found.append([*trail, target])
            elif target not in trail and target > trail[0]:
                walk(target, [*trail, target])

    for start in sorted(graph):
        walk(start, [start])
    return found


def test_api_modules_import_no_cycle() -> None:
    """No two modules of `api/` import each other, directly or around a loop, even late."""
    paths = _modules("api")
    names = {_module_name(p) for p in paths}
    graph = {_module_name(p): _imported_modules(p) & names for p in paths}
    assert _cycles(graph) == []


def test_the_route_and_cycle_checks_can_fail(tmp_path: Path) -> None:
    route = tmp_path / "api" / "routes" / "packs.py"
    route.parent.mkdir(parents=True)
    route.write_text("def f() -> None:\n    from api.routes.diaries import can_read\n")
    assert _imported_modules(route) == {"api.routes.diaries"}
    assert _cycles({"api.a": {"api.b"}, "api.b": {"api.a"}}) == [["api.a", "api.b", "api.a"]]
    assert _cycles({"api.a": {"api.b"}, "api.b": set()}) == []


def _imports_named_sql(path: Path) -> bool:
    """Whether the module imports the named SQL (`infra.db.Q`): it would read rows itself."""
    return any(
        isinstance(node, ast.ImportFrom)
        and node.module == "infra.db"
        and any(alias.name == "Q" for alias in node.names)
        for node in ast.walk(ast.parse(path.read_text()))
    )


def test_the_api_never_sees_a_row() -> None:
    """Every API read is a typed function of `infra/repos/` returning models: no `Q` in api/."""
    offenders = [str(p.relative_to(ROOT)) for p in _modules("api") if _imports_named_sql(p)]
    assert offenders == []


def test_the_named_sql_check_can_fail(tmp_path: Path) -> None:
    (tmp_path / "route.py").write_text("from infra.db import Q, create_pool\n")
    (tmp_path / "app.py").write_text("from infra.db import create_pool\n")
    assert _imports_named_sql(tmp_path / "route.py")
    assert not _imports_named_sql(tmp_path / "app.py")


def _built_workflow_ids(path: Path) -> list[str]:
    """Workflow ids a module writes as f-strings (`workflow_id=f"..."`, `id=f"..."`) instead of
    calling the builder beside the workflow."""
    return [
        f"{path.name}:{node.lineno}"
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.keyword)
        and node.arg in ("id", "workflow_id")
        and isinstance(node.value, ast.JoinedStr)
    ]


def test_routes_take_workflow_ids_from_their_builders() -> None:
    offenders = [found for path in _modules("api") for found in _built_workflow_ids(path)]
    assert offenders == []


def test_the_workflow_id_check_can_fail(tmp_path: Path) -> None:
    route = tmp_path / "route.py"
    route.write_text('start(run, workflow_id=f"diaries/{d}/update")\nstart(id=diary_id(d))\n')
    assert _built_workflow_ids(route) == ["route.py:1"]


# A caller's membership of a team is asked through `api.access` (`require_team_visible`,
# `is_team_member`), so the 404 a non-member gets is decided in one place. Asking it of
# another subject (an agent a key is minted for) is not the caller's visibility.
MEMBERSHIP_OF_ANOTHER = {"agent_keys.py"}


def _hand_written_team_checks(path: Path) -> list[str]:
    """Calls that pass the membership permission ("verify_claim") themselves."""
    return [
        f"{path.name}:{node.lineno}"
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call)
        and any(isinstance(a, ast.Constant) and a.value == "verify_claim" for a in node.args)
    ]


def test_routes_check_team_membership_through_the_one_guard() -> None:
    routes = [p for p in _modules("api") if p.parent.name in ("routes", "console")]
    offenders = [
        found
        for path in routes
        if path.name not in MEMBERSHIP_OF_ANOTHER
        for found in _hand_written_team_checks(path)
    ]
    assert offenders == []


def test_the_team_guard_check_can_fail(tmp_path: Path) -> None:
    route = tmp_path / "route.py"
    route.write_text('if not await allowed(request, "Team", t, "verify_claim"):\n    pass\n')
    assert _hand_written_team_checks(route) == ["route.py:1"]


def _refusal_carriers(path: Path) -> list[str]:
    """Exception classes a repository defines for itself: a refusal smuggled out of its
    transaction and turned into a problem further up, instead of raised as the problem."""
    return [
        f"{path.name}:{node.lineno}"
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ClassDef)
        and any(ast.unparse(base).endswith(("Exception", "Error")) for base in node.bases)
    ]


def test_repositories_raise_the_catalogues_problems() -> None:
    """docs/contributing.md "Where a rule lives": a repository raises the problem itself."""
    offenders = [found for path in _modules("infra/repos") for found in _refusal_carriers(path)]
    assert offenders == []


def test_the_refusal_carrier_check_can_fail(tmp_path: Path) -> None:
    repo = tmp_path / "repo.py"
    repo.write_text("class _Refused(Exception):\n    pass\n")
    assert _refusal_carriers(repo) == ["repo.py:1"]


def test_no_package_named_mcp() -> None:
    """A local package named `mcp` would shadow the MCP SDK."""
    assert not (ROOT / "mcp").exists()
    assert not (ROOT / "toolserver" / "mcp").exists()


def test_workflows_do_not_use_wall_clock_or_randomness() -> None:
    banned = ("datetime.now", "time.time", "uuid.uuid4", "random.")
    offenders = [
        f"{path.name}: {word}"
        for path in _modules("workflows")
        for word in banned
        if word in path.read_text()
    ]
    assert offenders == []


def _our_top_level_names() -> set[str]:
    """The import names pyproject.toml installs: the layer packages and the `cairn` module."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    packages = {pattern.rstrip("*") for pattern in config["packages"]["find"]["include"]}
    return packages | set(config["py-modules"])


def _shadowed(names: set[str], owners: dict[str, list[str]]) -> dict[str, list[str]]:
    return {
        name: theirs for name in names if (theirs := sorted(set(owners.get(name, [])) - {"cairn"}))
    }


def test_the_layout_is_the_design_cards() -> None:
    assert _our_top_level_names() == set(FORBIDDEN) | {"cairn"}
    assert all((ROOT / name / "__init__.py").exists() for name in FORBIDDEN)


def test_no_other_distribution_ships_our_top_level_names() -> None:
    """Our layers have generic names (`api`, `client`, `schemas`): a dependency that installs a
    package of the same name would shadow ours, or be shadowed, depending on sys.path order."""
    assert _shadowed(_our_top_level_names(), metadata.packages_distributions()) == {}


def test_the_shadowing_check_can_fail() -> None:
    owners = {"api": ["cairn", "someone-elses-api"], "client": ["cairn"]}
    assert _shadowed({"api", "client"}, owners) == {"api": ["someone-elses-api"]}
