"""Apps over the API: who sees what, creating, changing and deleting, and field masks."""

from __future__ import annotations

import pytest

from apps.api import services as api_services
from apps.deployments import services
from apps.deployments.lifecycle import Status, transition
from apps.deployments.models import App, Event
from tests.factories import AppFactory, ImageAppFactory, TeamFactory

pytestmark = pytest.mark.django_db
COMMIT = services.Commit("3f2a9c1d0e5b7a8c9d0e1f2a3b4c5d6e7f8a9b0c", "Fix checkout", "Alice <alice@example.com>")


def names(response) -> list[str]:
    return [app["name"] for app in response.json()]


def live_deployment(app, actor):
    deployment = services.deployment_create(app=app, trigger="push", actor=actor, commit=COMMIT)
    transition(deployment, to=Status.BUILDING)
    transition(deployment, to=Status.DEPLOYING, image="127.0.0.1:5000/shop@sha256:" + "a" * 64)
    transition(deployment, to=Status.LIVE)
    app.refresh_from_db()
    return deployment


@pytest.fixture
def globex_app(charlie):
    return AppFactory(name="radar", team=charlie.teams.get())


# -- who sees what ---------------------------------------------------------------------------


def test_members_list_their_teams_apps_and_staff_list_all(api, alice, bob, charlie, olivia, shop, globex_app):
    assert names(api(alice).get("/api/v1/apps")) == ["shop"]
    assert names(api(bob).get("/api/v1/apps")) == ["shop"]
    assert names(api(charlie).get("/api/v1/apps")) == ["radar"]
    assert names(api(olivia).get("/api/v1/apps")) == ["radar", "shop"]


@pytest.mark.parametrize(
    ("who", "expected"),
    [("alice", 200), ("bob", 200), ("charlie", 404), ("olivia", 200), ("anonymous", 401)],
)
def test_reading_an_app_follows_the_permission_matrix(api, request, shop, who, expected):
    user = None if who == "anonymous" else request.getfixturevalue(who)
    response = api(user).get("/api/v1/apps/shop")
    assert response.status_code == expected
    if expected == 404:
        # An app the caller may not see looks exactly like one that does not exist.
        assert response.json() == {"error": {"code": "not_found", "message": "No app named 'shop'.", "field": None}}
        assert api(user).get("/api/v1/apps/nothing-here").json()["error"]["code"] == "not_found"


def test_an_app_shows_its_status_health_and_offered_actions(api, alice, shop):
    deployment = live_deployment(shop, alice)
    App.objects.filter(pk=shop.pk).update(health_state="unhealthy", health_reason="CrashLoopBackOff")
    body = api(alice).get("/api/v1/apps/shop").json()
    assert body["status"] == "live"
    assert body["current_deployment"] == body["live_deployment"] == deployment.number
    assert body["health"]["state"] == "unhealthy" and body["health"]["reason"] == "CrashLoopBackOff"
    assert body["actions"] == ["redeploy", "rebuild", "stop"]
    assert body["webhook_url"].endswith(f"/webhooks/{shop.webhook_id}/")


# -- field masks -----------------------------------------------------------------------------


def test_a_field_mask_returns_only_the_fields_asked_for_in_that_order(api, alice, shop):
    body = api(alice).get("/api/v1/apps/shop?fields=status,health,error").json()
    assert list(body) == ["status", "health", "error"]
    assert body == {"status": None, "health": {"state": "none", "reason": "", "since": None}, "error": ""}


def test_a_field_mask_applies_to_every_item_of_a_list(api, alice, shop):
    AppFactory(name="cart", team=shop.team)
    assert api(alice).get("/api/v1/apps?fields=name").json() == [{"name": "cart"}, {"name": "shop"}]


def test_an_unknown_field_in_a_mask_is_refused_naming_it(api, alice, shop):
    response = api(alice).get("/api/v1/apps/shop?fields=status,colour")
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["field"] == "fields" and error["message"].startswith("Unknown field 'colour'")


def test_an_empty_field_mask_is_refused(api, alice, shop):
    response = api(alice).get("/api/v1/apps/shop?fields=,")
    assert response.status_code == 400
    assert response.json()["error"]["field"] == "fields"


def test_a_write_only_field_cannot_be_asked_for(api, alice, shop):
    assert api(alice).get("/api/v1/apps/shop?fields=git_credentials").status_code == 400


# -- creating --------------------------------------------------------------------------------


def test_a_member_of_one_team_creates_an_app_in_it(api, bob, acme):
    response = api(bob).post(
        "/api/v1/apps",
        {
            "name": "cart",
            "source": "git",
            "repo_url": "https://github.com/acme/cart.git",
            "git_credentials": "ghp_secret",
            "env": {"DEBUG": "0"},
        },
        format="json",
    )
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["team"] == "acme" and body["has_git_credentials"] is True
    assert "ghp_secret" not in response.content.decode()
    app = App.objects.get(name="cart")
    assert app.created_by == bob and app.env_vars.get().value == "0"


def test_creating_in_a_team_one_is_not_in_is_refused(api, charlie, acme):
    response = api(charlie).post(
        "/api/v1/apps", {"name": "cart", "team": "acme", "source": "image", "image_url": "nginx"}, format="json"
    )
    assert response.status_code == 400
    assert response.json()["error"] == {"code": "invalid", "message": "No team named 'acme' that you belong to.", "field": "team"}


