"""Problem codes live in one catalogue (`schemas/errors.py`, DECISIONS "Trust at the edges").

Walks the service's code with `ast` and fails on a problem code written anywhere else: a string
passed as `code=` (`NotFound("...", code="team-not-found")`), a string given to a helper that
forwards its `code` parameter to a problem, a `*_CODE` constant spelling a catalogue code, or a
code (through a constant or `Entry.code`) that the catalogue does not hold or that it answers
with another status than the class raising it. Raise the catalogue's class instead
(`TeamNotFound("...")`); `/work/wt/ops-codemod.py` rewrites such sites mechanically.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import api.app  # noqa: F401  (registers every route)
from api.endpoint import ENDPOINTS
from api.spec import EndpointSpec
from schemas import errors
from schemas.errors import (
    Conflict,
    DomainError,
    Forbidden,
    Gone,
    NotFound,
    Unauthorized,
    ValidationFailed,
)

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("api", "schemas", "workflows", "activities", "infra", "client", "toolserver", "workers")
CATALOGUE = ROOT / "schemas" / "errors.py"
CLASSES: dict[str, type[DomainError]] = {
    name: value
    for name, value in vars(errors).items()
    if isinstance(value, type) and issubclass(value, DomainError)
}
# families: a raise site names the specific condition, a subclass of one of these
GENERIC = {
    cls.__name__
    for cls in (DomainError, ValidationFailed, Unauthorized, Forbidden, NotFound, Conflict, Gone)
}


def sources() -> Iterator[tuple[str, ast.Module]]:
    paths = [p for package in PACKAGES for p in sorted((ROOT / package).rglob("*.py"))]
    for path in [*paths, ROOT / "cairn.py"]:
        if path != CATALOGUE:
            yield str(path.relative_to(ROOT)), ast.parse(path.read_text(), str(path))


def constants(tree: ast.Module) -> dict[str, ast.expr]:
    found: dict[str, ast.expr] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        else:
            continue
        if isinstance(target, ast.Name):
            found[target.id] = value
    return found


def is_literal(node: ast.expr) -> bool:
    return isinstance(node, ast.JoinedStr) or (
        isinstance(node, ast.Constant) and isinstance(node.value, str)
    )


def entry_code(node: ast.expr) -> str | None:
    """The code of `Entry.code`, None for anything else."""
    if not (isinstance(node, ast.Attribute) and node.attr == "code"):
        return None
    if isinstance(node.value, ast.Name) and node.value.id in CLASSES:
        return CLASSES[node.value.id].code
    return None


def helpers(tree: ast.Module) -> dict[str, tuple[type[DomainError], int]]:
    """Module-level functions forwarding their `code` parameter to a problem class:
    name → (that class, the parameter's position)."""
    found = {}
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef):
            continue
        names = [a.arg for a in node.args.args]
        if "code" not in names:
            continue
        for call in ast.walk(node):
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Name):
                forwards = any(
                    k.arg == "code" and isinstance(k.value, ast.Name) and k.value.id == "code"
                    for k in call.keywords
                )
                if forwards and call.func.id in CLASSES:
                    found[node.name] = (CLASSES[call.func.id], names.index("code"))
    return found


def advice(code: str, raised_as: type[DomainError] | None) -> str:
    known = DomainError.registry.get(code)
    if known is not None and (raised_as is None or known.status == raised_as.status):
        return f"use {known.__name__} from schemas.errors (run /work/wt/ops-codemod.py)"
    if known is not None:
        return (
            f"the catalogue answers {code!r} with {known.status} ({known.__name__}), not "
            f"{raised_as.status if raised_as else '?'}: one code, one status"
        )
    base = raised_as.__name__ if raised_as else "DomainError"
    name = "".join(part.capitalize() for part in code.split("-"))
    return (
        f"add to schemas/errors.py: class {name}({base}): "
        f'"""<its meaning for a client developer>.""" code = "{code}"; title = "<title>"'
    )


