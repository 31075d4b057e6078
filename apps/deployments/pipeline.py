"""The deployment pipeline: what the worker does to move a deployment forward.

Each step starts by checking the deployment's status, so a task delivered twice (or
re-driven by the reconciler) does nothing the second time. Cluster and registry
calls are idempotent; their errors say whether a retry can help: a permanent one
fails the deployment with the message, a temporary one is raised so the task is
retried and, failing that, the reconciler re-drives it.
"""

from __future__ import annotations

import json
import logging
from functools import lru_cache
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from apps.deployments import logs
from apps.deployments.lifecycle import Status, transition
from apps.deployments.models import App, Deployment, LogLine
from apps.deployments.pipeline_errors import TemporaryError
from builder import specs
from builder.kube import Cluster, ClusterError, load_api_client

log = logging.getLogger(__name__)


@lru_cache(maxsize=1)
def cluster() -> Cluster:
    """Return the cluster Slipway manages, from KUBECONFIG or the in-cluster config."""
    return Cluster(load_api_client(kubeconfig=settings.KUBECONFIG, context=settings.KUBE_CONTEXT))


def build_settings() -> specs.BuildSettings:
    options: dict[str, Any] = dict(settings.BUILD_SETTINGS)
    return specs.BuildSettings(**options)


def deploy_settings() -> specs.DeploySettings:
    return specs.DeploySettings(
        namespace_prefix=settings.NAMESPACE_PREFIX,
        base_domain=settings.BASE_DOMAIN,
        ingress_class=settings.INGRESS_CLASS or None,
        tls_secret=settings.INGRESS_TLS_SECRET or None,
        progress_deadline_seconds=settings.PROGRESS_DEADLINE_SECONDS,
        settings_hash_key=settings.SECRET_KEY,
    )


# -- specs: the database rows turned into rendering input -------------------------------------


def credentials_secret_name(deployment: Deployment) -> str:
    from builder import jobs

    return jobs.git_credentials_secret_name(deployment.app.name, deployment.number)


def build_env_secret_name(deployment: Deployment) -> str:
    from builder import jobs

    return jobs.build_env_secret_name(deployment.app.name, deployment.number)


def build_spec(deployment: Deployment) -> specs.BuildSpec:
    app = deployment.app
    build_env = [v for v in app.env_vars.all() if v.build_time]
    return specs.BuildSpec(
        app=app.name,
        deployment_number=deployment.number,
        namespace=app.namespace,
        repo_url=app.repo_url,
        commit_sha=deployment.commit_sha,
        branch=app.branch,
        registry=settings.REGISTRY,
        builder=app.builder,  # type: ignore[arg-type]
        dockerfile_path=app.dockerfile_path,
        git_credentials_secret=credentials_secret_name(deployment) if app.git_credentials else None,
        git_credentials_kind=(_credentials_kind(app.git_credentials) if app.git_credentials else None),
        build_env_names=tuple(v.name for v in build_env),
        build_env_secret=build_env_secret_name(deployment) if build_env else None,
        registry_secret=settings.REGISTRY_SECRET or None,
        registry_insecure=settings.REGISTRY_INSECURE,
    )


def _credentials_kind(credentials: str) -> specs.CredentialsKind:
    return "ssh" if "PRIVATE KEY-----" in credentials else "token"


def run_settings(deployment: Deployment, *, fresh: bool) -> dict[str, object]:
    """Return the settings to deploy with: the app's, read now, or the deployment's snapshot (rollback)."""
    if not fresh and deployment.settings_snapshot:
        return json.loads(deployment.settings_snapshot)  # type: ignore[no-any-return]
    from apps.deployments.services import settings_snapshot

    return settings_snapshot(deployment.app)


def app_spec(deployment: Deployment, run: dict[str, object], *, redeployed_at: str | None) -> specs.AppSpec:
    app = deployment.app
    return specs.AppSpec(
        app=app.name,
        deployment_number=deployment.number,
        image=deployment.image,
        port=int(run["port"]),  # type: ignore[call-overload]
        replicas=int(run["replicas"]),  # type: ignore[call-overload]
        cpu_limit=str(run["cpu_limit"]),
        memory_limit=str(run["memory_limit"]),
        health_check_path=str(run.get("health_check_path") or ""),
        env=dict(run.get("env") or {}),  # type: ignore[call-overload]
        namespace=app.namespace,
        host=app.host,
        redeployed_at=redeployed_at,
        commit_sha=deployment.commit_sha or None,
    )


# -- steps ------------------------------------------------------------------------------------


def run(deployment_id: int) -> None:
    """Take a pending deployment: start its build (git apps) or resolve and apply its image."""
    deployment = Deployment.objects.select_related("app").get(pk=deployment_id)
    if deployment.status != Status.PENDING:
        return  # already taken (a task delivered twice, or re-driven)
    if deployment.app.source == App.Source.GIT:
        start_build(deployment)
    else:
        start_image_deploy(deployment)


