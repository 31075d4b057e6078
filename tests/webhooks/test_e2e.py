"""A real push, end to end: a commit in a git repository on disk, a signed delivery for it, and a
deployment on the local cluster whose build clones exactly that commit and goes live.

The build pod's clone step really runs (kubesim's host_run behaviour) against a smart-HTTP git
server on loopback; Railpack and BuildKit cannot run here, so the build step reports a pinned
image the way BuildKit would.
"""

from __future__ import annotations

import json

import pytest
import requests

from apps.deployments.models import Deployment
from apps.webhooks.models import WebhookDelivery
from tests.factories import AppFactory
from tests.support.git import make_repo, push_commit, start_git_http_server
from tests.support.live import unique_name, wait_until
from tests.webhooks.conftest import hmac_hex

pytestmark = [pytest.mark.e2e, pytest.mark.cluster]


@pytest.fixture
def repo_server(tmp_path):
    repo = make_repo(tmp_path, "shop.git", messages={"main": ["Start the shop", "Say hello"]})
    server = start_git_http_server(tmp_path)
    yield repo, server
    server.stop()


def github_push(repo_url: str, branch: str, before: str, after: str, message: str) -> bytes:
    """Return a GitHub push payload as GitHub writes it (fields the receiver reads, plus context)."""
    commit = {
        "id": after,
        "message": message,
        "author": {"name": "Alice Example", "email": "alice@example.com", "username": "alice"},
    }
    payload = {
        "ref": f"refs/heads/{branch}",
        "before": before,
        "after": after,
        "created": False,
        "deleted": False,
        "forced": False,
        "compare": f"{repo_url}/compare/{before[:12]}...{after[:12]}",
        "commits": [commit],
        "head_commit": commit,
        "repository": {"clone_url": repo_url, "default_branch": "main"},
        "pusher": {"name": "alice", "email": "alice@example.com"},
    }
    return json.dumps(payload, indent=2).encode()


def test_a_pushed_commit_is_built_and_deployed_from_its_signed_delivery(slipway_stack, behaviours, repo_server, acme, alice):
    repo, server = repo_server
    app = AppFactory(name=unique_name("shop"), team=acme, created_by=alice, repo_url=server.url("shop.git"), branch="main")
    ns = {"namespace": app.namespace}
    behaviours.set(f"{app.name}-clone", match={**ns, "container": "clone"}, behaviour={"type": "host_run", "timeout": 60})
    pinned = '{"image": "127.0.0.1:5000/' + app.name + '@{digest}", "digest": "{digest}"}'
    behaviours.set(
        f"{app.name}-build", match={**ns, "container": "build"}, behaviour={"type": "exit", "duration": 0.3, "message": pinned}
    )

    before = repo.head("main")
    sha = push_commit(repo, "main", {"app.py": "print('hello, webhooks')\n"}, "Greet webhooks")
    assert sha != before
    body = github_push(server.url("shop.git"), "main", before, sha, "Greet webhooks")
    headers = {
        "Content-Type": "application/json",
        "X-GitHub-Event": "push",
        "X-GitHub-Delivery": "e2e-delivery-1",
        "X-Hub-Signature-256": "sha256=" + hmac_hex(app.webhook_secret, body),
    }

    response = requests.post(f"{slipway_stack.url}/webhooks/{app.webhook_id}/", data=body, headers=headers, timeout=10)

    assert response.status_code == 202, response.text
    assert response.json()["deployment"]["number"] == 1
    deployment = Deployment.objects.get(app=app)
    assert (deployment.commit_sha, deployment.commit_message, deployment.trigger) == (sha, "Greet webhooks", "push")

    def settled():
        deployment.refresh_from_db()
        return deployment.status in ("live", "failed", "stopped")

    try:
        wait_until(settled, timeout=120, message=f"{app.name} #1 to settle")
    finally:
        log = list(deployment.log_lines.values_list("step", "text"))
        print(deployment.status, *log, slipway_stack.logs(), sep="\n")  # shown only when the test fails
    assert deployment.status == "live", f"{deployment.error}\n{log}"
    assert ("clone", f"Checked out {sha[:7]}: Greet webhooks (Alice Example)") in log
    assert deployment.image.startswith(f"127.0.0.1:5000/{app.name}@sha256:")

    # The provider retries the same delivery: acknowledged, no second build.
    again = requests.post(f"{slipway_stack.url}/webhooks/{app.webhook_id}/", data=body, headers=headers, timeout=10)
    assert (again.status_code, again.json()["reason"]) == (200, "delivery e2e-delivery-1 was already deployed as #1")
    assert Deployment.objects.filter(app=app).count() == 1
    assert list(WebhookDelivery.objects.filter(app=app).values_list("outcome", flat=True)) == ["ignored", "deployed"]
