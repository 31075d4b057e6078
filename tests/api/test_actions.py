"""Deploy actions over the API: 202 with the deployment, 409 naming the state, 422 for a branch that is not there."""

from __future__ import annotations

import pytest

from apps.deployments import services
from apps.deployments.lifecycle import Status, transition
from apps.deployments.models import App, Deployment
from tests.factories import ImageAppFactory
from tests.support.git import git_daemon, make_repo

pytestmark = pytest.mark.django_db
COMMIT = services.Commit("3f2a9c1d0e5b7a8c9d0e1f2a3b4c5d6e7f8a9b0c", "Fix checkout", "Alice <alice@example.com>")
IMAGE = "127.0.0.1:5000/shop@sha256:" + "a" * 64


def make_live(app, actor, *, image=IMAGE):
    deployment = services.deployment_create(app=app, trigger="push", actor=actor, commit=COMMIT)
    transition(deployment, to=Status.DEPLOYING, image=image)
    transition(deployment, to=Status.LIVE)
    app.refresh_from_db()
    return deployment


@pytest.fixture
def served_repo(tmp_path):
    """A real repository behind a real git daemon on loopback."""
    repo = make_repo(tmp_path, "shop.git", messages={"main": ["Initial commit", "Add the checkout"]})
    with git_daemon(tmp_path) as daemon:
        yield repo, daemon.url("shop.git")


def test_rebuild_builds_the_latest_commit_of_the_branch(api, alice, shop, served_repo):
    repo, url = served_repo
    App.objects.filter(pk=shop.pk).update(repo_url=url)
    response = api(alice).post("/api/v1/apps/shop/rebuild")
    assert response.status_code == 202
    body = response.json()
    assert (body["number"], body["status"], body["trigger"]) == (1, "pending", "rebuild")
    assert body["commit"]["sha"] == repo.head("main")
    assert body["commit"]["message"] == "Add the checkout"


def test_rebuild_of_a_branch_that_does_not_exist_is_422(api, alice, shop, served_repo):
    _, url = served_repo
    App.objects.filter(pk=shop.pk).update(repo_url=url, branch="release")
    response = api(alice).post("/api/v1/apps/shop/rebuild")
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "git_error"
    assert error["message"].startswith("Could not resolve the latest commit of release: branch `release` not found in")
    assert not Deployment.objects.exists()


def test_rebuild_when_the_git_server_does_not_answer_is_503(api, alice, shop, tmp_path):
    with git_daemon(tmp_path) as daemon:
        url = daemon.url("shop.git")
    App.objects.filter(pk=shop.pk).update(repo_url=url)  # the daemon is gone: nothing listens there
    response = api(alice).post("/api/v1/apps/shop/rebuild")
    assert response.status_code == 503
    error = response.json()["error"]
    assert error["code"] == "git_unavailable"
    assert error["message"] == f"Could not resolve the latest commit of main: repository unreachable: {url} (connection refused)"


def test_rebuild_of_an_image_app_is_409(api, alice, acme):
    ImageAppFactory(name="billing", team=acme)
    response = api(alice).post("/api/v1/apps/billing/rebuild")
    assert response.status_code == 409
    assert response.json()["error"] == {
        "code": "action_not_allowed",
        "message": "Rebuild is not available while the app's current deployment is no deployment yet.",
        "field": None,
    }


def test_redeploy_reapplies_the_current_deployment(api, bob, alice, shop):
    deployment = make_live(shop, alice)
    response = api(bob).post("/api/v1/apps/shop/redeploy")
    assert response.status_code == 202
    assert (response.json()["number"], response.json()["status"]) == (deployment.number, "deploying")


def test_redeploy_while_building_is_409_naming_the_state(api, alice, shop):
    deployment = make_live(shop, alice)
    building = services.deployment_create(app=shop, trigger="push", actor=alice, commit=COMMIT)
    transition(building, to=Status.BUILDING)
    response = api(alice).post("/api/v1/apps/shop/redeploy")
    assert response.status_code == 409
    assert response.json()["error"]["message"] == "Redeploy is not available while the app's current deployment is building."
    deployment.refresh_from_db()
    assert deployment.status == "live"


def test_deploy_new_creates_a_deployment_of_an_image_app(api, alice, acme):
    ImageAppFactory(name="billing", team=acme)
    response = api(alice).post("/api/v1/apps/billing/deploy-new")
    assert response.status_code == 202
    assert (response.json()["number"], response.json()["trigger"], response.json()["status"]) == (1, "deploy_new", "pending")


