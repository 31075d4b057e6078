"""Every page and form of the UI answers the cast as the team rule says: members act, outsiders get 404, strangers sign in."""

from __future__ import annotations

import pytest
from django.urls import reverse

from apps.deployments.lifecycle import Status
from apps.deployments.models import App
from tests.web.conftest import deploy

pytestmark = pytest.mark.django_db

# (url name, args without the app name, method, data)
APP_PAGES = [
    ("app-detail", (), "get", None),
    ("app-action", ("stop",), "get", None),
    ("app-delete", (), "get", None),
    ("app-logs", (), "get", None),
    ("deployment-detail", (1,), "get", None),
    ("deployment-log-download", (1,), "get", None),
]
APP_WRITES = [
    ("app-action", ("stop",), "post", {}),
    ("app-settings", (), "post", {"port": 8080, "replicas": 2, "cpu_limit": "500m", "memory_limit": "512Mi"}),
    ("env-var-set", (), "post", {"name": "DEBUG", "value": "0"}),
    ("webhook-rotate", (), "post", {}),
]
STREAMS = [
    ("app-events", ()),
    ("deployment-log-events", (1,)),
    ("app-log-events", ()),
]


@pytest.fixture
def live_shop(shop, alice):
    deploy(shop, alice, to=Status.LIVE)
    return shop


def url(name, args, app="shop"):
    return reverse(name, args=[app, *args])


@pytest.mark.parametrize(("name", "args", "method", "data"), APP_PAGES)
@pytest.mark.parametrize("who", ["alice", "bob", "olivia"])
def test_team_members_and_staff_see_every_page_of_an_app(client, request, live_shop, who, name, args, method, data):
    client.force_login(request.getfixturevalue(who))
    assert client.get(url(name, args)).status_code == 200


@pytest.mark.parametrize(("name", "args", "method", "data"), APP_PAGES + APP_WRITES)
def test_an_outsider_gets_404_on_every_page_and_form_of_someone_elses_app(client, charlie, live_shop, name, args, method, data):
    client.force_login(charlie)
    response = getattr(client, method)(url(name, args), data or {})
    assert response.status_code == 404
    live_shop.refresh_from_db()
    assert live_shop.port == 8000 and not live_shop.env_vars.exists()


@pytest.mark.parametrize(("name", "args", "method", "data"), APP_PAGES + APP_WRITES)
def test_an_anonymous_visitor_is_sent_to_sign_in(client, live_shop, name, args, method, data):
    target = url(name, args)
    response = getattr(client, method)(target, data or {})
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login") + "?next=")


@pytest.mark.parametrize("who", ["alice", "bob", "olivia"])
def test_members_and_staff_can_act_on_the_app(client, request, live_shop, who):
    client.force_login(request.getfixturevalue(who))
    response = client.post(url("env-var-set", ()), {"name": "DEBUG", "value": "0"})
    assert response.status_code == 302
    assert live_shop.env_vars.get(name="DEBUG").value == "0"


def test_an_outsider_gets_404_on_the_delete_form_and_the_app_survives(client, charlie, live_shop):
    client.force_login(charlie)
    assert client.post(url("app-delete", ()), {"confirm_name": "shop"}).status_code == 404
    assert App.objects.filter(name="shop").exists()


def test_a_missing_app_and_a_hidden_one_look_the_same(client, charlie, live_shop):
    client.force_login(charlie)
    hidden = client.get(url("app-detail", ()))
    missing = client.get(url("app-detail", (), app="no-such-app"))
    assert hidden.status_code == missing.status_code == 404


@pytest.mark.parametrize(("name", "args"), STREAMS)
def test_an_outsider_gets_404_on_every_live_stream(client, charlie, live_shop, name, args):
    client.force_login(charlie)
    assert client.get(url(name, args)).status_code == 404


@pytest.mark.parametrize(("name", "args"), [*STREAMS, ("app-list-events", None)])
def test_an_anonymous_visitor_gets_no_stream(client, live_shop, name, args):
    target = reverse(name) if args is None else url(name, args)
    response = client.get(target)
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


@pytest.mark.parametrize("name", ["app-list", "app-create"])
def test_the_list_and_new_app_pages_need_signing_in(client, db, name):
    response = client.get(reverse(name))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_the_apps_list_shows_only_the_users_teams_apps(client, charlie, alice, live_shop):
    from tests.factories import AppFactory

    AppFactory(name="globex-site", team=charlie.teams.get())
    client.force_login(alice)
    body = client.get(reverse("app-list")).content.decode()
    assert "shop" in body and "globex-site" not in body
    client.force_login(charlie)
    body = client.get(reverse("app-list")).content.decode()
    assert "globex-site" in body and ">shop<" not in body


def test_staff_see_every_teams_apps_in_the_list(client, olivia, charlie, live_shop):
    from tests.factories import AppFactory

    AppFactory(name="globex-site", team=charlie.teams.get())
    client.force_login(olivia)
    body = client.get(reverse("app-list")).content.decode()
    assert ">shop<" in body and ">globex-site<" in body


def test_the_not_found_page_keeps_the_layout_and_says_why(client, charlie, live_shop):
    client.force_login(charlie)
    body = client.get(url("app-detail", ())).content.decode()
    assert "<h1>Not found</h1>" in body and "belongs to a team you are not in" in body
    assert ">shop<" not in body
