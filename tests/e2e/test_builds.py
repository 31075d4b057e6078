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


BUILT_MESSAGE = json.dumps({"image": "127.0.0.1:5000/APP@{digest}", "digest": "{digest}"})


def build_behaviours(behaviours, app, *, build: dict | None = None) -> None:
    match = {"env": {"SLIPWAY_APP": app.name}}
    behaviours.set(f"{app.name}-clone", match={**match, "container": "clone"}, behaviour={"type": "host_run", "timeout": 30})
    behaviours.set(
        f"{app.name}-plan",
        match={**match, "container": "plan"},
        behaviour={"type": "exit", "duration": 0.2, "log_lines": ["Detected Python", "Plan written to /workspace/plan.json"]},
    )
    message = BUILT_MESSAGE.replace("APP", app.name)
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


NPM_FAILS = [
    "#8 [stage-0 4/6] RUN npm ci",
    '#8 ERROR: process "/bin/sh -c npm ci" did not complete successfully: exit code: 1',
    'error: failed to solve: process "/bin/sh -c npm ci" did not complete successfully: exit code: 1',
]
PUSH_DENIED = [
    "#12 exporting to image",
    "#12 pushing layers",
    "#12 ERROR: failed to push 127.0.0.1:5000/shop:3f2a9c1: unexpected status from POST request to "
    "http://127.0.0.1:5000/v2/shop/blobs/uploads/: 401 Unauthorized",
    "error: failed to solve: failed to push 127.0.0.1:5000/shop: 401 Unauthorized",
]
NO_START = ["✖ No start command was found", "Railpack could not find a start command for this app"]


@pytest.mark.parametrize(
    ("container", "lines", "error"),
    [
        ("plan", NO_START, "plan failed: Railpack found no start command"),
        ("build", NPM_FAILS, "build failed: step `npm ci` exited 1"),
        ("build", PUSH_DENIED, "push failed: registry denied access"),
    ],
)
def test_a_failing_step_is_named_with_its_cause(shop_git, behaviours, repo_server, container, lines, error):
    repo, _ = repo_server
    build_behaviours(behaviours, shop_git)
    behaviours.set(
        f"{shop_git.name}-{container}-fails",
        match={"env": {"SLIPWAY_APP": shop_git.name}, "container": container},
        behaviour={"type": "exit", "duration": 0.3, "exit_code": 1, "log_lines": lines},
        priority=1,
    )
    deployment = settled(services.deployment_create(app=shop_git, trigger="push", commit=Commit(repo.head("main"))), timeout=90)
    assert (deployment.status, deployment.error) == ("failed", error)
    logged_steps = set(deployment.log_lines.values_list("step", flat=True))
    assert "clone" in logged_steps and ({container, "push"} & logged_steps)


def test_a_worker_killed_mid_build_leaves_nothing_stuck(shop_git, behaviours, repo_server, slipway_stack):
    repo, _ = repo_server
    build_behaviours(
        behaviours, shop_git, build={**SLOW_BUILD, "duration": 4, "message": BUILT_MESSAGE.replace("APP", shop_git.name)}
    )
    deployment = building(services.deployment_create(app=shop_git, trigger="push", commit=Commit(repo.head("main"))))
    slipway_stack.processes["worker"].kill()
    # The controller finishes the build without the worker; the rollout waits for it.
    wait_until(
        lambda: type(deployment).objects.get(pk=deployment.pk).status == "deploying", timeout=60, message="the build to finish"
    )
    slipway_stack.restart("worker")
    assert settled(deployment, timeout=90).status == "live"


SLOW_BUILD = {"type": "exit", "duration": 300, "log_lines": ["#1 [internal] load build definition"]}


def job_of(app, number: int) -> dict | None:
    from apps.deployments import pipeline

    return pipeline.cluster().get("Job", f"{app.name}-build-{number}", app.namespace)


def building(deployment):
    wait_until(
        lambda: type(deployment).objects.get(pk=deployment.pk).status == "building", timeout=30, message=f"{deployment} to build"
    )
    deployment.refresh_from_db()
    return deployment


def test_a_build_past_its_deadline_fails_with_that_reason(shop_git, behaviours, repo_server):
    repo, _ = repo_server
    build_behaviours(behaviours, shop_git, build=SLOW_BUILD)
    deployment = settled(services.deployment_create(app=shop_git, trigger="push", commit=Commit(repo.head("main"))), timeout=90)
    assert (deployment.status, deployment.error) == ("failed", "build timed out after 25 s")


def test_a_build_job_deleted_from_outside_fails_the_deployment(shop_git, behaviours, repo_server):
    from apps.deployments import pipeline

    repo, _ = repo_server
    build_behaviours(behaviours, shop_git, build=SLOW_BUILD)
    deployment = building(services.deployment_create(app=shop_git, trigger="push", commit=Commit(repo.head("main"))))
    assert pipeline.cluster().delete("Job", f"{shop_git.name}-build-{deployment.number}", shop_git.namespace)
    deployment = settled(deployment)
    assert (deployment.status, deployment.error) == ("failed", "build failed: the build Job was deleted from outside Slipway")


def test_a_newer_push_supersedes_a_running_build_and_deletes_its_job(shop_git, behaviours, repo_server, alice):
    repo, _ = repo_server
    build_behaviours(behaviours, shop_git, build=SLOW_BUILD)
    first = building(services.deployment_create(app=shop_git, trigger="push", commit=Commit(repo.head("main"))))
    second = services.deployment_create(app=shop_git, trigger="push", commit=Commit(repo.head("main")))
    first.refresh_from_db()
    assert (first.status, first.stopped_reason) == ("stopped", f"superseded by #{second.number}")
    wait_until(lambda: job_of(shop_git, first.number) is None, timeout=30, message="the superseded build Job to be deleted")
    assert services.deployment_cancel(deployment=building(second), actor=alice)
    second.refresh_from_db()
    assert (second.status, second.stopped_reason) == ("stopped", "cancelled by alice")
    wait_until(lambda: job_of(shop_git, second.number) is None, timeout=30, message="the cancelled build Job to be deleted")


def test_a_deployment_created_while_the_worker_is_down_runs_when_it_is_back(shop_git, behaviours, repo_server, slipway_stack):
    repo, _ = repo_server
    build_behaviours(behaviours, shop_git)
    slipway_stack.processes["worker"].kill()
    deployment = services.deployment_create(app=shop_git, trigger="push", commit=Commit(repo.head("main")))
    deployment.refresh_from_db()
    assert deployment.status == "pending"
    slipway_stack.restart("worker")
    assert settled(deployment, timeout=90).status == "live"


def test_a_job_refused_by_a_quota_fails_with_the_api_servers_message(shop_git, behaviours, repo_server):
    from apps.deployments import pipeline

    repo, _ = repo_server
    kube = pipeline.cluster()
    kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": shop_git.namespace}})
    kube._request(
        "POST",
        f"/api/v1/namespaces/{shop_git.namespace}/resourcequotas",
        body={
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": "no-jobs"},
            "spec": {"hard": {"count/jobs.batch": "0"}},
        },
    )
    deployment = settled(services.deployment_create(app=shop_git, trigger="push", commit=Commit(repo.head("main"))))
    assert deployment.status == "failed"
    assert deployment.error.startswith("the cluster refused the build Job: apply Job"), deployment.error
    assert "exceeded quota: no-jobs" in deployment.error
