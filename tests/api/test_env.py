"""Environment variables over the API: secrets are write-only."""

from __future__ import annotations

import pytest

from apps.deployments import services
from apps.deployments.models import EnvVar

pytestmark = pytest.mark.django_db


def test_secret_values_are_never_shown(api, alice, shop):
    services.env_var_set(app=shop, name="DEBUG", value="0")
    services.env_var_set(app=shop, name="STRIPE_KEY", value="sk_live_123", secret=True)
    response = api(alice).get("/api/v1/apps/shop/env")
    assert response.json() == [
        {"name": "DEBUG", "value": "0", "secret": False, "build_time": False},
        {"name": "STRIPE_KEY", "value": None, "secret": True, "build_time": False},
    ]
    assert "sk_live_123" not in response.content.decode()


def test_a_member_sets_a_variable_and_a_secret_is_not_echoed(api, bob, shop):
    response = api(bob).put("/api/v1/apps/shop/env/STRIPE_KEY", {"value": "sk_live_123", "secret": True}, format="json")
    assert response.status_code == 200
    assert response.json() == {"name": "STRIPE_KEY", "value": None, "secret": True, "build_time": False}
    assert EnvVar.objects.get(app=shop, name="STRIPE_KEY").value == "sk_live_123"


def test_setting_a_variable_again_replaces_it(api, alice, shop):
    api(alice).put("/api/v1/apps/shop/env/DEBUG", {"value": "1"}, format="json")
    api(alice).put("/api/v1/apps/shop/env/DEBUG", {"value": "0", "build_time": True}, format="json")
    assert list(EnvVar.objects.filter(app=shop).values_list("name", "value", "build_time")) == [("DEBUG", "0", True)]


def test_a_bad_variable_name_is_refused_naming_it(api, alice, shop):
    response = api(alice).put("/api/v1/apps/shop/env/1BAD", {"value": "x"}, format="json")
    assert response.status_code == 400
    assert response.json()["error"]["field"] == "name"
    assert "letters, digits and underscores" in response.json()["error"]["message"]


def test_a_value_is_required(api, alice, shop):
    response = api(alice).put("/api/v1/apps/shop/env/DEBUG", {}, format="json")
    assert response.status_code == 400
    assert response.json()["error"] == {"code": "invalid", "message": "This field is required.", "field": "value"}


def test_deleting_a_variable(api, alice, shop):
    services.env_var_set(app=shop, name="DEBUG", value="0")
    assert api(alice).delete("/api/v1/apps/shop/env/DEBUG").status_code == 204
    assert not EnvVar.objects.filter(app=shop).exists()
    response = api(alice).delete("/api/v1/apps/shop/env/DEBUG")
    assert response.status_code == 404
    assert response.json()["error"]["message"] == "shop has no variable named 'DEBUG'."


def test_outsiders_neither_read_nor_write_variables(api, charlie, shop):
    services.env_var_set(app=shop, name="DEBUG", value="0")
    client = api(charlie)
    assert client.get("/api/v1/apps/shop/env").status_code == 404
    assert client.put("/api/v1/apps/shop/env/DEBUG", {"value": "1"}, format="json").status_code == 404
    assert client.delete("/api/v1/apps/shop/env/DEBUG").status_code == 404
    assert EnvVar.objects.get(app=shop).value == "0"


def test_a_field_mask_works_on_variables(api, alice, shop):
    services.env_var_set(app=shop, name="DEBUG", value="0")
    assert api(alice).get("/api/v1/apps/shop/env?fields=name").json() == [{"name": "DEBUG"}]
