"""The apps' pure parts: the diary map's projection (deterministic, scaled, axis signs fixed),
the login's `next` rule (paths on this origin only), and the pages being self-contained."""

from __future__ import annotations

import re

import numpy as np
import pytest

from api.console.pages import HomeQuery
from infra.projection import project
from schemas.apps import APP_NAMES, BRIDGE_MARK, app_html, is_local_path
from schemas.limits import CONSOLE_NEXT_MAX_CHARS


def _clusters(seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(3, 384))
    points = np.concatenate([c + 0.05 * rng.normal(size=(50, 384)) for c in centres])
    return (points / np.linalg.norm(points, axis=1, keepdims=True)).astype(np.float32)


def test_the_projection_is_deterministic_and_fits_the_unit_square() -> None:
    vectors = _clusters(1)
    first, second = project(vectors), project(vectors.copy())
    assert first.shape == (150, 2)
    assert np.array_equal(first, second)
    assert np.abs(first).max() == pytest.approx(1.0)


def test_the_projection_keeps_clusters_apart() -> None:
    points = project(_clusters(2))
    centres = [points[i * 50 : (i + 1) * 50].mean(axis=0) for i in range(3)]
    spread = max(
        float(np.linalg.norm(points[i * 50 : (i + 1) * 50] - centres[i], axis=1).max())
        for i in range(3)
    )
    gaps = [float(np.linalg.norm(centres[a] - centres[b])) for a, b in ((0, 1), (0, 2), (1, 2))]
    assert min(gaps) > spread


def test_the_projection_of_tiny_diaries() -> None:
    assert project(np.zeros((0, 384), dtype=np.float32)).shape == (0, 2)
    assert project(np.ones((2, 384), dtype=np.float32)).tolist() == [[0.0, 0.0], [0.0, 0.0]]


@pytest.mark.parametrize("target", ["/console/", "/oauth2/consent?challenge=a%2Fb", "/"])
def test_local_paths_are_accepted(target: str) -> None:
    assert is_local_path(target)
    assert HomeQuery(next=target).next == target


@pytest.mark.parametrize(
    "target",
    [
        "https://evil.example/",
        "//evil.example/x",
        "/\\evil.example",
        "javascript:alert(1)",
        "console/",
        "/ok\nSet-Cookie: x",
        "",
        "/" + "a" * CONSOLE_NEXT_MAX_CHARS,
    ],
)
def test_anything_else_is_refused(target: str) -> None:
    assert not is_local_path(target)
    with pytest.raises(ValueError):
        HomeQuery(next=target)


@pytest.mark.parametrize("name", APP_NAMES)
def test_the_pages_are_self_contained(name: str) -> None:
    page = app_html(name)
    assert BRIDGE_MARK not in page and "const Bridge" in page
    assert not re.search(r"<(script|link|img)[^>]+(src|href)=", page)
    assert "http://" not in page and "https://" not in page
    assert "fetch(" not in page and "XMLHttpRequest" not in page
