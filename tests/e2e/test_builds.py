"""Git builds end to end: a real repository on disk, the build Job on the local cluster, the image deployed.

The clone step really runs (kubesim's host_run executes the clone container's script on
this machine against a git server on loopback); plan and build play realistic output.
"""

from __future__ import annotations

import json

import pytest

from apps.deployments import services
from apps.deployments.services import Commit
from tests.e2e.test_rollouts import settled
from tests.factories import AppFactory
from tests.support.git import make_repo, start_git_http_server
from tests.support.live import unique_name, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.cluster]


@pytest.fixture
def repo_server(tmp_path):
    repo = make_repo(tmp_path, "shop.git")
    server = start_git_http_server(tmp_path)
    yield repo, server
    server.stop()


@pytest.fixture
def shop_git(slipway_stack, acme, alice, repo_server):
    repo, server = repo_server
    return AppFactory(
        name=unique_name("shop"), team=acme, created_by=alice, repo_url=server.url(repo.name), branch="main", port=8080
    )


def build_behaviours(behaviours, app, *, build: dict | None = None) -> None:
    match = {"env": {"SLIPWAY_APP": app.name}}
    behaviours.set(f"{app.name}-clone", match={**match, "container": "clone"}, behaviour={"type": "host_run", "timeout": 30})
    behaviours.set(
        f"{app.name}-plan",
        match={**match, "container": "plan"},
        behaviour={"type": "exit", "duration": 0.2, "log_lines": ["Detected Python", "Plan written to /workspace/plan.json"]},
    )
    message = json.dumps({"image": f"127.0.0.1:5000/{app.name}@{{digest}}", "digest": "{digest}"})
    behaviours.set(
        f"{app.name}-build",
        match={**match, "container": "build"},
        behaviour=build
        or {
            "type": "exit",
            "duration": 0.3,
            "log_lines": ["#1 [internal] load build definition", "#9 exporting to image", "#9 pushing layers 0.2s done"],
            "message": message,
        },
    )


def test_a_pushed_commit_is_cloned_built_and_rolled_out(shop_git, alice, behaviours, repo_server):
    repo, _ = repo_server
    build_behaviours(behaviours, shop_git)
    sha = repo.head("main")
    deployment = services.deployment_create(app=shop_git, trigger="push", commit=Commit(sha, "change 2", "Alice"))
    wait_until(
        lambda: deployment.__class__.objects.get(pk=deployment.pk).status != "pending", timeout=30, message="the build to start"
    )
    deployment = settled(deployment, timeout=90)
    assert deployment.status == "live", deployment.error
    assert deployment.image.startswith(f"127.0.0.1:5000/{shop_git.name}@sha256:")
    lines = list(deployment.log_lines.order_by("seq").values_list("step", "text"))
    steps = [step for step, _ in lines]
    assert steps.index("clone") < steps.index("plan") < steps.index("build") < steps.index("push") < steps.index("rollout")
    assert any(sha[:7] in text for _, text in lines)


def test_a_commit_that_is_not_in_the_repository_fails_at_clone(shop_git, alice, behaviours):
    build_behaviours(behaviours, shop_git)
    missing = "0123456789abcdef0123456789abcdef01234567"
    deployment = settled(services.deployment_create(app=shop_git, trigger="push", commit=Commit(missing)), timeout=90)
    assert deployment.status == "failed"
    assert deployment.error.startswith("clone failed"), deployment.error
    assert "0123456" in deployment.error


def test_a_failing_build_step_is_named_in_the_error(shop_git, alice, behaviours, repo_server):
    repo, _ = repo_server
    failing = {
        "type": "exit",
        "duration": 0.3,
        "exit_code": 1,
        "log_lines": [
            "#8 [stage-0 4/6] RUN npm ci",
            '#8 ERROR: process "/bin/sh -c npm ci" did not complete successfully: exit code: 1',
            'error: failed to solve: process "/bin/sh -c npm ci" did not complete successfully: exit code: 1',
        ],
    }
    build_behaviours(behaviours, shop_git, build=failing)
    deployment = settled(services.deployment_create(app=shop_git, trigger="push", commit=Commit(repo.head("main"))), timeout=90)
    assert deployment.status == "failed"
    assert deployment.error.startswith("build failed"), deployment.error
    assert "npm ci" in deployment.error
