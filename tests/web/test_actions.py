"""Deploy actions from the app page: offered per state, confirmed before they run, refused with a message."""

from __future__ import annotations

import re

import pytest
from django.contrib.messages import get_messages
from django.urls import reverse

from apps.deployments.models import Deployment
from tests.factories import ImageAppFactory
from tests.support.git import make_repo, start_git_http_server
from tests.web.conftest import deploy

pytestmark = pytest.mark.django_db
HTMX = {"HTTP_HX_REQUEST": "true"}


def offered(client, name="shop") -> list[str]:
    body = client.get(reverse("app-detail", args=[name])).content.decode()
    actions = body[body.index('id="actions"') : body.index("</ul>", body.index('id="actions"'))]
    return re.findall(r'hx-target="#dialog-body" hx-swap="innerHTML">([^<]+)</a>', actions)


def action_url(action, name="shop"):
    return reverse("app-action", args=[name, action])


def messages_of(response) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


# -- which actions the page offers -------------------------------------------------------------


def test_a_new_git_app_offers_rebuild_only(as_alice, shop):
    assert offered(as_alice) == ["Rebuild"]


def test_a_new_image_app_offers_deploy_new_only(as_alice, acme):
    ImageAppFactory(name="billing", team=acme)
    assert offered(as_alice, "billing") == ["Deploy new"]


def test_a_building_app_offers_rebuild_and_cancel(as_alice, shop, alice):
    deploy(shop, alice, to="building")
    assert offered(as_alice) == ["Rebuild", "Cancel"]


def test_a_live_app_offers_redeploy_rebuild_and_stop(as_alice, shop, alice):
    deploy(shop, alice, to="live")
    assert offered(as_alice) == ["Redeploy", "Rebuild", "Stop"]


def test_a_second_live_deployment_makes_rollback_available(as_alice, shop, alice):
    deploy(shop, alice, to="live")
    deploy(shop, alice, to="live")
    assert offered(as_alice) == ["Redeploy", "Rebuild", "Rollback", "Stop"]


def test_a_stopped_app_offers_redeploy_and_rebuild(as_alice, shop, alice):
    deploy(shop, alice, to="stopped")
    assert offered(as_alice) == ["Redeploy", "Rebuild"]


def test_each_action_links_to_its_confirm_step_without_javascript(as_alice, shop, alice):
    deploy(shop, alice, to="live")
    body = as_alice.get(reverse("app-detail", args=["shop"])).content.decode()
    assert f'href="{action_url("stop")}"' in body and f'hx-get="{action_url("stop")}"' in body


# -- the confirm step -------------------------------------------------------------------------------


def test_the_confirm_page_explains_the_action_and_changes_nothing(as_alice, shop, alice):
    d = deploy(shop, alice, to="live")
    response = as_alice.get(action_url("redeploy"))
    body = response.content.decode()
    assert response.status_code == 200
    assert "Redeploy shop?" in body and "Re-applies the Kubernetes manifests of #1" in body
    assert f'<form method="post" action="{action_url("redeploy")}"' in body
    d.refresh_from_db()
    assert d.status == "live" and Deployment.objects.count() == 1


def test_htmx_gets_the_confirm_step_alone_for_the_dialog(as_alice, shop, alice):
    deploy(shop, alice, to="live")
    body = as_alice.get(action_url("stop"), **HTMX).content.decode()
    assert body.lstrip().startswith('<div class="confirm">') and "<html" not in body
    assert "Tears down the app&#x27;s Kubernetes resources" in body


def test_an_action_not_offered_is_refused_at_the_confirm_step_with_409(as_alice, shop, alice):
    deploy(shop, alice, to="building")
    response = as_alice.get(action_url("redeploy"))
    assert response.status_code == 409
    assert "Redeploy is not available while the app&#x27;s current deployment is building." in response.content.decode()
    assert '<form method="post"' not in response.content.decode().split('class="confirm"')[1]


def test_an_unknown_action_is_404(as_alice, shop):
    assert as_alice.get(action_url("explode")).status_code == 404
    assert as_alice.post(action_url("explode")).status_code == 404


# -- running an action ---------------------------------------------------------------------------------


def test_redeploy_runs_after_confirming_and_returns_to_the_app(as_alice, shop, alice):
    d = deploy(shop, alice, to="live")
    response = as_alice.post(action_url("redeploy"))
    assert response.status_code == 302 and response["Location"] == reverse("app-detail", args=["shop"])
    d.refresh_from_db()
    assert d.status == "deploying"
    assert messages_of(response) == ["Redeploying #1."]


