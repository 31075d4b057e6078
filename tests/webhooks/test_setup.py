"""Setup steps per provider, secret rotation, and the recent deliveries the app page and API show."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from apps.deployments.models import Event
from apps.webhooks.models import WebhookDelivery
from apps.webhooks.selectors import recent_deliveries
from apps.webhooks.services import delivery_record, webhook_secret_rotate
from apps.webhooks.setup import setup_instructions, webhook_url
from tests.factories import AppFactory
from tests.webhooks.conftest import deliver, fixture_bytes

pytestmark = pytest.mark.django_db


def test_the_webhook_url_is_the_public_url_and_the_apps_webhook_id(shop, settings):
    settings.PUBLIC_URL = "https://slipway.example.com"
    assert webhook_url(shop) == f"https://slipway.example.com/webhooks/{shop.webhook_id}/"


def test_setup_steps_cover_github_gitlab_and_gitea_with_url_json_secret_and_push_events(shop, settings):
    settings.PUBLIC_URL = "https://slipway.example.com"
    url = f"https://slipway.example.com/webhooks/{shop.webhook_id}/"
    github, gitlab, gitea = setup_instructions(shop, "the-secret")

    assert [p.provider for p in (github, gitlab, gitea)] == ["github", "gitlab", "gitea"]
    assert {(f.label, f.value) for f in github.fields} == {
        ("Payload URL", url),
        ("Content type", "application/json"),
        ("Secret", "the-secret"),
        ("Which events", "Just the push event"),
    }
    assert {(f.label, f.value) for f in gitlab.fields} == {
        ("URL", url),
        ("Secret token", "the-secret"),
        ("Trigger", "Push events (branch filter: main)"),
    }
    assert ("POST content type", "application/json") in {(f.label, f.value) for f in gitea.fields}
    assert "ALLOWED_HOST_LIST" in gitea.note
    for provider in (github, gitlab, gitea):
        assert [f.label for f in provider.fields if f.secret] == [
            next(f.label for f in provider.fields if f.value == "the-secret")
        ]
        assert any(url in step for step in provider.steps)


def test_setup_steps_name_the_apps_own_branch(acme):
    app = AppFactory(team=acme, branch="release/2.0")
    gitlab = setup_instructions(app, "s")[1]
    assert "release/2.0" in dict((f.label, f.value) for f in gitlab.fields)["Trigger"]


def test_rotating_the_secret_returns_a_new_one_and_records_who_did_it(shop, alice):
    old = shop.webhook_secret
    new = webhook_secret_rotate(app=shop, actor=alice)
    shop.refresh_from_db()
    assert shop.webhook_secret == new != old
    event = Event.objects.get(app=shop, kind="action")
    assert (event.to_value, event.reason, event.actor) == ("webhook secret rotated", "rotated by alice", "alice")
    assert new not in event.reason


def test_recent_deliveries_are_the_apps_own_newest_first_and_limited(shop, acme):
    other = AppFactory(team=acme)
    now = timezone.now()
    for n in range(25):
        delivery = delivery_record(
            app=shop,
            provider="github",
            event="push",
            delivery_id=f"d-{n}",
            signature="valid",
            outcome="ignored",
            reason="r",
            status_code=200,
        )
        WebhookDelivery.objects.filter(pk=delivery.pk).update(received_at=now - dt.timedelta(minutes=25 - n))
    delivery_record(
        app=other,
        provider="gitlab",
        event="Push Hook",
        delivery_id="x",
        signature="valid",
        outcome="ignored",
        reason="r",
        status_code=200,
    )

    recent = recent_deliveries(shop)
    assert [d.delivery_id for d in recent] == [f"d-{n}" for n in range(24, 4, -1)]
    assert len(recent_deliveries(shop, limit=3)) == 3


def test_a_recorded_delivery_keeps_overlong_provider_values_within_its_columns(shop):
    delivery = delivery_record(
        app=shop,
        provider="",
        event="e" * 500,
        delivery_id="d" * 500,
        signature="missing",
        outcome="rejected",
        reason="r" * 1000,
        status_code=400,
    )
    delivery.full_clean()
    assert delivery.provider == "unknown"
    assert (len(delivery.event), len(delivery.delivery_id), len(delivery.reason)) == (100, 100, 300)


def test_the_admin_lists_deliveries_with_their_outcome_and_deployment(client, olivia, shop):
    shop.branch = "master"
    shop.save(update_fields=["branch"])
    deliver(client, shop, "github", fixture_bytes("github/push"), delivery="admin-listed")
    client.force_login(olivia)
    page = client.get("/admin/webhooks/webhookdelivery/?outcome__exact=deployed")
    assert page.status_code == 200
    assert b"admin-listed" in page.content and b"shop #1" in page.content
    for query in ("?provider__exact=github", "?signature__exact=valid", "?q=admin-listed"):
        assert client.get("/admin/webhooks/webhookdelivery/" + query).status_code == 200