def give_up(deployment_id: int, message: str, *, expect: set[str]) -> None:
    """Fail a deployment whose step kept meeting temporary errors, if it is still where that step left it."""
    deployment = Deployment.objects.select_related("app").get(pk=deployment_id)
    _fail(deployment, message, expect=expect)


def _fail(deployment: Deployment, message: str, *, expect: set[str]) -> None:
    logs.append(deployment, LogLine.Step.SYSTEM, f"Failed: {message}")
    transition(deployment, to=Status.FAILED, error=message, expect=expect)


def start_build(deployment: Deployment) -> None:
    """Create the build Job for the deployment's commit and move it to building."""
    from builder import jobs

    try:
        spec = build_spec(deployment)
    except ValueError as e:
        _fail(deployment, f"cannot build: {e}", expect={Status.PENDING})
        return
    objects = jobs.render_build_job(spec, build_settings())
    secrets = _build_secrets(deployment, spec)
    kube = cluster()
    try:
        kube.apply(_namespace(deployment.app))
        for secret in secrets:
            kube.apply(secret)
        for obj in objects:
            created = kube.apply(obj)
            if obj["kind"] == "Job":
                # Owned by the Job, the Secrets go when the Job's TTL removes it.
                meta = created["metadata"]
                for secret in secrets:
                    kube.apply(jobs.with_owner(secret, job_name=meta["name"], job_uid=meta["uid"]))
        # Building only once the Job exists, so a retried task creates it again; the
        # controller judges the build on the pod's first events.
        if not transition(deployment, to=Status.BUILDING, reason="build Job created", expect={Status.PENDING}):
            if deployment.status in (Status.STOPPED, Status.FAILED):
                cleanup(deployment.pk)  # cancelled or superseded meanwhile; not a twin task that won the race
            return
        job_name = jobs.build_job_name(spec.app, spec.deployment_number)
        logs.append(deployment, LogLine.Step.SYSTEM, f"Building commit {deployment.short_sha} in Job {job_name}.")
    except ClusterError as e:
        if e.permanent:
            _fail(deployment, f"the cluster refused the build Job: {e.message}", expect={Status.PENDING})
            return
        raise TemporaryError(e.message) from e


def _namespace(app: App) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": app.namespace, "labels": {specs.LABEL_MANAGED_BY: specs.MANAGED_BY, specs.LABEL_APP: app.name}},
    }


def _build_secrets(deployment: Deployment, spec: specs.BuildSpec) -> list[dict[str, object]]:
    """Render the per-build Secrets the Job mounts: git credentials and build-time variables."""
    from builder import jobs

    app = deployment.app
    credentials = None
    if spec.git_credentials_secret:
        if spec.git_credentials_kind == "ssh":
            credentials = {"ssh-privatekey": app.git_credentials.strip() + "\n"}
        else:
            credentials = {"username": app.git_username or "x-access-token", "password": app.git_credentials}
    build_env = {v.name: v.value for v in app.env_vars.all() if v.build_time}
    return jobs.render_build_secrets(spec, git_credentials=credentials, build_env=build_env)


def start_image_deploy(deployment: Deployment) -> None:
    """Resolve the image tag to a digest (image apps skip building) and apply it."""
    from builder import registry

    app = deployment.app
    image = deployment.image
    if not image:
        try:
            digest = registry.resolve_digest(
                app.image_url, app.image_tag, insecure_hosts=settings.INSECURE_REGISTRIES, timeout=15
            )
        except registry.RegistryError as e:
            if e.permanent:
                _fail(deployment, str(e), expect={Status.PENDING})
                return
            raise TemporaryError(str(e)) from e
        image = f"{app.image_url}@{digest}"
        logs.append(deployment, LogLine.Step.SYSTEM, f"Resolved {app.image_url}:{app.image_tag} to {digest}.")
    if transition(deployment, to=Status.DEPLOYING, reason=f"deploying {image}", image=image, expect={Status.PENDING}):
        apply(deployment.pk)


def apply(deployment_id: int, *, redeploy: bool = False) -> None:
    """Apply a deploying deployment's manifests; the controller then follows the rollout."""
    from builder import manifests

    deployment = Deployment.objects.select_related("app").get(pk=deployment_id)
    if deployment.status != Status.DEPLOYING or deployment.rollout_generation is not None:
        return
    # One rollout per app at a time: the cluster has one Deployment per app, so an older
    # rollout still in progress would otherwise take this one's outcome as its own.
    for older in deployment.app.deployments.filter(status=Status.DEPLOYING).exclude(pk=deployment.pk):
        transition(older, to=Status.STOPPED, reason=f"superseded by #{deployment.number}", expect={Status.DEPLOYING})
    fresh = redeploy or deployment.trigger != Deployment.Trigger.ROLLBACK
    run_with = run_settings(deployment, fresh=fresh)
    redeployed_at = timezone.now().isoformat(timespec="seconds") if redeploy else None
    try:
        objects = manifests.render_app(app_spec(deployment, run_with, redeployed_at=redeployed_at), deploy_settings())
    except ValueError as e:
        _fail(deployment, f"cannot render the app's manifests: {e}", expect={Status.DEPLOYING})
        return
    kube = cluster()
    generation = None
    try:
        for obj in objects:
            applied = kube.apply(obj)
            logs.append(deployment, LogLine.Step.ROLLOUT, f"Applied {obj['kind']} {obj['metadata']['name']}.")
            if obj["kind"] == "Deployment":
                generation = applied["metadata"]["generation"]
        _prune(kube, deployment, objects)
    except ClusterError as e:
        if e.permanent:
            _fail(deployment, f"the cluster refused the manifests: {e.message}", expect={Status.DEPLOYING})
            return
        raise TemporaryError(e.message) from e
    with transaction.atomic():
        Deployment.objects.filter(pk=deployment.pk, status=Status.DEPLOYING).update(
            rollout_generation=generation, settings_snapshot=json.dumps(run_with)
        )
    logs.append(deployment, LogLine.Step.ROLLOUT, f"Waiting for {run_with['replicas']} new pod(s) to become ready.")


