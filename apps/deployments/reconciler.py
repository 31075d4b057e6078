"""The reconciler (Celery beat): re-drive what a lost message or a dead process left behind.

It reads only the database, so it also converges after every process was down:
- a pending deployment nobody took (broker down, worker died) is enqueued again;
- a deploying deployment whose manifests were never applied is applied again;
- anything past its status deadline is failed with a reason a person can read;
- old events past the stream's retention, and old webhook deliveries, are removed.
"""

from __future__ import annotations

import datetime as dt
import logging

from django.conf import settings
from django.utils import timezone

from apps.deployments import logs, streams, tasks
from apps.deployments.lifecycle import IN_FLIGHT, Status, transition
from apps.deployments.models import Deployment, LogLine
from apps.webhooks.models import WebhookDelivery

log = logging.getLogger(__name__)


STUCK_BECAUSE: dict[str, str] = {
    Status.PENDING: "no worker took it",
    Status.BUILDING: "the build did not finish",
    Status.DEPLOYING: "the rollout did not finish",
}


def deadline_message(status: str, seconds: int) -> str:
    return f"timed out: still {status} after {seconds} s ({STUCK_BECAUSE[status]})"


def run(now: dt.datetime | None = None) -> dict[str, int]:
    """Run one pass; return how many deployments each rule touched."""
    now = now or timezone.now()
    counts = {"failed": 0, "redriven": 0, "reapplied": 0}

    for status in IN_FLIGHT:
        limit = settings.DEADLINES[status]
        for deployment in Deployment.objects.filter(status=status, status_changed_at__lt=now - dt.timedelta(seconds=limit)):
            message = deadline_message(status, limit)
            if transition(deployment, to=Status.FAILED, error=message, actor="reconciler", expect={status}):
                logs.append(deployment, LogLine.Step.SYSTEM, f"Failed: {message}")
                tasks.cleanup_deployment.delay(deployment.pk)
                if status == Status.DEPLOYING:
                    tasks.restore_app.delay(deployment.app_id)
                counts["failed"] += 1

    stale = now - dt.timedelta(seconds=settings.REDRIVE_AFTER)
    for deployment_id in Deployment.objects.filter(status=Status.PENDING, status_changed_at__lt=stale).values_list(
        "pk", flat=True
    ):
        tasks.run_deployment.delay(deployment_id)
        counts["redriven"] += 1
    unapplied = Deployment.objects.filter(status=Status.DEPLOYING, rollout_generation__isnull=True, status_changed_at__lt=stale)
    for deployment_id in unapplied.values_list("pk", flat=True):
        tasks.apply_deployment.delay(deployment_id)
        counts["reapplied"] += 1

    streams.event_cleanup(now=now)
    WebhookDelivery.objects.filter(received_at__lt=now - dt.timedelta(days=settings.DELIVERY_RETENTION_DAYS)).delete()
    if any(counts.values()):
        log.info("reconciler: %s", counts)
    return counts
