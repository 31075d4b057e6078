"""Writes for webhooks: turn a verified delivery into at most one deployment, record every delivery, rotate secrets."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import partial

from django.db import IntegrityError, models, transaction

from apps.deployments import logs, services
from apps.deployments.lifecycle import IN_FLIGHT
from apps.deployments.models import App, Deployment, Event, LogLine, new_webhook_secret
from apps.webhooks import routing
from apps.webhooks.models import WebhookDelivery
from apps.webhooks.parsing import PushEvent

log = logging.getLogger(__name__)

PROVIDER_NAMES = {"github": "GitHub", "gitlab": "GitLab", "gitea": "Gitea"}


@dataclass(frozen=True)
class Receipt:
    """What became of a delivery, for the response."""

    outcome: str  # WebhookDelivery.Outcome
    status_code: int
    reason: str
    deployment: Deployment | None = None
    delivery: WebhookDelivery | None = None


def _fit(value: str, name: str) -> str:
    field = WebhookDelivery._meta.get_field(name)
    assert isinstance(field, models.CharField) and field.max_length is not None
    limit = field.max_length
    return value if len(value) <= limit else value[: limit - 1] + "…"


def delivery_record(
    *,
    app: App,
    provider: str,
    event: str,
    delivery_id: str,
    signature: str,
    outcome: str,
    reason: str,
    status_code: int,
    deployment: Deployment | None = None,
) -> WebhookDelivery:
    """Store one delivery as the app's recent deliveries show it."""
    return WebhookDelivery.objects.create(
        app=app,
        provider=provider or WebhookDelivery.Provider.UNKNOWN,
        event=_fit(event, "event"),
        delivery_id=_fit(delivery_id, "delivery_id"),
        signature=signature,
        outcome=outcome,
        reason=_fit(reason, "reason"),
        status_code=status_code,
        deployment=deployment,
    )


def delivery_receive(*, app: App, provider: str, delivery_id: str, push: PushEvent) -> Receipt:
    """Handle a verified delivery: deploy the pushed commit at most once, or record why not.

    The delivery row and the deployment are written in one transaction while the app row is
    locked, so two copies of a delivery (or two deliveries of one commit) arriving at the same
    instant make one deployment: the second sees the first's rows once it gets the lock. The
    partial unique constraint on deployed deliveries backs this up. The pipeline is enqueued
    after commit; if the broker refuses, the deployment stays pending and the reconciler
    re-drives it, so the delivery is still acknowledged.
    """
    record = partial(delivery_record, app=app, provider=provider, event=push.event, delivery_id=delivery_id, signature="valid")
    decision = routing.decide(push, source=app.source, branch=app.branch)
    if not decision.deploy:
        delivery = record(outcome="ignored", reason=decision.reason, status_code=200)
        return Receipt("ignored", 200, decision.reason, delivery=delivery)

    committed: list[bool] = []
    receipt: Receipt | None = None
    try:
        with transaction.atomic():
            # Registered first, so it runs first after commit: from then on the delivery is
            # durable, whatever the callbacks that enqueue work do.
            transaction.on_commit(lambda: committed.append(True))
            # Only the lock is needed here, not the row (whose secrets would be decrypted again).
            App.objects.select_for_update().filter(pk=app.pk).values_list("pk", flat=True).get()
            handled = _already_handled(app, provider, delivery_id, push)
            if handled is not None:
                delivery = record(outcome="ignored", reason=handled.reason, status_code=200, deployment=handled.deployment)
                return Receipt("ignored", 200, handled.reason, deployment=handled.deployment, delivery=delivery)
            deployment = services.deployment_create(
                app=app,
                trigger=Deployment.Trigger.PUSH,
                actor=None,
                commit=services.Commit(push.commit_sha, push.message, push.author),
            )
            via = f"{PROVIDER_NAMES.get(provider, provider)} webhook" + (f" (delivery {delivery_id})" if delivery_id else "")
            logs.append(
                deployment,
                LogLine.Step.SYSTEM,
                f"Push of {push.commit_sha[:7]} to {push.branch} by {push.pusher or 'someone'}, received by {via}.",
            )
            reason = f"push to {push.branch}: {push.commit_sha[:7]} deployed as #{deployment.number}"
            delivery = record(outcome="deployed", reason=reason, status_code=202, deployment=deployment)
            receipt = Receipt("deployed", 202, reason, deployment=deployment, delivery=delivery)
    except IntegrityError:
        # Only reachable if the lock above did not serialise two copies (it does on PostgreSQL
        # and SQLite): the constraint kept the second deployment out, so report the first.
        seen = _deployed_delivery(app, provider, delivery_id)
        if seen is None:
            raise
        reason = f"delivery {delivery_id} was already deployed as #{seen.deployment.number if seen.deployment else '?'}"
        delivery = record(outcome="ignored", reason=reason, status_code=200, deployment=seen.deployment)
        return Receipt("ignored", 200, reason, deployment=seen.deployment, delivery=delivery)
    except Exception as e:
        if committed and receipt is not None:
            # The rows are committed; only the enqueue after commit failed (broker down).
            number = receipt.deployment.number if receipt.deployment else "?"
            log.warning(
                "%s #%s is recorded but could not be enqueued (%s: %s); the reconciler will start it",
                app.name,
                number,
                type(e).__name__,
                e,
            )
            return receipt
        raise
    assert receipt is not None
    return receipt


def _deployed_delivery(app: App, provider: str, delivery_id: str) -> WebhookDelivery | None:
    if not delivery_id:
        return None
    return (
        WebhookDelivery.objects.filter(app=app, provider=provider, delivery_id=delivery_id, outcome="deployed")
        .select_related("deployment")
        .first()
    )


def _already_handled(app: App, provider: str, delivery_id: str, push: PushEvent) -> Receipt | None:
    """Return why this delivery must not deploy again, or None if it should deploy."""
    seen = _deployed_delivery(app, provider, delivery_id)
    if seen is not None:
        number = seen.deployment.number if seen.deployment else "?"
        return Receipt("ignored", 200, f"delivery {delivery_id} was already deployed as #{number}", deployment=seen.deployment)
    running = app.deployments.filter(commit_sha=push.commit_sha, status__in=IN_FLIGHT).order_by("-number").first()
    if running is not None:
        return Receipt("ignored", 200, f"{push.commit_sha[:7]} is already deploying as #{running.number}", deployment=running)
    return None


def webhook_secret_rotate(*, app: App, actor: services.User = None) -> str:
    """Replace the app's webhook secret and return the new one, which is shown once; the old one stops working at once."""
    secret = new_webhook_secret()
    who = services.actor_name(actor) or "an operator"
    with transaction.atomic():
        app.webhook_secret = secret
        app.save(update_fields=["webhook_secret"])
        Event.objects.create(
            app=app,
            kind=Event.Kind.ACTION,
            to_value="webhook secret rotated",
            reason=f"rotated by {who}",
            actor=services.actor_name(actor),
        )
    return secret
