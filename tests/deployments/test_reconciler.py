"""The reconciler re-drives lost work and fails what passed its deadline, from the database alone."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from apps.deployments import reconciler, tasks
from apps.deployments.lifecycle import Status, transition
from apps.deployments.models import Deployment, Event
from tests.factories import DeploymentFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def enqueued(monkeypatch):
    """Record what the reconciler sends to the broker (the seam between it and the worker)."""
    sent: list[tuple[str, int]] = []
    for name in ("run_deployment", "apply_deployment", "cleanup_deployment", "restore_app"):
        task = getattr(tasks, name)
        monkeypatch.setattr(task, "delay", lambda pk, *a, _n=name: sent.append((_n, pk)))
    return sent


def aged(deployment: Deployment, seconds: int) -> Deployment:
    Deployment.objects.filter(pk=deployment.pk).update(status_changed_at=timezone.now() - dt.timedelta(seconds=seconds))
    deployment.refresh_from_db()
    return deployment


def test_a_pending_deployment_nobody_took_is_enqueued_again(shop, enqueued, settings):
    lost = aged(DeploymentFactory(app=shop), settings.REDRIVE_AFTER + 5)
    fresh = DeploymentFactory(app=shop)
    assert reconciler.run()["redriven"] == 1
    assert enqueued == [("run_deployment", lost.pk)]
    assert fresh.pk not in [pk for _, pk in enqueued]


def test_manifests_never_applied_are_applied_again(shop, enqueued, settings):
    deployment = DeploymentFactory(app=shop)
    transition(deployment, to=Status.DEPLOYING, image="r/x@sha256:" + "a" * 64)
    aged(deployment, settings.REDRIVE_AFTER + 5)
    reconciler.run()
    assert ("apply_deployment", deployment.pk) in enqueued


@pytest.mark.parametrize(
    ("status", "path", "message"),
    [
        ("pending", [], "timed out: still pending after 900 s (no worker took it)"),
        ("building", [Status.BUILDING], "timed out: still building after 1800 s (the build did not finish)"),
        ("deploying", [Status.DEPLOYING], "timed out: still deploying after 600 s (the rollout did not finish)"),
    ],
)
def test_a_deployment_past_its_deadline_fails_with_the_reason(shop, enqueued, settings, status, path, message):
    deployment = DeploymentFactory(app=shop)
    for to in path:
        transition(deployment, to=to)
    aged(deployment, settings.DEADLINES[status] + 1)
    assert reconciler.run()["failed"] == 1
    deployment.refresh_from_db()
    assert (deployment.status, deployment.error) == ("failed", message)
    assert deployment.log_lines.last().text == f"Failed: {message}"
    assert ("cleanup_deployment", deployment.pk) in enqueued


def test_deadlines_hold_even_when_every_process_was_down_for_days(shop, enqueued):
    deployment = aged(DeploymentFactory(app=shop), 3 * 86400)
    transition(deployment, to=Status.BUILDING)
    aged(deployment, 3 * 86400)
    reconciler.run()
    deployment.refresh_from_db()
    assert deployment.status == "failed"


def test_settled_deployments_are_left_alone(shop, enqueued):
    deployment = DeploymentFactory(app=shop)
    transition(deployment, to=Status.DEPLOYING)
    transition(deployment, to=Status.LIVE)
    aged(deployment, 10 * 86400)
    assert reconciler.run() == {"failed": 0, "redriven": 0, "reapplied": 0}
    assert enqueued == []


def test_events_older_than_the_retention_are_removed(shop, enqueued, settings):
    old = Event.objects.create(
        app=shop,
        kind="status",
        to_value="live",
        created_at=timezone.now() - dt.timedelta(seconds=settings.EVENT_RETENTION_SECONDS + 1),
    )
    recent = Event.objects.create(app=shop, kind="status", to_value="live")
    reconciler.run()
    assert not Event.objects.filter(pk=old.pk).exists() and Event.objects.filter(pk=recent.pk).exists()


def test_webhook_deliveries_older_than_the_retention_are_removed(shop, enqueued, settings):
    from apps.webhooks.models import WebhookDelivery

    def delivery(days: int) -> WebhookDelivery:
        return WebhookDelivery.objects.create(
            app=shop, provider="github", signature="invalid", outcome="rejected", status_code=401,
            received_at=timezone.now() - dt.timedelta(days=days),
        )  # fmt: skip

    old, recent = delivery(settings.DELIVERY_RETENTION_DAYS + 1), delivery(1)
    reconciler.run()
    assert list(WebhookDelivery.objects.values_list("pk", flat=True)) == [recent.pk]
    assert old.pk != recent.pk
