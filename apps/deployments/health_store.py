"""Writes of an app's runtime health: only when it changed, with an event."""

from __future__ import annotations

import datetime as dt

from django.db import transaction

from apps.deployments import events
from apps.deployments.health import Health, HealthState


def record(*, app_id: int, health: Health, now: dt.datetime) -> bool:
    """Store the app's health if it differs from what is stored; return whether it changed."""
    from apps.deployments.models import App, Event

    with transaction.atomic():
        app = App.objects.select_for_update().only("health_state", "health_reason").get(pk=app_id)
        if app.health_state == health.state and app.health_reason == health.reason:
            return False
        App.objects.filter(pk=app_id).update(health_state=health.state, health_reason=health.reason, health_since=now)
        Event.objects.create(
            app_id=app_id,
            kind=Event.Kind.HEALTH,
            from_value=_label(app.health_state, app.health_reason),
            to_value=_label(health.state, health.reason),
            reason=health.reason,
            created_at=now,
        )
        transaction.on_commit(lambda: events.notify(app_id=app_id))
    return True


def clear(*, app_id: int, now: dt.datetime) -> bool:
    """Remove the indicator (the app was stopped, or has no serving deployment)."""
    return record(app_id=app_id, health=Health(HealthState.NONE), now=now)


def _label(state: str, reason: str) -> str:
    return f"{state}: {reason}" if reason else state
