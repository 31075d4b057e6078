"""Reads: the app a webhook URL belongs to, and its recent deliveries."""

from __future__ import annotations

from apps.deployments.models import App
from apps.webhooks.models import WebhookDelivery


def app_for_webhook(*, webhook_id: str) -> App:
    """Return the app whose webhook URL carries ``webhook_id``; raise App.DoesNotExist otherwise."""
    return App.objects.get(webhook_id=webhook_id)


def recent_deliveries(app: App, limit: int = 20) -> list[WebhookDelivery]:
    """Return the app's latest deliveries, newest first, with the deployment each one started."""
    return list(WebhookDelivery.objects.filter(app=app).select_related("deployment").order_by("-received_at", "-id")[:limit])
