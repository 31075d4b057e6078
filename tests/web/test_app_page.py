"""The app page: status and its meaning, health in the spec's words, URL, history, settings, env, webhook."""

from __future__ import annotations

import pytest
from django.urls import reverse
from django.utils import timezone
from django.utils.html import escape

from apps.deployments.health import REASON_MEANINGS, Health, HealthState
from apps.deployments.health_store import record
from apps.deployments.lifecycle import MEANINGS
from apps.webhooks.models import WebhookDelivery
from tests.web.conftest import IMAGE, deploy

pytestmark = pytest.mark.django_db


def page(client, name="shop") -> str:
    response = client.get(reverse("app-detail", args=[name]))
    assert response.status_code == 200
    return response.content.decode()


def section(body: str, element_id: str) -> str:
    start = body.index(f'id="{element_id}"')
    return body[start : body.index("</section>", start)]


def test_the_status_says_what_it_means(as_alice, shop, alice):
    deploy(shop, alice, to="building")
    status = section(page(as_alice), "status")
    assert "building" in status and MEANINGS["building"] in status
    assert reverse("deployment-detail", args=["shop", 1]) in status


def test_a_failed_deployment_shows_its_error_on_the_app_page(as_alice, shop, alice):
    deploy(shop, alice, to="failed", error="build failed at step build: no matching distribution for Django==9")
    assert "build failed at step build: no matching distribution for Django==9" in section(page(as_alice), "status")


def test_no_health_indicator_right_after_triggering(as_alice, shop, alice):
    deploy(shop, alice, to="deploying")
    health = section(page(as_alice), "health")
    assert "Healthy" not in health and "Unhealthy" not in health
    assert "No indicator" in health


def test_health_shows_the_reason_and_its_meaning(as_alice, shop, alice):
    deploy(shop, alice, to="live")
    record(app_id=shop.pk, health=Health(HealthState.UNHEALTHY, "readiness probe failing"), now=timezone.now())
    health = section(page(as_alice), "health")
    assert "Unhealthy" in health and "readiness probe failing" in health
    assert escape(REASON_MEANINGS["readiness probe failing"]) in health


def test_a_healthy_app_shows_no_indicator_but_says_nothing_is_wrong(as_alice, shop, alice):
    deploy(shop, alice, to="live")
    record(app_id=shop.pk, health=Health(HealthState.HEALTHY), now=timezone.now())
    health = section(page(as_alice), "health")
    assert "Unhealthy" not in health and "health-" not in health
    assert "No problems: the app's pods are running and passing their checks." in health


def test_the_page_links_the_apps_url(as_alice, shop):
    assert 'href="http://shop.apps.localhost"' in page(as_alice)


def test_the_history_lists_each_deployment_with_commit_image_author_and_phases(as_alice, shop, alice):
    deploy(shop, alice, to="failed")
    deploy(shop, alice, to="live")
    history = section(page(as_alice), "history")
    assert history.index(">#2<") < history.index(">#1<")
    assert "3f2a9c1" in history and "Fix the checkout total" in history and "Alice Example" in history
    assert "127.0.0.1:5000/shop@sha256:aaaaaaaaaaaa" in history
    assert ">alice<" in history
    assert "pending" in history and "building" in history and "deploying" in history
    assert "Manual" in history


def test_the_page_follows_its_live_stream_from_the_newest_event(as_alice, shop, alice):
    deploy(shop, alice, to="live")
    newest = shop.events.order_by("-id").first().pk
    assert f'sse-connect="{reverse("app-events", args=["shop"])}?after={newest}"' in page(as_alice)


def test_app_logs_are_offered_only_while_the_app_is_live(as_alice, shop, alice):
    deploy(shop, alice, to="building")
    assert reverse("app-logs", args=["shop"]) not in page(as_alice)
    deploy(shop, alice, to="live")
    assert reverse("app-logs", args=["shop"]) in page(as_alice)


# -- settings --------------------------------------------------------------------------------


SETTINGS = {
    "port": "8080",
    "replicas": "3",
    "cpu_limit": "1",
    "memory_limit": "1Gi",
    "health_check_path": "/healthz",
    "domain": "",
}


def test_settings_are_saved_and_apply_at_the_next_deploy(as_alice, shop):
    response = as_alice.post(reverse("app-settings", args=["shop"]), SETTINGS)
    assert response.status_code == 302 and response["Location"].endswith("#settings")
    shop.refresh_from_db()
    assert (shop.port, shop.replicas, shop.cpu_limit, shop.memory_limit, shop.health_check_path) == (
        8080,
        3,
        "1",
        "1Gi",
        "/healthz",
    )


