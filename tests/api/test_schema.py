"""The OpenAPI schema: served, kept in step with the code, and fuzzed against a live server without a 500."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import schemathesis
import yaml
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error, status_code_conformance

from apps.accounts.services import api_token_create
from apps.deployments import services
from apps.deployments.lifecycle import Status, transition
from apps.deployments.models import App
from tests.factories import AppFactory
from tests.support.git import git_daemon, make_repo

ROOT = Path(__file__).resolve().parents[2]
# Streams that stay open by design: fuzzing them would wait for the test's deadline.
STREAMS = ("/api/v1/events", "/api/v1/apps/{name}/logs")


def gen_openapi():
    spec = importlib.util.spec_from_file_location("gen_openapi", ROOT / "scripts" / "gen_openapi.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.django_db
def test_the_schema_is_served_without_credentials(client):
    response = client.get("/api/v1/schema/", HTTP_ACCEPT="application/vnd.oai.openapi")
    assert response.status_code == 200
    schema = yaml.safe_load(response.content)
    assert schema["info"]["title"] == "Slipway API"
    assert "/api/v1/apps/{name}/rollback" in schema["paths"]
    assert schema["components"]["securitySchemes"]["bearerAuth"] == {
        "type": "http",
        "scheme": "bearer",
        "description": "An API token (slp_…), created in the UI or with `manage.py create_api_token USERNAME NAME`.",
    }


@pytest.mark.django_db
def test_the_committed_schema_matches_the_code():
    assert (ROOT / "docs" / "openapi.yaml").read_text() == gen_openapi().render(), (
        "docs/openapi.yaml is out of date: run .venv/bin/python scripts/gen_openapi.py"
    )


@pytest.mark.django_db
def test_every_error_response_is_documented_with_the_one_error_shape():
    schema = yaml.safe_load((ROOT / "docs" / "openapi.yaml").read_text())
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            for code, response in operation["responses"].items():
                if code.startswith(("4", "5")):
                    assert response["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/Error"}, (
                        method,
                        path,
                        code,
                    )


# -- fuzzing over loopback -------------------------------------------------------------------


@pytest.fixture
def fuzz_target(live_web, alice, tmp_path):
    """alice's token and apps the fuzzer can reach: a git app on a loopback git daemon with a live deployment."""
    repo = make_repo(tmp_path)
    with git_daemon(tmp_path) as daemon:
        shop = AppFactory(name="shop", team=alice.teams.get(), repo_url=daemon.url(repo.name))
        deployment = services.deployment_create(app=shop, trigger="push", actor=alice, commit=services.Commit(repo.head()))
        transition(deployment, to=Status.BUILDING)
        transition(deployment, to=Status.DEPLOYING, image="127.0.0.1:5000/shop@sha256:" + "a" * 64)
        transition(deployment, to=Status.LIVE)
        services.env_var_set(app=shop, name="DEBUG", value="0")
        yield {"url": live_web.url, "token": api_token_create(user=alice, name="fuzz")[1], "app": App.objects.get(pk=shop.pk)}


def fuzzed_schema():
    raw = yaml.safe_load((ROOT / "docs" / "openapi.yaml").read_text())
    raw["paths"] = {path: ops for path, ops in raw["paths"].items() if path not in STREAMS}
    return schemathesis.openapi.from_dict(raw)


def test_fuzzing_every_operation_finds_no_server_error(fuzz_target):
    """Bounded: a dozen generated requests per operation, each with a 15 s timeout."""
    headers = {"Authorization": f"Bearer {fuzz_target['token']}"}
    operations = [result.ok() for result in fuzzed_schema().get_all_operations()]
    # Deleting the app ends what the others can reach: it goes last.
    operations.sort(key=lambda op: (op.method.upper() == "DELETE" and op.path.endswith("/apps/{name}"), op.path, op.method))
    assert len(operations) >= 15
    statuses: list[int] = []

    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True, database=None)
        def check(case):
            if "name" in (case.path_parameters or {}):
                case.path_parameters["name"] = "shop"  # an app that exists, so requests reach past the lookup
            response = case.call(base_url=fuzz_target["url"], headers=headers, timeout=15)
            statuses.append(response.status_code)
            case.validate_response(response, checks=[not_a_server_error, status_code_conformance])

        check()

    # The fuzzer got past validation as well as being refused by it.
    assert any(200 <= code < 300 for code in statuses) and any(400 <= code < 500 for code in statuses)
    print(f"{len(statuses)} requests:", {code: statuses.count(code) for code in sorted(set(statuses))})