def _prune(kube: Cluster, deployment: Deployment, objects: list[dict[str, object]]) -> None:
    """Delete the app's objects that the rendered set no longer has."""
    app = deployment.app
    selector = specs.selector(app=app.name, component=specs.COMPONENT_APP)
    for kind in ("Service", "Ingress", "Secret", "Deployment"):
        keep = {o["metadata"]["name"] for o in objects if o["kind"] == kind}  # type: ignore[index]
        for name in kube.delete_one_by_one(kind, app.namespace, selector=selector, keep=keep):
            logs.append(deployment, LogLine.Step.ROLLOUT, f"Removed {kind} {name}, no longer needed.")


def cleanup(deployment_id: int) -> None:
    """Delete a stopped or failed deployment's build Job (and, through ownership, its Secrets and pods)."""
    deployment = Deployment.objects.select_related("app").get(pk=deployment_id)
    if deployment.app.source != App.Source.GIT:
        return
    from builder import jobs

    name = jobs.build_job_name(deployment.app.name, deployment.number)
    try:
        if cluster().delete("Job", name, deployment.app.namespace):
            logs.append(deployment, LogLine.Step.SYSTEM, f"Deleted build Job {name}.")
        for secret in (credentials_secret_name(deployment), build_env_secret_name(deployment)):
            cluster().delete("Secret", secret, deployment.app.namespace)
    except ClusterError as e:
        if not e.permanent:
            raise TemporaryError(e.message) from e
        log.warning("cleanup of %s: %s", deployment, e.message)


def restore(app_id: int) -> None:
    """Put the serving deployment's manifests back after a newer rollout failed or was cancelled.

    The cluster has one Deployment per app, so the abandoned rollout would otherwise go on
    replacing the serving pods (cancel), or keep a crash-looping ReplicaSet (failure).
    With nothing serving, a cancelled first rollout is torn down instead.
    """
    from builder import manifests

    app = App.objects.get(pk=app_id)
    if app.deployments.filter(status=Status.DEPLOYING).exists():
        return  # a newer rollout is under way and owns the Deployment now
    serving = app.deployments.filter(status=Status.LIVE).first()
    if serving is None:
        teardown(app_id)
        return
    objects = manifests.render_app(app_spec(serving, run_settings(serving, fresh=False), redeployed_at=None), deploy_settings())
    try:
        for obj in objects:
            cluster().apply(obj)
        _prune(cluster(), serving, objects)
    except ClusterError as e:
        if not e.permanent:
            raise TemporaryError(e.message) from e
        log.warning("restoring %s: %s", app.name, e.message)
        return
    logs.append(serving, LogLine.Step.ROLLOUT, f"Re-applied #{serving.number}: the newer rollout did not finish.")


def delete_namespace(app_id: int) -> None:
    """Delete the app's namespace and so everything in it (the app is being deleted)."""
    app = App.objects.get(pk=app_id)
    try:
        cluster().delete("Namespace", app.namespace)
    except ClusterError as e:
        if not e.permanent:
            raise TemporaryError(e.message) from e
        # No cluster configured, or it refuses for good: nothing Slipway can remove there.
        log.warning("deleting the namespace of %s: %s", app.name, e.message)


def teardown(app_id: int) -> None:
    """Delete an app's workloads, Service, Ingress and env Secret (Stop); builds keep their own clean-up."""
    app = App.objects.get(pk=app_id)
    if app.deployments.filter(status__in=[Status.DEPLOYING, Status.LIVE]).exists():
        # Redeployed since the Stop: tearing down now would delete what the new rollout applied.
        log.info("teardown of %s skipped: it was deployed again", app.name)
        return
    selector = specs.selector(app=app.name, component=specs.COMPONENT_APP)
    try:
        for kind in ("Deployment", "Service", "Ingress", "Secret"):
            cluster().delete_one_by_one(kind, app.namespace, selector=selector)
    except ClusterError as e:
        if not e.permanent:
            raise TemporaryError(e.message) from e
        log.warning("teardown of %s: %s", app.name, e.message)