def test_a_member_of_several_teams_must_name_the_team(api, alice):
    other = TeamFactory(name="initech")
    other.memberships.create(user=alice, role="owner")
    response = api(alice).post("/api/v1/apps", {"name": "cart", "source": "image", "image_url": "nginx"}, format="json")
    assert response.status_code == 400
    assert response.json()["error"]["field"] == "team"
    assert "acme, initech" in response.json()["error"]["message"]


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ({"name": "Cart!", "source": "git", "repo_url": "https://github.com/acme/cart.git"}, "name", "lowercase letters"),
        ({"name": "cart", "source": "git", "repo_url": "file:///etc"}, "repo_url", "https:// or ssh"),
        ({"name": "cart", "source": "image", "image_url": "nginx:latest"}, "image_url", "without a tag"),
        ({"name": "cart", "source": "image", "image_url": "nginx", "port": 70000}, "port", "65535"),
        ({"name": "cart", "source": "ftp"}, "source", "not a valid choice"),
        ({"name": "cart", "source": "image", "image_url": "nginx", "colour": "red"}, "colour", "Unknown field"),
        ({"source": "image", "image_url": "nginx"}, "name", "required"),
    ],
)
def test_creating_with_a_bad_field_names_the_field(api, alice, body, field, words):
    response = api(alice).post("/api/v1/apps", body, format="json")
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid" and error["field"] == field and words in error["message"]
    assert not App.objects.filter(name="cart").exists()


def test_a_name_already_taken_is_refused(api, alice, shop):
    response = api(alice).post("/api/v1/apps", {"name": "shop", "source": "image", "image_url": "nginx"}, format="json")
    assert response.status_code == 400
    assert response.json()["error"]["field"] == "name"


def test_a_body_that_is_not_json_is_refused(api, alice):
    response = api(alice).generic("POST", "/api/v1/apps", "{not json", content_type="application/json")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "parse_error"


# -- changing --------------------------------------------------------------------------------


def test_patch_changes_only_the_given_settings(api, bob, shop):
    response = api(bob).patch("/api/v1/apps/shop", {"port": 3000, "replicas": 2}, format="json")
    assert response.status_code == 200
    shop.refresh_from_db()
    assert (shop.port, shop.replicas, shop.branch) == (3000, 2, "main")


def test_patch_refuses_to_rename_an_app(api, alice, shop):
    response = api(alice).patch("/api/v1/apps/shop", {"name": "boutique"}, format="json")
    assert response.status_code == 400
    assert response.json()["error"]["field"] == "name"
    assert "cannot change" in response.json()["error"]["message"]


def test_patch_with_a_bad_value_names_the_field_and_changes_nothing(api, alice, shop):
    response = api(alice).patch("/api/v1/apps/shop", {"branch": "bad..branch", "port": 3000}, format="json")
    assert response.status_code == 400
    assert response.json()["error"]["field"] == "branch"
    shop.refresh_from_db()
    assert shop.port == 8000


def test_an_outsider_cannot_change_an_app(api, charlie, shop):
    assert api(charlie).patch("/api/v1/apps/shop", {"port": 3000}, format="json").status_code == 404


# -- deleting --------------------------------------------------------------------------------


def test_an_owner_deletes_an_app_after_its_resources_are_torn_down(api, alice, shop, monkeypatch):
    deployment = live_deployment(shop, alice)
    torn_down = []
    monkeypatch.setattr(
        api_services, "teardown_app_resources", lambda app: torn_down.append((app.name, app.deployments.get().status))
    )
    response = api(alice).delete("/api/v1/apps/shop")
    assert response.status_code == 204
    # Stopped first, then torn down while the row still said what to remove, then deleted.
    assert torn_down == [("shop", "stopped")]
    assert not App.objects.filter(pk=shop.pk).exists()
    assert not Event.objects.filter(deployment_id=deployment.pk).exists()


def test_a_member_who_is_not_an_owner_cannot_delete(api, bob, shop):
    response = api(bob).delete("/api/v1/apps/shop")
    assert response.status_code == 403
    assert response.json()["error"] == {
        "code": "permission_denied",
        "message": "Only an owner of team acme (or staff) may delete shop.",
        "field": None,
    }
    assert App.objects.filter(pk=shop.pk).exists()


def test_staff_delete_any_app_and_outsiders_see_nothing_to_delete(api, olivia, charlie, monkeypatch):
    image_app = ImageAppFactory(name="billing")
    monkeypatch.setattr(api_services, "teardown_app_resources", lambda app: None)
    assert api(charlie).delete("/api/v1/apps/billing").status_code == 404
    assert api(olivia).delete("/api/v1/apps/billing").status_code == 204
    assert not App.objects.filter(pk=image_app.pk).exists()


def test_when_the_cluster_cannot_be_reached_the_app_is_kept(api, alice, shop, monkeypatch):
    def unreachable(app):
        raise OSError("connection refused")

    monkeypatch.setattr(api_services, "teardown_app_resources", unreachable)
    response = api(alice).delete("/api/v1/apps/shop")
    assert response.status_code == 503
    assert response.json()["error"]["message"] == (
        "Could not remove shop's resources from the cluster (connection refused); the app was not deleted. Try again."
    )
    assert App.objects.filter(pk=shop.pk).exists()