def test_rollback_serves_the_deployment_asked_for(api, alice, shop):
    first = make_live(shop, alice, image=IMAGE)
    make_live(shop, alice, image=IMAGE.replace("a" * 64, "b" * 64))
    response = api(alice).post("/api/v1/apps/shop/rollback", {"deployment": first.number}, format="json")
    assert response.status_code == 202
    body = response.json()
    assert (body["number"], body["trigger"], body["rollback_of"], body["image"]) == (3, "rollback", 1, IMAGE)


def test_rollback_without_a_target_picks_the_newest_earlier_one(api, alice, shop):
    make_live(shop, alice)
    make_live(shop, alice)
    make_live(shop, alice)
    assert api(alice).post("/api/v1/apps/shop/rollback").json()["rollback_of"] == 2


def test_rollback_with_nothing_to_roll_back_to_is_409(api, alice, shop):
    make_live(shop, alice)
    response = api(alice).post("/api/v1/apps/shop/rollback", {"deployment": 1}, format="json")
    assert response.status_code == 409
    assert response.json()["error"]["message"] == "Rollback is not available while the app's current deployment is live."


def test_rollback_to_a_deployment_that_never_went_live_is_409(api, alice, shop):
    make_live(shop, alice)
    failed = services.deployment_create(app=shop, trigger="push", actor=alice, commit=COMMIT)
    transition(failed, to=Status.FAILED, error="build failed")
    make_live(shop, alice)
    response = api(alice).post("/api/v1/apps/shop/rollback", {"deployment": failed.number}, format="json")
    assert response.status_code == 409
    assert response.json()["error"] == {
        "code": "invalid_target",
        "message": "#2 was never live with an image, so it cannot be rolled back to.",
        "field": None,
    }


def test_a_deployment_number_that_does_not_exist_is_400(api, alice, shop):
    make_live(shop, alice)
    make_live(shop, alice)
    response = api(alice).post("/api/v1/apps/shop/rollback", {"deployment": 9}, format="json")
    assert response.status_code == 400
    assert response.json()["error"] == {"code": "invalid", "message": "shop has no deployment #9.", "field": "deployment"}


def test_actions_that_take_no_deployment_refuse_one(api, alice, shop):
    make_live(shop, alice)
    response = api(alice).post("/api/v1/apps/shop/redeploy", {"deployment": 1}, format="json")
    assert response.status_code == 400
    assert response.json()["error"]["field"] == "deployment"


def test_stop_stops_the_live_deployment(api, alice, shop):
    make_live(shop, alice)
    response = api(alice).post("/api/v1/apps/shop/stop")
    assert response.status_code == 202
    assert (response.json()["status"], response.json()["stopped_reason"]) == ("stopped", "stopped by alice")


def test_stop_of_an_app_with_nothing_running_is_409(api, alice, shop):
    response = api(alice).post("/api/v1/apps/shop/stop")
    assert response.status_code == 409
    assert "no deployment yet" in response.json()["error"]["message"]


def test_cancel_stops_the_deployment_in_flight(api, alice, shop):
    services.deployment_create(app=shop, trigger="push", actor=alice, commit=COMMIT)
    response = api(alice).post("/api/v1/apps/shop/cancel")
    assert response.status_code == 202
    assert (response.json()["number"], response.json()["status"], response.json()["stopped_reason"]) == (
        1,
        "stopped",
        "cancelled by alice",
    )


def test_cancel_of_a_settled_deployment_is_409_naming_its_state(api, alice, shop):
    make_live(shop, alice)
    response = api(alice).post("/api/v1/apps/shop/cancel", {"deployment": 1}, format="json")
    assert response.status_code == 409
    assert (
        response.json()["error"]["message"]
        == "Deployment #1 is live: only a pending, building or deploying one can be cancelled."
    )
    response = api(alice).post("/api/v1/apps/shop/cancel")
    assert response.status_code == 409
    assert response.json()["error"]["message"] == "Cancel is not available while the app's current deployment is live."


def test_an_action_response_takes_a_field_mask(api, alice, shop):
    services.deployment_create(app=shop, trigger="push", actor=alice, commit=COMMIT)
    assert api(alice).post("/api/v1/apps/shop/cancel?fields=status").json() == {"status": "stopped"}


@pytest.mark.parametrize("action", ["redeploy", "rebuild", "deploy-new", "rollback", "stop", "cancel"])
def test_outsiders_and_anonymous_callers_cannot_act(api, charlie, alice, shop, action):
    make_live(shop, alice)
    assert api(charlie).post(f"/api/v1/apps/shop/{action}").status_code == 404
    assert api().post(f"/api/v1/apps/shop/{action}").status_code == 401
    assert Deployment.objects.get().status == "live"


@pytest.mark.parametrize("action", ["redeploy", "stop"])
def test_staff_act_on_any_app(api, olivia, alice, shop, action):
    make_live(shop, alice)
    assert api(olivia).post(f"/api/v1/apps/shop/{action}").status_code == 202
