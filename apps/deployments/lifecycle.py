"""The deployment status lifecycle: the only code that writes ``Deployment.status``.

Statuses and their meanings are those of the spec (docs/concepts.md):

    pending → building → deploying → live        (image apps skip building)
    any non-final status → failed | stopped

Redeploy re-applies a settled deployment, so live, failed (with an image) and
stopped may go back to deploying. Every change is checked against ``ALLOWED``,
made with a row lock and a compare-and-set, stamped, recorded as an Event and
published after commit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.db import models, transaction
from django.utils import timezone

if TYPE_CHECKING:
    from apps.deployments.models import Deployment


class Status(models.TextChoices):
    PENDING = "pending"
    BUILDING = "building"
    DEPLOYING = "deploying"
    LIVE = "live"
    FAILED = "failed"
    STOPPED = "stopped"


MEANINGS: dict[str, str] = {
    Status.PENDING: "Queued, waiting for the builder to pick it up",
    Status.BUILDING: "Build Job is running (git-clone → image-build → push)",
    Status.DEPLOYING: "Image pushed, controller applying K8s manifests",
    Status.LIVE: "Deployment is running and passing health checks",
    Status.FAILED: "Build or deploy failed — see logs for details",
    Status.STOPPED: "App was manually stopped — K8s resources have been torn down",
}

# Work is under way: the pipeline or the controller still has to move these.
IN_FLIGHT = frozenset({Status.PENDING, Status.BUILDING, Status.DEPLOYING})
# Nothing moves these by itself; only Redeploy takes them back to deploying.
SETTLED = frozenset({Status.LIVE, Status.FAILED, Status.STOPPED})

ALLOWED: dict[str, frozenset[str]] = {
    Status.PENDING: frozenset({Status.BUILDING, Status.DEPLOYING, Status.FAILED, Status.STOPPED}),
    Status.BUILDING: frozenset({Status.DEPLOYING, Status.FAILED, Status.STOPPED}),
    Status.DEPLOYING: frozenset({Status.LIVE, Status.FAILED, Status.STOPPED}),
    # Redeploy, or superseded / stopped.
    Status.LIVE: frozenset({Status.DEPLOYING, Status.STOPPED}),
    # Redeploy only (and only with an image: checked by the action rules).
    Status.FAILED: frozenset({Status.DEPLOYING}),
    Status.STOPPED: frozenset({Status.DEPLOYING}),
}

_STAMP = {
    Status.BUILDING: "building_at",
    Status.DEPLOYING: "deploying_at",
    Status.LIVE: "live_at",
    Status.FAILED: "failed_at",
    Status.STOPPED: "stopped_at",
}


class IllegalTransition(Exception):
    """A status change the lifecycle does not allow."""


def is_allowed(frm: str, to: str) -> bool:
    return to in ALLOWED.get(frm, frozenset())


def transition(
    deployment: Deployment,
    *,
    to: Status,
    reason: str = "",
    actor: str = "",
    expect: frozenset[str] | set[str] | None = None,
    error: str = "",
    image: str | None = None,
    _superseding: bool = False,
) -> bool:
    """Move ``deployment`` to ``to``; return False if ``expect`` is given and the status is no longer in it.

    ``expect`` makes the change a compare-and-set for callers that may race each other
    (the controller, the reconciler, a person pressing Cancel): losing that race is not
    an error. A change the table does not allow raises IllegalTransition.
    """
    from apps.deployments import events
    from apps.deployments.models import Deployment, Event

    with transaction.atomic():
        locked = Deployment.objects.select_for_update().select_related("app").get(pk=deployment.pk)
        frm = locked.status
        if expect is not None and frm not in expect:
            _refresh(deployment, locked)
            return False
        if not is_allowed(frm, to):
            raise IllegalTransition(f"{locked}: {frm} → {to} is not allowed")

        now = timezone.now()
        if to == Status.LIVE:
            # At most one live deployment per app: the one serving until now steps aside.
            previous = Deployment.objects.filter(app_id=locked.app_id, status=Status.LIVE).exclude(pk=locked.pk).first()
            if previous is not None:
                transition(previous, to=Status.STOPPED, reason=f"superseded by #{locked.number}", actor=actor, _superseding=True)

        updates: dict[str, object] = {"status": to, "status_changed_at": now, _STAMP[to]: now}
        if to == Status.FAILED:
            updates["error"] = error or reason
        elif to == Status.STOPPED:
            updates["stopped_reason"] = reason
        elif to == Status.DEPLOYING:
            # A redeploy starts a fresh attempt: the old outcome no longer describes it.
            updates.update(error="", stopped_reason="", live_at=None, failed_at=None, stopped_at=None, rollout_generation=None)
        if image is not None:
            updates["image"] = image
        changed = Deployment.objects.filter(pk=locked.pk, status=frm).update(**updates)
        assert changed == 1, "the row lock guarantees the compare-and-set"

        Event.objects.create(
            app_id=locked.app_id,
            deployment_id=locked.pk,
            kind=Event.Kind.STATUS,
            from_value=frm,
            to_value=to,
            reason=str(updates.get("error", "") or reason),
            actor=actor,
            created_at=now,
        )
        serving = Deployment.objects.filter(app_id=locked.app_id, status=Status.LIVE).exists()
        if frm == Status.LIVE and not serving and not _superseding:
            # Health is judged only while a deployment serves: none while stopped or redeploying.
            from apps.deployments import health_store

            health_store.clear(app_id=locked.app_id, now=now)
        transaction.on_commit(lambda: events.notify(app_id=locked.app_id))

    deployment.refresh_from_db()
    return True


def _refresh(deployment: Deployment, locked: Deployment) -> None:
    for field in ("status", "error", "stopped_reason", "image", "status_changed_at"):
        setattr(deployment, field, getattr(locked, field))
