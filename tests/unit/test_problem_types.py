"""Every problem type the code can emit is documented where its `type` points: in the registry that
every target serves at /problems/<slug> and that docs/problems.md is generated from."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import flask
import pytest

import signup_verification
from signup_verification.api import edge, problem_types
from signup_verification.api.confirm import RENDERINGS
from signup_verification.api.problems import Problem
from support.paths import ROOT

PACKAGE = Path(signup_verification.__file__).resolve().parent
# Where a slug is not a literal at the call: the module, and every slug that can arrive there.
DYNAMIC = {
    "api/confirm.py": {r.problem[0] for r in RENDERINGS.values() if r.problem},
    "api/edge.py": {"payload-too-large", "http-error"},  # Flask's own errors (_http_error)
    "api/create.py": "Refused",  # a refusal of the create policy: verifications/abuse.py's Refused(slug, ...)
    "verifications/create.py": "Refused",  # passes a Refused on
}


def _calls(name: str) -> list[tuple[str, ast.expr]]:
    """(module, slug argument) of every call of `name` in the package: Problem(status, slug, ...),
    Refused(slug, ...)."""
    found = []
    position = 1 if name == "Problem" else 0
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and len(node.args) > position:
                func = node.func
                called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
                if called == name:
                    found.append((path.relative_to(PACKAGE).as_posix(), node.args[position]))
    return found


def served_refusals() -> set[str]:
    """The slugs of the refusals gunicorn answers before any target code runs (platform/serving.py)."""
    from gunicorn.http.errors import LimitRequestHeaders, LimitRequestLine

    from signup_verification.platform import gunicorn_worker

    assert gunicorn_worker.PROBLEM_BASE == problem_types.BASE
    refusals = [gunicorn_worker.RequestTimeout("head"), LimitRequestLine(9000, 8190), LimitRequestHeaders("many")]
    return {gunicorn_worker._refusal(exc)[2] for exc in refusals}  # type: ignore[index]


def emitted() -> set[str]:
    refused = {a.value for _, a in _calls("Refused") if isinstance(a, ast.Constant)}
    slugs: set[str] = set()
    for module, argument in _calls("Problem") + _calls("Refused"):
        if isinstance(argument, ast.Constant):
            slugs.add(argument.value)
            continue
        assert module in DYNAMIC, f"{module}: a slug that is no literal: name what can arrive there in DYNAMIC"
        slugs |= refused if DYNAMIC[module] == "Refused" else set(DYNAMIC[module])
    return slugs | served_refusals()


def test_every_type_the_code_can_emit_is_documented_and_every_documented_one_is_emitted():
    slugs = emitted()
    assert {"rate-limited", "verification-finished", "sms-country-not-allowed", "http-error"} <= slugs  # seen
    assert slugs - set(problem_types.TYPES) == set(), "emitted but not in api/problem_types.py"
    assert set(problem_types.TYPES) - slugs == set(), "documented but never emitted"


def test_a_problem_points_at_its_documentation():
    body = Problem(429, "rate-limited", "Too many").body()
    assert body["type"] == "/problems/rate-limited" == problem_types.TYPES["rate-limited"].uri


def test_docs_problems_md_lists_every_type_under_its_uri():
    text = (ROOT / "docs" / "problems.md").read_text()
    for t in problem_types.TYPES.values():
        assert re.search(rf'<a id="{t.slug}"></a>`{re.escape(t.uri)}`', text), t.slug


@pytest.fixture
def client():
    app = flask.Flask("probe")
    edge.configure(app, 1000)
    app.add_url_rule("/", "target", lambda: "the target", methods=["GET", "POST"])
    app.add_url_rule("/<path:rest>", "any", lambda rest: "the target", methods=["GET", "POST"])
    return app.test_client()


def test_every_target_serves_the_page_a_type_points_at(client):
    page = client.get("/problems/verification-finished")
    assert page.status_code == 200 and page.mimetype == "text/html"
    text = page.get_data(as_text=True)
    assert (
        "This verification can no longer be confirmed" in text
        and "<code>/problems/verification-finished</code>" in text
    )
    assert "frame-ancestors 'none'" in page.headers["Content-Security-Policy"]
    index = client.get("/problems/").get_data(as_text=True)
    assert all(f'href="{t.uri}"' in index for t in problem_types.TYPES.values())
    assert client.get("/problems").status_code == 200
    missing = client.get("/problems/no-such-type")
    assert missing.status_code == 404 and missing.get_json()["type"] == "/problems/http-error"
    assert client.post("/problems/rate-limited").get_data(as_text=True) == "the target"  # only GET is documentation
    assert client.get("/problemsx").get_data(as_text=True) == "the target"


def _table(heading: str) -> str:
    """The first Markdown table under README.md's `## <heading>`."""
    section = (ROOT / "README.md").read_text().split(f"\n## {heading}\n", 1)[1]
    return "\n".join(line for line in section.split("\n## ", 1)[0].splitlines() if line.startswith("|"))


@pytest.mark.parametrize(
    ("heading", "module"),
    [("The create API", "api/create.py"), ("Confirming: the link's page, the code-entry page and the SMS code", None)],
)
def test_the_readmes_tables_name_every_refusal_their_target_can_answer(heading, module):
    if module is None:  # confirm: its renderings of the outcomes
        slugs = {r.problem[0] for r in RENDERINGS.values() if r.problem}
    else:
        literal = {a.value for m, a in _calls("Problem") if m == module and isinstance(a, ast.Constant)}
        slugs = literal | {a.value for _, a in _calls("Refused") if isinstance(a, ast.Constant)}
    table = _table(heading)
    # `verification-expired` / `-superseded`: a shared prefix is written once
    missing = {s for s in slugs if f"`{s}`" not in table and f"`-{s.split('-', 1)[1]}`" not in table}
    assert missing == set()