@pytest.mark.parametrize(
    ("changes", "field", "message"),
    [
        ({"port": "0"}, "port", "greater than or equal to 1"),
        ({"replicas": "99"}, "replicas", "less than or equal to 20"),
        ({"cpu_limit": "lots"}, "cpu_limit", "Give CPU as cores or millicores"),
        ({"memory_limit": "1GB"}, "memory_limit", "Give memory with a unit"),
        ({"health_check_path": "healthz"}, "health_check_path", "Start the path with '/'"),
        ({"domain": "https://shop.example.com/"}, "domain", "Give a host name without scheme or path"),
    ],
)
def test_bad_settings_are_answered_next_to_the_field_and_not_saved(as_alice, shop, changes, field, message):
    response = as_alice.post(reverse("app-settings", args=["shop"]), {**SETTINGS, **changes})
    assert response.status_code == 200
    errors = response.context["settings_form"].errors[field]
    assert any(message in e for e in errors), errors
    shop.refresh_from_db()
    assert shop.port == 8000 and shop.replicas == 1


# -- environment variables -----------------------------------------------------------------------


def test_a_plain_variable_is_shown_with_its_value(as_alice, shop):
    as_alice.post(reverse("env-var-set", args=["shop"]), {"name": "LOG_LEVEL", "value": "debug"})
    env = section(page(as_alice), "env")
    assert "LOG_LEVEL" in env and "debug" in env


def test_a_secret_value_never_appears_in_the_html_after_saving(as_alice, shop):
    response = as_alice.post(
        reverse("env-var-set", args=["shop"]), {"name": "API_KEY", "value": "sk-live-4242", "secret": "on"}, follow=True
    )
    assert shop.env_vars.get(name="API_KEY").value == "sk-live-4242"
    for body in (response.content.decode(), page(as_alice)):
        assert "sk-live-4242" not in body
        assert "API_KEY" in body and "write-only" in body


def test_a_secret_value_never_appears_when_the_form_comes_back_with_errors(as_alice, shop):
    response = as_alice.post(reverse("env-var-set", args=["shop"]), {"name": "1BAD", "value": "sk-live-4242", "secret": "on"})
    assert response.status_code == 200
    assert "sk-live-4242" not in response.content.decode()
    assert "Type the secret value again" in response.content.decode()


def test_saving_an_existing_name_replaces_its_value(as_alice, shop):
    as_alice.post(reverse("env-var-set", args=["shop"]), {"name": "LOG_LEVEL", "value": "debug"})
    as_alice.post(reverse("env-var-set", args=["shop"]), {"name": "LOG_LEVEL", "value": "info"})
    assert list(shop.env_vars.values_list("name", "value")) == [("LOG_LEVEL", "info")]


def test_a_bad_variable_name_is_answered_next_to_the_name(as_alice, shop):
    response = as_alice.post(reverse("env-var-set", args=["shop"]), {"name": "1BAD", "value": "x"})
    assert response.status_code == 200
    assert "do not start with a digit" in response.context["env_form"].errors["name"][0]
    assert not shop.env_vars.exists()


def test_a_variable_can_be_removed(as_alice, shop):
    as_alice.post(reverse("env-var-set", args=["shop"]), {"name": "LOG_LEVEL", "value": "debug"})
    response = as_alice.post(reverse("env-var-delete", args=["shop", "LOG_LEVEL"]))
    assert response.status_code == 302 and not shop.env_vars.exists()


def test_removing_a_variable_that_does_not_exist_is_404(as_alice, shop):
    assert as_alice.post(reverse("env-var-delete", args=["shop", "NOPE"])).status_code == 404


def test_removing_a_variable_needs_post(as_alice, shop):
    assert as_alice.get(reverse("env-var-delete", args=["shop", "NOPE"])).status_code == 405


# -- webhook ---------------------------------------------------------------------------------------


def test_the_webhook_section_has_the_url_and_steps_for_each_provider(as_alice, shop):
    webhook = section(page(as_alice), "webhook")
    assert f"/webhooks/{shop.webhook_id}/" in webhook
    for provider in ("GitHub", "GitLab", "Gitea / Forgejo"):
        assert provider in webhook
    assert shop.webhook_secret not in webhook


def test_a_new_webhook_secret_is_shown_once(as_alice, shop):
    old = shop.webhook_secret
    response = as_alice.post(reverse("webhook-rotate", args=["shop"]))
    shop.refresh_from_db()
    assert shop.webhook_secret != old
    assert response.status_code == 200 and shop.webhook_secret in response.content.decode()
    assert response["Cache-Control"] == "no-store"
    assert shop.webhook_secret not in page(as_alice)


def test_recent_deliveries_show_provider_event_signature_and_outcome(as_alice, shop, alice):
    d = deploy(shop, alice, to="live", image=IMAGE)
    WebhookDelivery.objects.create(app=shop, provider="github", event="push", delivery_id="abc-1", signature="valid",
                                   outcome="deployed", status_code=202, deployment=d)  # fmt: skip
    WebhookDelivery.objects.create(app=shop, provider="gitlab", event="Push Hook", signature="invalid", outcome="rejected",
                                   reason="signature does not match", status_code=401)  # fmt: skip
    webhook = section(page(as_alice), "webhook")
    assert "GitHub" in webhook and "GitLab" in webhook
    assert "deployed" in webhook and reverse("deployment-detail", args=["shop", d.number]) in webhook
    assert "rejected" in webhook and "signature does not match" in webhook
