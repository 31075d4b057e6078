"""`slipway deploy --rebuild --wait` against the whole stack: web, worker, controller and the local cluster.

The repository is real (a git server on loopback); the cluster runs the build Job and
the app's pods with simulated containers whose behaviour each test chooses.
"""

from __future__ import annotations

import pytest

from apps.accounts.services import api_token_create
from apps.deployments.models import Deployment
from cli.main import FAILED, OK
from tests.e2e.test_builds import build_behaviours
from tests.e2e.test_rollouts import behave
from tests.factories import AppFactory
from tests.support.git import make_repo, start_git_http_server
from tests.support.live import unique_name

pytestmark = [pytest.mark.e2e, pytest.mark.cluster]


@pytest.fixture
def demo(slipway_stack, acme, alice, tmp_path):
    """alice's git app `demo-…`, its repository served over HTTP on loopback."""
    repo = make_repo(tmp_path / "git", "demo.git")
    server = start_git_http_server(tmp_path / "git")
    app = AppFactory(
        name=unique_name("demo"), team=acme, created_by=alice, repo_url=server.url(repo.name), branch="main", port=8080
    )
    yield app
    server.stop()


@pytest.fixture
def ci_env(slipway_stack, alice):
    """What a CI job gives the command: the server and a token."""
    return {"SLIPWAY_URL": slipway_stack.url, "SLIPWAY_TOKEN": api_token_create(user=alice, name="ci")[1]}


def test_deploy_rebuild_wait_exits_0_for_a_healthy_app(demo, ci_env, slipway, behaviours):
    build_behaviours(behaviours, demo)
    behave(behaviours, demo, "healthy")
    cli = slipway("deploy", demo.name, "--rebuild", "--wait", "--timeout", "150", env=ci_env)
    assert cli.wait(timeout=180) == OK, cli.out + cli.err
    assert cli.out.endswith("Deployment #1 is live.\n")
    # The deploy log, printed as it arrived: from the clone to the rollout.
    assert "[clone] " in cli.out and "[build] " in cli.out
    assert "[rollout] Rollout complete: 1 of 1 pod(s) ready.\n" in cli.out
    assert Deployment.objects.get(app=demo).status == "live"


def test_deploy_rebuild_wait_exits_1_with_the_crash_reason(demo, ci_env, slipway, behaviours):
    build_behaviours(behaviours, demo)
    behave(behaviours, demo, "crash", after=0.3, exit_code=1, backoff=0.5, log_lines=["booting", "KeyError: 'DATABASE_URL'"])
    cli = slipway("deploy", demo.name, "--rebuild", "--wait", "--timeout", "150", env=ci_env)
    assert cli.wait(timeout=180) == FAILED, cli.out + cli.err
    deployment = Deployment.objects.get(app=demo)
    assert deployment.status == "failed"
    assert cli.err == f"Deployment #1 failed: {deployment.error}\n"
    assert "exit 1" in deployment.error and "KeyError: 'DATABASE_URL'" in deployment.error
