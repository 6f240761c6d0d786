"""A request's `Idempotency-Key` reaches its run as an object (`api.idempotency.RunKey`), minted
once by the route and passed as an argument: nothing about the key travels on the request.

Walked with `ast` over `api/`: every function that mints a key (`run_key(...)`) hands it to a
call that runs the work (`execute`, `start_with_update`, `run_team_write`, a helper of its
route), not only to the id helpers; a key that stopped there would name the run without
keying it (no fingerprint in its memo, a retry refused as a duplicate)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# the helpers that read a key to name things; a key given only to them never reaches the run
NAMING = frozenset({"new_id", "keyed_workflow_id"})


def _minted(function: ast.AST) -> set[str]:
    """The names a function binds to `run_key(...)`."""
    return {
        target.id
        for node in ast.walk(function)
        if isinstance(node, ast.Assign)
        and isinstance(node.value, ast.Call)
        and _called(node.value) == "run_key"
        for target in node.targets
        if isinstance(target, ast.Name)
    }


def _called(call: ast.Call) -> str:
    func = call.func
    return func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")


def _passed_to_a_run(function: ast.AST, name: str) -> bool:
    for node in ast.walk(function):
        if not isinstance(node, ast.Call) or _called(node) in NAMING | {"run_key"}:
            continue
        values = [*node.args, *(keyword.value for keyword in node.keywords)]
        if any(isinstance(v, ast.Name) and v.id == name for v in values):
            return True
    return False


def unpassed_keys(source: str, where: str) -> list[str]:
    tree = ast.parse(source)
    return [
        f"{where}:{function.name} mints {name} but no run gets it"
        for function in ast.walk(tree)
        if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef)
        for name in sorted(_minted(function))
        if not _passed_to_a_run(function, name)
    ]


def test_every_minted_key_reaches_its_run() -> None:
    paths = [p for p in sorted((ROOT / "api").rglob("*.py")) if p.name != "idempotency.py"]
    minting = [p for p in paths if "run_key(" in p.read_text()]
    assert len(minting) > 10  # the walk found the routes that mint keys
    found = [
        problem
        for path in minting
        for problem in unpassed_keys(path.read_text(), str(path.relative_to(ROOT)))
    ]
    assert found == []


def test_a_key_that_only_names_the_run_is_caught() -> None:
    forgotten = """
async def create(request):
    key = run_key(request, "thing")
    thing_id = new_id(key)
    return await execute(request, run, thing_id, workflow_id=f"thing/{thing_id}")
"""
    passed = forgotten.replace('workflow_id=f"thing/{thing_id}"', 'workflow_id="t", key=key')
    assert unpassed_keys(forgotten, "x") == ["x:create mints key but no run gets it"]
    assert unpassed_keys(passed, "x") == []