def offences(where: str, tree: ast.Module) -> Iterator[str]:
    local = constants(tree)
    forwarding = helpers(tree)

    def code_of(node: ast.expr) -> str | None:
        if isinstance(node, ast.Name) and node.id in local:
            node = local[node.id]
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        return entry_code(node)

    for name, value in local.items():
        if name.endswith("_CODE") and is_literal(value) and code_of(value) in DomainError.registry:
            yield f"{where}:{value.lineno}: {name} spells a problem code: refer to Entry.code"
    for helper in tree.body:
        if not (isinstance(helper, ast.FunctionDef) and helper.name in forwarding):
            continue
        for arg, default in zip(helper.args.args[::-1], helper.args.defaults[::-1], strict=False):
            if arg.arg == "code" and is_literal(default):
                literal = code_of(default) or ast.unparse(default)
                helper_class = forwarding[helper.name][0]
                yield f"{where}:{default.lineno}: code literal {literal!r}: " + advice(
                    literal, helper_class
                )
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
            continue
        raised_as = CLASSES.get(node.func.id)
        given = next((k.value for k in node.keywords if k.arg == "code"), None)
        if node.func.id in forwarding:
            raised_as, position = forwarding[node.func.id]
            if given is None and position < len(node.args):
                given = node.args[position]
        if given is None:
            continue
        code = code_of(given)
        if is_literal(given):
            shown = code if code is not None else ast.unparse(given)
            yield f"{where}:{node.lineno}: code literal {shown!r}: " + advice(shown, raised_as)
        elif code is not None:
            known = DomainError.registry.get(code)
            if known is None or (raised_as is not None and known.status != raised_as.status):
                yield f"{where}:{node.lineno}: code {code!r}: " + advice(code, raised_as)


def built_class(node: ast.expr) -> str | None:
    """The catalogue class a call or a bare raise builds: `X(...)`, `errors.X(...)`, `X.at(...)`
    or `raise X`; None for anything else."""
    target = node.func if isinstance(node, ast.Call) else node
    if isinstance(target, ast.Attribute) and isinstance(node, ast.Call):
        owner = target.value
        if isinstance(owner, ast.Name) and owner.id in CLASSES:
            # a constructor classmethod, `ValidationFailed.at(...)`; `from_problem` rebuilds the
            # problem an activity raised, whatever its class
            return owner.id if target.attr != "from_problem" else None
        return target.attr if target.attr in CLASSES else None
    return target.id if isinstance(target, ast.Name) and target.id in CLASSES else None


def generic_raises(where: str, tree: ast.Module) -> Iterator[str]:
    """Constructions of a generic base, and `code=` given to any problem class. A module's own
    class of a catalogue name (the MCP gate's `Unauthorized`, an ASGI refusal) is not one."""
    own = {node.name for node in ast.walk(tree) if isinstance(node, ast.ClassDef)}
    for node in ast.walk(tree):
        built: str | None = None
        if isinstance(node, ast.Call):
            built = built_class(node)
            if built is not None and any(k.arg == "code" for k in node.keywords):
                yield f"{where}:{node.lineno}: code= given to {built}: raise the code's own class"
        elif isinstance(node, ast.Raise) and node.exc is not None:
            built = built_class(node.exc) if not isinstance(node.exc, ast.Call) else None
        if built in GENERIC and built not in own:
            yield (
                f"{where}:{node.lineno}: {built} is a family, not a condition: raise (or add to "
                f"schemas/errors.py) the specific subclass whose code names this condition"
            )


def test_generic_problems_are_not_raised_outside_the_catalogue() -> None:
    found = [line for where, tree in sources() for line in generic_raises(where, tree)]
    assert not found, "Generic problems built outside schemas/errors.py:\n" + "\n".join(found)


def test_the_generic_check_catches_each_construction() -> None:
    """A generic base called, called through its module, given to a classmethod or raised bare,
    and `code=` given to any problem, are each reported; a specific class, its `at` and catching
    a family are not."""
    source = """
NotFound("x")
errors.Conflict("x")
ValidationFailed.at("/a", "x")
raise Unauthorized
TeamNotFound("x", code=DiaryNotFound.code)
TeamNotFound("x")
ExpiryInPast.at("/expiresAt", "x")
try:
    pass
except NotFound:
    pass
isinstance(exc, Forbidden)
DomainError.from_problem(body)
"""
    reported = list(generic_raises("probe.py", ast.parse(source)))
    lines = sorted(int(line.split(":")[1]) for line in reported)
    assert lines == [2, 3, 4, 5, 6], reported
    assert all("TeamNotFound" not in line or "code=" in line for line in reported)


