"""The apps list and the new-app form: what each row says, and every bad input answered next to its field."""

from __future__ import annotations

import pytest
from django.urls import reverse

from apps.accounts.models import Membership, Team
from apps.deployments.health import Health, HealthState
from apps.deployments.health_store import record
from apps.deployments.models import App
from tests.factories import ImageAppFactory
from tests.web.conftest import deploy

pytestmark = pytest.mark.django_db

GIT_APP = {"name": "blog", "source": "git", "repo_url": "https://github.com/acme/blog.git", "branch": "main",
           "builder": "railpack", "port": "8000", "replicas": "1"}  # fmt: skip


def row_of(body: str, name: str) -> str:
    start = body.index(f'id="app-{App.objects.get(name=name).pk}"')
    return body[start : body.index("</tr>", start)]


def test_a_row_shows_source_status_health_commit_and_last_deploy(as_alice, shop, alice):
    from django.utils import timezone

    deploy(shop, alice, to="live")
    record(app_id=shop.pk, health=Health(HealthState.UNHEALTHY, "CrashLoopBackOff"), now=timezone.now())
    row = row_of(as_alice.get(reverse("app-list")).content.decode(), "shop")
    assert ">shop</a>" in row and ">git<" in row
    assert "live" in row and "badge-ok" in row
    assert "Unhealthy" in row and "CrashLoopBackOff" in row
    assert "3f2a9c1" in row
    assert ">just now</time>" in row


def test_an_image_app_shows_its_tag_before_its_first_deploy(as_alice, acme):
    ImageAppFactory(name="billing", team=acme, image_url="ghcr.io/acme/billing", image_tag="v2")
    row = row_of(as_alice.get(reverse("app-list")).content.decode(), "billing")
    assert "ghcr.io/acme/billing:v2" in row and "not deployed" in row and "never" in row


def test_the_list_connects_to_its_live_stream_from_the_newest_event(as_alice, shop, alice):
    deploy(shop, alice, to="building")
    body = as_alice.get(reverse("app-list")).content.decode()
    newest = shop.events.order_by("-id").first().pk
    assert f'sse-connect="{reverse("app-list-events")}?after={newest}"' in body


def test_a_user_with_one_team_has_it_chosen_already(as_alice, acme):
    body = as_alice.get(reverse("app-create")).content.decode()
    assert f'<option value="{acme.pk}" selected>acme</option>' in body


def test_a_user_with_several_teams_chooses_among_their_own(client, alice, acme, charlie):
    other = Team.objects.create(name="initech")
    Membership.objects.create(team=other, user=alice)
    client.force_login(alice)
    body = client.get(reverse("app-create")).content.decode()
    assert ">acme<" in body and ">initech<" in body and ">globex<" not in body


def test_creating_a_git_app_takes_you_to_its_page(as_alice, acme):
    response = as_alice.post(reverse("app-create"), {**GIT_APP, "team": acme.pk, "env": "DEBUG=0\nLOG_LEVEL=info"})
    assert response.status_code == 302 and response["Location"] == reverse("app-detail", args=["blog"])
    app = App.objects.get(name="blog")
    assert (app.team, app.source, app.repo_url, app.builder) == (acme, "git", GIT_APP["repo_url"], "railpack")
    assert dict(app.env_vars.values_list("name", "value")) == {"DEBUG": "0", "LOG_LEVEL": "info"}


def test_creating_an_image_app_keeps_image_and_tag(as_alice, acme):
    data = {"name": "billing", "source": "image", "image_url": "ghcr.io/acme/billing", "image_tag": "v2.3.1",
            "port": "8080", "replicas": "2", "team": acme.pk, "builder": "railpack"}  # fmt: skip
    assert as_alice.post(reverse("app-create"), data).status_code == 302
    app = App.objects.get(name="billing")
    assert (app.source, app.image_url, app.image_tag, app.port, app.replicas) == (
        "image",
        "ghcr.io/acme/billing",
        "v2.3.1",
        8080,
        2,
    )