def test_htmx_confirmation_redirects_the_whole_page(as_alice, shop, alice):
    deploy(shop, alice, to="live")
    response = as_alice.post(action_url("stop"), **HTMX)
    assert response.status_code == 200 and response["HX-Redirect"] == reverse("app-detail", args=["shop"])
    shop.refresh_from_db()
    assert shop.current_deployment.status == "stopped"


def test_stop_stops_the_app(as_alice, shop, alice):
    deploy(shop, alice, to="live")
    as_alice.post(action_url("stop"))
    shop.refresh_from_db()
    assert shop.current_deployment.status == "stopped"
    assert shop.current_deployment.stopped_reason == "stopped by alice"


def test_cancel_stops_the_deployment_in_flight(as_alice, shop, alice):
    d = deploy(shop, alice, to="building")
    response = as_alice.post(action_url("cancel"))
    d.refresh_from_db()
    assert d.status == "stopped" and d.stopped_reason == "cancelled by alice"
    assert messages_of(response) == ["Cancelled #1."]


def test_deploy_new_creates_a_deployment_of_an_image_app(as_alice, acme, alice):
    app = ImageAppFactory(name="billing", team=acme)
    as_alice.post(action_url("deploy-new", "billing"))
    d = app.deployments.get()
    assert (d.number, d.status, d.trigger, d.triggered_by) == (1, "pending", "deploy_new", alice)


def test_rollback_asks_for_a_target_and_deploys_its_image(as_alice, shop, alice):
    first = deploy(shop, alice, to="live", image="127.0.0.1:5000/shop@sha256:" + "1" * 64)
    deploy(shop, alice, to="live")
    body = as_alice.get(action_url("rollback")).content.decode()
    assert f'<option value="{first.pk}"' in body and "#1" in body
    as_alice.post(action_url("rollback"), {"target": first.pk})
    newest = shop.deployments.first()
    assert (newest.number, newest.trigger, newest.rollback_of, newest.image) == (3, "rollback", first, first.image)


def test_rollback_to_a_deployment_that_is_not_a_target_is_answered_on_the_form(as_alice, shop, alice):
    deploy(shop, alice, to="live")
    current = deploy(shop, alice, to="live")
    response = as_alice.post(action_url("rollback"), {"target": current.pk})
    assert response.status_code == 200
    assert "Select a valid choice" in response.content.decode()
    assert shop.deployments.count() == 2


def test_an_action_that_is_no_longer_offered_is_refused_with_a_message(as_alice, shop, alice):
    deploy(shop, alice, to="building")
    response = as_alice.post(action_url("redeploy"))
    assert response.status_code == 302
    assert messages_of(response) == ["Redeploy is not available while the app's current deployment is building."]


def test_htmx_gets_409_for_an_action_no_longer_offered(as_alice, shop, alice):
    deploy(shop, alice, to="building")
    response = as_alice.post(action_url("stop"), **HTMX)
    assert response.status_code == 409
    assert "Stop is not available while the app&#x27;s current deployment is building." in response.content.decode()


def test_actions_need_post_or_get(as_alice, shop):
    assert as_alice.put(action_url("rebuild")).status_code == 405


# -- Rebuild asks the git server for the branch's latest commit ---------------------------------------


@pytest.fixture
def git_server(tmp_path):
    repo = make_repo(tmp_path, "shop.git", messages={"main": ["Start the shop", "Fix the checkout total"]})
    server = start_git_http_server(tmp_path)
    yield repo, server
    server.stop()


def test_rebuild_builds_the_latest_commit_of_the_branch(as_alice, shop, alice, git_server):
    repo, server = git_server
    shop.repo_url = server.url("shop.git")
    shop.save()
    response = as_alice.post(action_url("rebuild"))
    d = shop.deployments.get()
    assert (d.trigger, d.commit_sha, d.triggered_by) == ("rebuild", repo.head("main"), alice)
    assert d.commit_message == "Fix the checkout total" and d.commit_author.startswith("Alice Example")
    assert messages_of(response) == ["Rebuild: deployment #1 started."]


def test_rebuild_of_a_missing_branch_says_why_and_creates_nothing(as_alice, shop, git_server):
    _, server = git_server
    shop.repo_url, shop.branch = server.url("shop.git"), "release"
    shop.save()
    response = as_alice.post(action_url("rebuild"), **HTMX)
    assert response.status_code == 502
    assert "Could not resolve the latest commit of release: branch `release` not found" in response.content.decode()
    assert not shop.deployments.exists()
