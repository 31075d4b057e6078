"""Deleting an app: type its name, its cluster resources go first, then the app and its history."""

from __future__ import annotations

import pytest
from django.urls import reverse

from apps.deployments.models import App, Deployment
from apps.web import services as web_services
from tests.web.conftest import deploy

pytestmark = pytest.mark.django_db


def test_the_delete_page_asks_for_the_apps_name(as_alice, shop):
    body = as_alice.get(reverse("app-delete", args=["shop"])).content.decode()
    assert "Type the app&#x27;s name to confirm" in body and "cannot be undone" in body


def test_a_wrong_name_deletes_nothing(as_alice, shop):
    response = as_alice.post(reverse("app-delete", args=["shop"]), {"confirm_name": "shop2"})
    assert response.status_code == 200
    assert response.context["form"].errors["confirm_name"] == ["Type shop exactly to delete this app."]
    assert App.objects.filter(name="shop").exists()


def test_the_right_name_tears_down_then_deletes_the_app(as_alice, shop, alice, monkeypatch):
    deploy(shop, alice, to="live")
    seen = []

    def teardown(app):
        # The teardown runs while the app still exists, with its deployments already stopped.
        seen.append((app.name, list(app.deployments.values_list("status", flat=True))))

    monkeypatch.setattr(web_services, "_teardown_now", teardown)
    response = as_alice.post(reverse("app-delete", args=["shop"]), {"confirm_name": "shop"})
    assert response.status_code == 302 and response["Location"] == reverse("app-list")
    assert seen == [("shop", ["stopped"])]
    assert not App.objects.filter(name="shop").exists() and not Deployment.objects.exists()


def test_when_the_cluster_cannot_be_reached_the_app_is_kept_and_the_page_says_so(as_alice, shop, alice, monkeypatch):
    def teardown(app):
        raise ConnectionError("connection refused")

    monkeypatch.setattr(web_services, "_teardown_now", teardown)
    response = as_alice.post(reverse("app-delete", args=["shop"]), {"confirm_name": "shop"})
    assert response.status_code == 502
    assert (
        "Could not remove shop&#x27;s resources from the cluster (connection refused); the app was not deleted."
        in response.content.decode()
    )
    assert App.objects.filter(name="shop").exists()