def test_a_field_problem_has_the_shape_of_a_validation_problem() -> None:
    """`Specific.at(pointer, message)`: the class's code and status, the message as detail and
    as the one field error under its pointer."""
    body = errors.ExpiryInPast.at("/expiresAt", "Must be in the future").to_problem()
    assert body.model_dump(exclude_none=True) == {
        "type": "/problems/expiry-in-past",
        "title": errors.ExpiryInPast.title,
        "status": 400,
        "code": "expiry-in-past",
        "detail": "Must be in the future",
        "errors": [{"pointer": "/expiresAt", "message": "Must be in the future"}],
    }


def test_problem_codes_are_written_only_in_the_catalogue() -> None:
    found = [line for where, tree in sources() for line in offences(where, tree)]
    assert not found, "Problem codes outside schemas/errors.py:\n" + "\n".join(found)


def test_the_check_catches_each_kind_of_offence() -> None:
    """The walk itself: a literal, a constant, a helper's literal default, a forwarded literal,
    an unknown code and a status that differs from the catalogue's are each reported; the
    catalogue's class, its `.code` and a constant that refers to it are not."""
    source = """
TEAM_GONE_CODE = "team-not-found"
def _invalid(message, code="validation-failed"):
    return ValidationFailed(message, code=code)
NotFound("x", code="team-not-found")
NotFound("x", code=TEAM_GONE_CODE)
Conflict("x", code="never-catalogued")
_invalid("x", "diary-not-found")
ValidationFailed("x", code=TeamNotFound.code)
TeamNotFound("x")
_invalid("x", ExpiryInPast.code)
"""
    reported = list(offences("probe.py", ast.parse(source)))
    lines = sorted(int(line.split(":")[1]) for line in reported)
    assert lines == [2, 3, 5, 7, 8, 9], reported
    assert any("use TeamNotFound" in line for line in reported)
    assert any("class NeverCatalogued(Conflict)" in line for line in reported)


def broad(cls: type[DomainError]) -> bool:
    """A class that stands for several conditions: a family, or a problem type others derive from
    (InvalidChallenge, RateLimited): declared, it hides which of them the route answers."""
    return cls.family or any(
        other is not cls and issubclass(other, cls) for other in CLASSES.values()
    )


def broad_declarations(specs: list[EndpointSpec]) -> list[str]:
    return [
        f"{spec.method} {spec.path}: {cls.__name__}"
        for spec in specs
        for cls in spec.errors
        if broad(cls)
    ]


def test_routes_declare_the_specific_problems_they_answer() -> None:
    """The API document lists a code for each problem a route declares (issue 34 §1): a family
    (`errors=(Conflict,)`) shows as "409 Conflict" with no code, and a client cannot tell which
    conflicts the route has. Declare the catalogue's specific classes the handler and what it
    runs raise. The console's pages are not walked: their document is no client's (api/spec.py
    `Document`), and api/console/kit.py gives each page the families of the refusals of the REST
    routes it runs (naming them would mean declaring which routes each page runs)."""
    found = broad_declarations([spec for spec in ENDPOINTS if spec.document == "api"])
    assert not found, "Routes declaring a family, not its specific problems:\n" + "\n".join(found)


def test_the_declaration_check_catches_a_family_and_a_base() -> None:
    """A family, and a problem type with subclasses, are each reported; a specific class is
    not."""
    spec = EndpointSpec(
        method="POST",
        path="/probe",
        operation_id="probe",
        summary="probe",
        tag="probe",
        errors=(Conflict, errors.InvalidChallenge, errors.TeamNotFound, Gone),
    )
    assert broad_declarations([spec]) == [
        "POST /probe: Conflict",
        "POST /probe: InvalidChallenge",
        "POST /probe: Gone",
    ]
