"""Celery tasks: thin wrappers that take ids, load rows and call the pipeline.

Every task is safe to run twice (acks_late re-delivers a task whose worker died):
the pipeline checks the deployment's status before acting and the cluster calls are
idempotent (server-side apply, delete-if-present).
"""

from __future__ import annotations

from typing import Any

from celery import Task, shared_task
from django.conf import settings

from apps.deployments.pipeline_errors import TemporaryError


class DeploymentTask(Task):  # type: ignore[misc]
    """A pipeline task for one deployment: when retries run out, the deployment fails with the last error."""

    def on_failure(self, exc: Exception, task_id: str, args: Any, kwargs: Any, einfo: Any) -> None:
        if isinstance(exc, TemporaryError) and args and self.name in STEP_STATUS:
            from apps.deployments import pipeline

            message = f"{exc} (gave up after {(self.max_retries or 0) + 1} attempts)"
            pipeline.give_up(int(args[0]), message, expect={STEP_STATUS[self.name]})


# The status each step works on: giving up fails only a deployment still there.
STEP_STATUS = {"deployments.run": "pending", "deployments.apply": "deploying"}


# A temporary error (cluster or registry unreachable) is retried with back-off; when the
# retries run out the deployment fails with that error, so nobody waits on a dead end.
TASK_OPTIONS: dict[str, Any] = {
    "base": DeploymentTask,
    "acks_late": True,
    "ignore_result": True,
    "autoretry_for": (TemporaryError,),
    "retry_backoff": 2,
    "retry_backoff_max": 60,
    "max_retries": settings.TASK_MAX_RETRIES,
}


@shared_task(name="deployments.run", **TASK_OPTIONS)
def run_deployment(deployment_id: int) -> None:
    """Take a pending deployment: build it (git) or resolve and deploy its image."""
    from apps.deployments import pipeline

    pipeline.run(deployment_id)


@shared_task(name="deployments.apply", **TASK_OPTIONS)
def apply_deployment(deployment_id: int, redeploy: bool = False) -> None:
    """Apply a deploying deployment's manifests to the cluster."""
    from apps.deployments import pipeline

    pipeline.apply(deployment_id, redeploy=redeploy)


@shared_task(name="deployments.cleanup", **{**TASK_OPTIONS, "base": Task})
def cleanup_deployment(deployment_id: int) -> None:
    """Delete what a stopped or superseded deployment left in the cluster (its build Job)."""
    from apps.deployments import pipeline

    pipeline.cleanup(deployment_id)


@shared_task(name="deployments.restore", **{**TASK_OPTIONS, "base": Task})
def restore_app(app_id: int) -> None:
    """Put the serving deployment's manifests back after a newer rollout failed or was cancelled."""
    from apps.deployments import pipeline

    pipeline.restore(app_id)


@shared_task(name="deployments.teardown", **{**TASK_OPTIONS, "base": Task})
def teardown_app(app_id: int) -> None:
    """Delete an app's workloads, Service and Ingress (Stop)."""
    from apps.deployments import pipeline

    pipeline.teardown(app_id)


@shared_task(name="deployments.reconcile", acks_late=True, ignore_result=True)
def reconcile() -> None:
    """Re-drive anything stuck or lost: pending deployments, deadlines, vanished Jobs."""
    from apps.deployments import reconciler

    reconciler.run()
