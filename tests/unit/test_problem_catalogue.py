"""The problem catalogue (`schemas/errors.py`): one entry per code, each with one status, a title
and a meaning for client developers; the MCP server reports a code with the status REST answers.
"""

from __future__ import annotations

import re

import pytest

from api.routes.identity import CHALLENGE_REFUSED
from client.rest import ApiError
from schemas.errors import (
    AuthenticationRequired,
    Conflict,
    DomainError,
    Forbidden,
    Gone,
    InvalidChallenge,
    NotFound,
    PermissionDenied,
    RequestInvalid,
    RouteNotFound,
    TeamNotFound,
    Unauthorized,
    ValidationFailed,
    problem_type,
    problem_types,
    type_uri,
)
from schemas.kernel.crypto import RecoveryFailure
from toolserver.registry import refused, rest_problem

CODE = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*")
BASE_URL = "https://cairn.example.com"


def test_every_problem_type_has_a_code_a_status_a_title_and_a_meaning() -> None:
    for problem in problem_types():
        assert CODE.fullmatch(problem.code), problem
        assert 400 <= problem.status <= 599, problem
        assert problem.title and problem.title[-1] != ".", problem
        meaning = problem.meaning()
        assert meaning.endswith("."), f"{problem.__name__} needs a docstring: its meaning"
        assert problem_type(problem.code) is problem


def test_a_code_belongs_to_one_problem_type() -> None:
    with pytest.raises(TypeError, match="diary-not-found"):

        class AnotherDiaryNotFound(NotFound):  # pragma: no cover - refused when defined
            code = "diary-not-found"


FAMILIES = (DomainError, ValidationFailed, Unauthorized, Forbidden, NotFound, Conflict, Gone)


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.__name__)
def test_a_family_is_abstract(family: type[DomainError]) -> None:
    """A family has no code, is no entry of the catalogue and is not raised itself."""
    assert family.family and not hasattr(family, "code")
    assert family not in problem_types()
    with pytest.raises(TypeError, match="is a family"):
        family("detail")


def test_the_reference_slugs_name_their_specific_conditions() -> None:
    """The reference service's broad codes stay (its clients check them), each answered by the
    one condition it names."""
    assert problem_type("validation-failed") is RequestInvalid
    assert problem_type("unauthorized") is AuthenticationRequired
    assert problem_type("forbidden") is PermissionDenied
    assert problem_type("not-found") is RouteNotFound
    assert problem_type("conflict") is None and problem_type("gone") is None


def test_a_problem_type_declares_its_own_code() -> None:
    with pytest.raises(TypeError, match="its own code"):

        class TeamNotFoundAgain(TeamNotFound):  # pragma: no cover - refused when defined
            title = "No such team"


def test_a_carried_problem_of_an_unknown_code_is_rebuilt_as_its_family() -> None:
    """An activity of a newer version may raise a code this one does not know: it keeps its
    code and is caught as its family."""
    body = {"type": "/problems/x", "title": "X", "status": 409, "code": "newer-conflict"}
    rebuilt = DomainError.from_problem(body)
    assert type(rebuilt) is Conflict
    assert rebuilt.to_problem().code == "newer-conflict"


def test_the_type_uri_is_where_the_catalogue_describes_the_code() -> None:
    assert type_uri(BASE_URL + "/", "diary-not-found") == f"{BASE_URL}/problems/diary-not-found"
    problem = problem_type("diary-not-found")
    assert problem is not None
    assert problem("gone").to_problem(BASE_URL).type == f"{BASE_URL}/problems/diary-not-found"


def test_every_recovery_refusal_is_a_catalogued_invalid_challenge() -> None:
    """The recovery route answers each reason with its own `InvalidChallenge`, one code each."""
    answered = [CHALLENGE_REFUSED[reason] for reason in RecoveryFailure]
    assert all(issubclass(problem, InvalidChallenge) for problem in answered)
    assert len({problem.code for problem in answered}) == len(RecoveryFailure)


@pytest.mark.parametrize("problem", problem_types(), ids=lambda p: p.code)
def test_mcp_reports_a_code_with_the_status_rest_answers(problem: type[DomainError]) -> None:
    """A REST problem becomes a tool error with the same code and status, and a check the MCP
    server makes itself reports its catalogue entry the same way."""
    rest = problem("detail").to_problem(BASE_URL).model_dump(mode="json", exclude_none=True)
    assert (rest["code"], rest["status"]) == (problem.code, problem.status)
    for result in (rest_problem(ApiError(rest["status"], rest)), refused(problem("detail"))):
        assert result.is_error
        assert result.structured_content is not None
        mcp = result.structured_content
        assert (mcp["code"], mcp["status"]) == (problem.code, problem.status)
