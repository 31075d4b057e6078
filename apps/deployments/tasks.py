"""Celery tasks: thin wrappers that take ids, load rows and call the pipeline.

Every task is safe to run twice (acks_late re-delivers a task whose worker died):
the pipeline checks the deployment's status before acting and the cluster calls are
idempotent (server-side apply, delete-if-present).
"""

from __future__ import annotations

from celery import shared_task

from apps.deployments.pipeline_errors import TemporaryError

# A temporary error (cluster or registry unreachable) is retried with back-off; after
# that the reconciler re-drives whatever is still stuck.
TASK_OPTIONS = {
    "acks_late": True,
    "ignore_result": True,
    "autoretry_for": (TemporaryError,),
    "retry_backoff": 2,
    "retry_backoff_max": 60,
    "max_retries": 6,
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


@shared_task(name="deployments.cleanup", **TASK_OPTIONS)
def cleanup_deployment(deployment_id: int) -> None:
    """Delete what a stopped or superseded deployment left in the cluster (its build Job)."""
    from apps.deployments import pipeline

    pipeline.cleanup(deployment_id)


@shared_task(name="deployments.teardown", **TASK_OPTIONS)
def teardown_app(app_id: int) -> None:
    """Delete an app's workloads, Service and Ingress (Stop)."""
    from apps.deployments import pipeline

    pipeline.teardown(app_id)


@shared_task(name="deployments.reconcile", **TASK_OPTIONS)
def reconcile() -> None:
    """Re-drive anything stuck or lost: pending deployments, deadlines, vanished Jobs."""
    from apps.deployments import reconciler

    reconciler.run()
