"""One home per task type: its declaration in `schemas/kernel/task_types.py` is the only place
that names it. Code elsewhere asks the type's properties (hooks, `continuable`, ...)."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import get_args

from api.task_type_checks import COMPLETE_CHECKS, CREATE_CHECKS
from schemas.kernel.task_types import TASK_TYPE_NAMES, TASK_TYPES, CompleteHook, CreateHook

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("schemas", "workflows", "activities", "api", "infra", "workers", "client", "toolserver")
HOME = ROOT / "schemas" / "kernel" / "task_types.py"


def _docstrings(tree: ast.Module) -> set[int]:
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
        # an attribute's docstring: a bare string statement after an assignment
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            found.add(id(node.value))
    return found


def type_name_literals(source: str, names: tuple[str, ...]) -> list[tuple[int, str]]:
    """(line, name) for every string literal, docstrings aside, that is a type's name or holds
    it as a word (an f-string's text parts included)."""
    tree = ast.parse(source)
    skip = _docstrings(tree)
    hits = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            for name in names:
                if _names(node.value, name):
                    hits.append((node.lineno, name))
    return hits


def _names(text: str, name: str) -> bool:
    words = "".join(c if c.isalnum() or c == "_" else " " for c in text).split()
    return name in words


def _modules() -> list[Path]:
    paths = [p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))]
    return [*paths, ROOT / "cairn.py"]


def test_no_type_name_outside_its_home() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{line}: {name}"
        for path in _modules()
        if path != HOME
        for line, name in type_name_literals(path.read_text(), TASK_TYPE_NAMES)
    ]
    assert found == []


def test_the_walk_finds_a_name_in_code_but_not_in_a_docstring() -> None:
    source = '''"""a judge_pack doc"""
def f(t):
    """judge_pack again"""
    return t == "judge_pack" or f"a {t} render_pack task"
'''
    assert type_name_literals(source, TASK_TYPE_NAMES) == [(4, "judge_pack"), (4, "render_pack")]


def test_every_declared_hook_has_one_implementation() -> None:
    assert set(CREATE_CHECKS) == set(get_args(CreateHook))
    assert set(COMPLETE_CHECKS) == set(get_args(CompleteHook))
    used = {h for t in TASK_TYPES for h in (*t.create_hooks, *t.complete_hooks)}
    assert used == set(get_args(CreateHook)) | set(get_args(CompleteHook))


def test_every_type_declares_a_skill() -> None:
    for task_type in TASK_TYPES:
        assert task_type.skill.name and task_type.skill.description
        assert task_type.skill.tags