def test_git_credentials_and_secret_env_are_stored_but_never_shown_again(as_alice, acme):
    data = {**GIT_APP, "team": acme.pk, "git_credentials": "ghp_tokenvalue123", "secret_env": "API_KEY=sk-live-9f8e7d"}
    response = as_alice.post(reverse("app-create"), data, follow=True)
    app = App.objects.get(name="blog")
    assert app.git_credentials == "ghp_tokenvalue123"
    assert app.env_vars.get(name="API_KEY").secret
    body = response.content.decode()
    assert "ghp_tokenvalue123" not in body and "sk-live-9f8e7d" not in body


def errors_of(response, field: str) -> list[str]:
    return list(response.context["form"].errors.get(field, []))


@pytest.mark.parametrize(
    ("changes", "field", "message"),
    [
        ({"name": "Shop!"}, "name", "App names use lowercase letters"),
        ({"name": "api"}, "name", "'api' is reserved"),
        ({"repo_url": "file:///srv/shop"}, "repo_url", "file:// and local paths are not allowed"),
        ({"repo_url": "https://bob:pw@github.com/x.git"}, "repo_url", "Put credentials in the credentials field"),
        ({"repo_url": ""}, "repo_url", "A git app needs a repository URL."),
        ({"branch": "a..b"}, "branch", "Not a valid git branch name"),
        ({"port": "70000"}, "port", "less than or equal to 65535"),
        ({"replicas": "0"}, "replicas", "greater than or equal to 1"),
        ({"env": "DEBUG"}, "env", "Line 1: write NAME=value"),
        ({"env": "1BAD=x"}, "env", "1BAD: Environment variable names use letters"),
        ({"env": "A=1", "secret_env": "A=2"}, "secret_env", "A is also in the plain variables"),
    ],
)
def test_a_bad_git_app_is_answered_next_to_the_field(as_alice, acme, changes, field, message):
    response = as_alice.post(reverse("app-create"), {**GIT_APP, "team": acme.pk, **changes})
    assert response.status_code == 200
    assert any(message in e for e in errors_of(response, field)), response.context["form"].errors
    assert f'id="id_{field}_error"' in response.content.decode()
    assert not App.objects.filter(name=changes.get("name", "blog")).exists()


@pytest.mark.parametrize(
    ("changes", "field", "message"),
    [
        ({"image_url": ""}, "image_url", "An image app needs an image"),
        ({"image_url": "ghcr.io/acme/billing:v1"}, "image_url", "the tag has its own field"),
        ({"image_tag": "-bad"}, "image_tag", "Not a valid image tag"),
    ],
)
def test_a_bad_image_app_is_answered_next_to_the_field(as_alice, acme, changes, field, message):
    data = {"name": "billing", "source": "image", "image_url": "ghcr.io/acme/billing", "image_tag": "v1",
            "port": "8080", "replicas": "1", "team": acme.pk, "builder": "railpack", **changes}  # fmt: skip
    response = as_alice.post(reverse("app-create"), data)
    assert response.status_code == 200
    assert any(message in e for e in errors_of(response, field)), response.context["form"].errors


def test_a_taken_name_is_answered_next_to_the_name(as_alice, acme, shop):
    response = as_alice.post(reverse("app-create"), {**GIT_APP, "name": "shop", "team": acme.pk})
    assert response.status_code == 200
    assert errors_of(response, "name") == ["App with this Name already exists."]


def test_nobody_can_create_an_app_in_a_team_they_are_not_in(as_alice, charlie):
    globex = charlie.teams.get()
    response = as_alice.post(reverse("app-create"), {**GIT_APP, "team": globex.pk})
    assert response.status_code == 200
    assert errors_of(response, "team") and not App.objects.filter(name="blog").exists()


def test_a_user_without_a_team_is_told_why_they_cannot_create_apps(client, olivia):
    from tests.factories import UserFactory

    loner = UserFactory(username="dave")
    client.force_login(loner)
    body = client.get(reverse("app-create")).content.decode()
    assert "You belong to no team yet" in body and "Create app" not in body
