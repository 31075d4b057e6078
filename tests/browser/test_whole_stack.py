"""A person's whole journey in headless Chromium against the real stack: web, worker, controller, local cluster.

Sign in, create a git app, Rebuild it, watch it go building → deploying → live without
reloading while the deploy log streams, see the unhealthy indicator come and go as the
app crash-loops and recovers, Stop, Redeploy; an outsider gets 404.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from apps.deployments.models import App
from tests.browser.conftest import sign_in
from tests.e2e.test_builds import build_behaviours
from tests.e2e.test_rollouts import behave
from tests.support.git import make_repo, start_git_http_server
from tests.support.live import unique_name, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.cluster, pytest.mark.browser]

# Statuses the badge showed, in order, recorded in the page as they arrive over SSE.
RECORD_STATUSES = """
() => {
  window.seenStatuses = [];
  const note = () => {
    const badge = document.querySelector('#status .badge');
    const text = badge ? badge.textContent.trim().split(/\\s+/).pop() : '';
    if (text && window.seenStatuses[window.seenStatuses.length - 1] !== text) window.seenStatuses.push(text);
  };
  note();
  new MutationObserver(note).observe(document.getElementById('status'), {childList: true, subtree: true, characterData: true});
}
"""
SLOW_BUILD = {
    "type": "exit",
    "duration": 4.0,
    "log_lines": ["#1 [internal] load build definition", "#5 RUN pip install -r requirements.txt", "#9 exporting to image"],
    "log_every": 0.5,
    "log_line": "#7 building layer {n}",
}


@pytest.fixture
def repo_server(tmp_path):
    repo = make_repo(tmp_path, "shop.git", messages={"main": ["Start the shop", "Fix the checkout total"]})
    server = start_git_http_server(tmp_path)
    yield repo, server
    server.stop()


def confirm(page, action: str) -> None:
    page.locator("#actions").get_by_role("link", name=action, exact=True).click()
    page.locator("dialog[open]").get_by_role("button", name=action, exact=True).click()
    expect(page.locator(".messages")).to_be_visible()


def test_a_person_ships_watches_and_stops_an_app(slipway_stack, open_page, alice, charlie, acme, behaviours, repo_server):
    repo, git_server = repo_server
    base = slipway_stack.url
    name = unique_name("shop")
    app_stub = App(name=name)  # the behaviours match by name and namespace, known before the app exists
    build_behaviours(behaviours, app_stub, build={**SLOW_BUILD, "message": _digest_message(name)})
    behave(behaviours, app_stub, "flap", start_delay=1.0, ready_after=2.0, healthy_for=8.0, crash_for=6.0, after=0.2, backoff=0.5)

    # Sign in and create the app through the form.
    page = open_page()
    sign_in(page, base, "alice")
    page.get_by_role("link", name="New app").first.click()
    page.get_by_label("Name", exact=True).fill(name)
    page.get_by_label("Repository URL").fill(git_server.url(repo.name))
    page.get_by_label("Port").fill("8080")
    page.get_by_role("button", name="Create app").click()
    expect(page).to_have_url(f"{base}/apps/{name}/")
    page.evaluate("window.notReloaded = true")
    page.evaluate(RECORD_STATUSES)

    # Rebuild, confirmed in the dialog; the badge moves on its own.
    confirm(page, "Rebuild")
    expect(page.locator(".message-success")).to_contain_text("Rebuild: deployment #1 started.")
    page.evaluate("window.notReloaded = true")
    page.evaluate(RECORD_STATUSES)
    expect(page.locator("#status")).to_contain_text("building", timeout=60_000)

    # Read the deploy log while it streams, in a second tab.
    log_page = open_page()
    sign_in(log_page, base, "alice")
    log_page.goto(f"{base}/apps/{name}/deployments/1/")
    expect(log_page.locator('.step-marker[data-step="clone"]')).to_be_visible(timeout=60_000)
    expect(log_page.locator("#log")).to_contain_text(repo.head("main")[:7])
    expect(log_page.locator("#log")).to_contain_text("#7 building layer", timeout=60_000)
    lines_while_building = log_page.locator("#log .line").count()
    expect(log_page.locator('.step-marker[data-step="rollout"]')).to_be_visible(timeout=90_000)
    assert log_page.locator("#log .line").count() > lines_while_building
    expect(log_page.locator("#deployment-header")).to_contain_text("live", timeout=90_000)

    expect(page.locator("#status")).to_contain_text("live", timeout=90_000)
    seen = page.evaluate("window.seenStatuses")
    assert [s for s in seen if s in ("building", "deploying", "live")] == ["building", "deploying", "live"], seen
    expect(page.locator("#history")).to_contain_text("Fix the checkout total")

    # The app crash-loops after a while, then recovers: the indicator appears and clears.
    health = page.locator("#health")
    expect(health).to_contain_text("Unhealthy: CrashLoopBackOff", timeout=90_000)
    expect(health).to_contain_text("keeps crashing right after it starts")
    expect(health).to_contain_text("No problems", timeout=150_000)
    expect(health).not_to_contain_text("Unhealthy")
    assert page.evaluate("window.notReloaded") is True

    # Stop, then Redeploy.
    behave(behaviours, app_stub, "healthy", start_delay=0.5, ready_after=1.0)
    confirm(page, "Stop")
    expect(page.locator("#status")).to_contain_text("stopped", timeout=60_000)
    expect(health).to_contain_text("the app has no serving deployment")
    # Stop's teardown runs on the worker after the status changes; a Redeploy sent before it
    # finishes can lose its env Secret to it, so wait until the cluster is empty (see docs/ui.md).
    wait_until(lambda: not _app_objects(name), timeout=60, message=f"{name}'s resources to be torn down")
    confirm(page, "Redeploy")
    expect(page.locator(".message-success")).to_contain_text("Redeploying #1.")
    expect(page.locator("#status")).to_contain_text("live", timeout=90_000)

    # An outsider cannot see it.
    outsider = open_page()
    sign_in(outsider, base, "charlie")
    response = outsider.goto(f"{base}/apps/{name}/")
    assert response.status == 404
    assert not re.search(re.escape(name), outsider.locator("main").inner_text())

    # Deleting asks for the name, removes the cluster resources, then the app.
    page.get_by_role("link", name=f"Delete {name}…").click()
    page.get_by_label("Type the app's name to confirm").fill(name)
    page.get_by_role("button", name=f"Delete {name}").click()
    expect(page.locator(".message-success")).to_contain_text(f"Deleted {name}.")
    assert not App.objects.filter(name=name).exists()
    # The app's namespace is deleted; Kubernetes removes what it holds in the background.
    wait_until(lambda: _app_objects(name) == [], timeout=60, message="the app's cluster objects to be gone")


def _app_objects(name: str) -> list[str]:
    from apps.deployments import pipeline
    from builder import specs

    kube, selector = pipeline.cluster(), specs.selector(app=name, component=specs.COMPONENT_APP)
    return [
        f"{kind}/{item['metadata']['name']}"
        for kind in ("Deployment", "Secret")
        for item in kube.list(kind, App(name=name).namespace, selector=selector)["items"]
    ]


def _digest_message(name: str) -> str:
    import json

    return json.dumps({"image": f"127.0.0.1:5000/{name}@{{digest}}", "digest": "{digest}"})
