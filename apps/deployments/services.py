"""Writes for apps and deployments: the services the UI, API, admin and webhooks all call."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from django.contrib.auth.models import AnonymousUser
from django.contrib.auth.models import User as UserModel
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from apps.accounts.models import Team
from apps.deployments import logs, tasks
from apps.deployments.actions import Action, ActionNotAllowed, require
from apps.deployments.lifecycle import IN_FLIGHT, Status, transition
from apps.deployments.models import App, Deployment, EnvVar, Event, LogLine
from apps.deployments.selectors import app_state

log = logging.getLogger(__name__)

User = UserModel | AnonymousUser | None


@dataclass(frozen=True)
class Commit:
    sha: str
    message: str = ""
    author: str = ""


def actor_name(user: User) -> str:
    if user is None or not user.is_authenticated:
        return ""
    return user.get_username()


def app_create(
    *, team: Team, name: str, source: str, actor: User = None, env: dict[str, str] | None = None, **fields: object
) -> App:
    """Create an app after validating every field; raise ValidationError naming the bad field."""
    app = App(team=team, name=name, source=source, created_by=actor if actor and actor.is_authenticated else None, **fields)
    app.full_clean()
    with transaction.atomic():
        app.save()
        for env_name, value in (env or {}).items():
            env_var_set(app=app, name=env_name, value=value)
    return app


def env_var_set(*, app: App, name: str, value: str, secret: bool = False, build_time: bool = False) -> EnvVar:
    """Create or replace one environment variable; takes effect at the next deploy or Redeploy."""
    var = EnvVar.objects.filter(app=app, name=name).first() or EnvVar(app=app, name=name)
    var.value, var.secret, var.build_time = value, secret, build_time
    var.full_clean(validate_constraints=False)
    var.save()
    return var


def settings_snapshot(app: App) -> dict[str, object]:
    """Return what a deployment of ``app`` runs with, so a rollback can run with it again."""
    return {
        "port": app.port,
        "replicas": app.replicas,
        "cpu_limit": app.cpu_limit,
        "memory_limit": app.memory_limit,
        "health_check_path": app.health_check_path,
        "env": {v.name: v.value for v in app.env_vars.all()},
        "secret_env": sorted(v.name for v in app.env_vars.all() if v.secret),
    }


def deployment_create(
    *,
    app: App,
    trigger: str,
    actor: User = None,
    commit: Commit | None = None,
    image: str = "",
    rollback_of: Deployment | None = None,
    snapshot: dict[str, object] | None = None,
) -> Deployment:
    """Record a new pending deployment, supersede older in-flight ones, and start it after commit."""
    with transaction.atomic():
        locked_app = App.objects.select_for_update().get(pk=app.pk)
        number = (locked_app.deployments.aggregate(n=Max("number"))["n"] or 0) + 1
        deployment = Deployment.objects.create(
            app=locked_app,
            number=number,
            trigger=trigger,
            triggered_by=actor if actor and actor.is_authenticated else None,
            commit_sha=commit.sha if commit else "",
            commit_message=commit.message if commit else "",
            commit_author=commit.author if commit else "",
            image=image,
            rollback_of=rollback_of,
            settings_snapshot=json.dumps(snapshot if snapshot is not None else settings_snapshot(locked_app)),
        )
        who = actor_name(actor) or trigger
        logs.append(deployment, LogLine.Step.SYSTEM, f"Deployment #{number} created by {who} ({trigger}).")
        superseded = list(locked_app.deployments.filter(status__in=[Status.PENDING, Status.BUILDING]).exclude(pk=deployment.pk))
        for old in superseded:
            if transition(
                old, to=Status.STOPPED, reason=f"superseded by #{number}", actor=who, expect={Status.PENDING, Status.BUILDING}
            ):
                transaction.on_commit(partial(tasks.cleanup_deployment.delay, old.pk))
        App.objects.filter(pk=locked_app.pk).update(current_deployment=deployment)
        Event.objects.create(
            app=locked_app,
            deployment=deployment,
            kind=Event.Kind.STATUS,
            to_value=Status.PENDING,
            reason=f"{trigger} by {who}",
            actor=who,
        )
        transaction.on_commit(lambda: tasks.run_deployment.delay(deployment.pk))
    app.refresh_from_db()
    return deployment


def deployment_redeploy(*, app: App, actor: User) -> Deployment:
    """Re-apply the current deployment with its image and the app's settings read fresh."""
    require(Action.REDEPLOY, app_state(app))
    deployment = app.current_deployment
    assert deployment is not None
    who = actor_name(actor) or "an operator"
    with transaction.atomic():
        if not transition(
            deployment,
            to=Status.DEPLOYING,
            reason=f"redeploy requested by {who}",
            actor=who,
            expect={Status.LIVE, Status.FAILED, Status.STOPPED},
        ):
            raise ActionRefused(f"Deployment #{deployment.number} is already {deployment.status}; nothing was redeployed.")
        logs.append(deployment, LogLine.Step.SYSTEM, f"Redeploy requested by {who} at {timezone.now():%Y-%m-%d %H:%M:%S %Z}.")
        transaction.on_commit(lambda: tasks.apply_deployment.delay(deployment.pk, True))
    return deployment


def deployment_rebuild(*, app: App, actor: User, commit: Commit) -> Deployment:
    """Build ``commit`` (the branch's latest, resolved by the caller) as a new deployment."""
    require(Action.REBUILD, app_state(app))
    return deployment_create(app=app, trigger=Deployment.Trigger.REBUILD, actor=actor, commit=commit)


def deployment_deploy_new(*, app: App, actor: User) -> Deployment:
    """Deploy the image tag again as a new deployment; the worker resolves the tag to a digest."""
    require(Action.DEPLOY_NEW, app_state(app))
    return deployment_create(app=app, trigger=Deployment.Trigger.DEPLOY_NEW, actor=actor)


def deployment_rollback(*, app: App, target: Deployment, actor: User) -> Deployment:
    """Serve an earlier deployment's image with the settings it ran with, as a new deployment."""
    require(Action.ROLLBACK, app_state(app))
    if target.app_id != app.pk or target.live_at is None or not target.image:
        raise ValueError(f"#{target.number} was never live with an image, so it cannot be rolled back to.")
    snapshot = json.loads(target.settings_snapshot) if target.settings_snapshot else None
    return deployment_create(
        app=app,
        trigger=Deployment.Trigger.ROLLBACK,
        actor=actor,
        commit=Commit(target.commit_sha, target.commit_message, target.commit_author),
        image=target.image,
        rollback_of=target,
        snapshot=snapshot,
    )


def deployment_cancel(*, deployment: Deployment, actor: User) -> bool:
    """Stop a deployment still in flight; return False if it had already settled."""
    who = actor_name(actor) or "an operator"
    with transaction.atomic():
        was_deploying = deployment.status == Status.DEPLOYING
        stopped = transition(deployment, to=Status.STOPPED, reason=f"cancelled by {who}", actor=who, expect=IN_FLIGHT)
        if stopped:
            transaction.on_commit(lambda: tasks.cleanup_deployment.delay(deployment.pk))
            if was_deploying:  # its manifests are applied: the serving version goes back
                transaction.on_commit(lambda: tasks.restore_app.delay(deployment.app_id))
    return stopped


def app_stop(*, app: App, actor: User) -> None:
    """Stop the app: every deployment in flight or live becomes stopped and its resources are torn down."""
    require(Action.STOP, app_state(app))
    who = actor_name(actor) or "an operator"
    with transaction.atomic():
        for deployment in app.deployments.filter(status__in=[*IN_FLIGHT, Status.LIVE]):
            building = deployment.status in (Status.PENDING, Status.BUILDING)
            stopped = transition(
                deployment, to=Status.STOPPED, reason=f"stopped by {who}", actor=who, expect={*IN_FLIGHT, Status.LIVE}
            )
            if stopped and building:  # its build Job would run on and push
                transaction.on_commit(partial(tasks.cleanup_deployment.delay, deployment.pk))
        transaction.on_commit(lambda: tasks.teardown_app.delay(app.pk))


# -- settings, deletion and the action dispatcher shared by the UI and the API ---------------

GIT_TIMEOUT = 20.0
# Settings a person may change; the name and team are fixed (they name cluster resources and decide access).
UPDATABLE_FIELDS = (
    "source", "repo_url", "branch", "builder", "dockerfile_path", "git_credentials", "git_username",
    "image_url", "image_tag", "port", "replicas", "cpu_limit", "memory_limit", "health_check_path", "domain",
)  # fmt: skip


class ActionRefused(Exception):
    """An action that cannot run now, with a message a person can act on (and a code for the API)."""

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        self.code = code


class CommitUnresolved(ActionRefused):
    """The branch's latest commit could not be resolved; ``permanent`` says whether retrying can help."""

    def __init__(self, message: str, *, permanent: bool) -> None:
        super().__init__(message)
        self.permanent = permanent


class TeardownFailed(ActionRefused):
    """The app's cluster resources could not be removed, so the app was kept."""


def app_update(*, app: App, actor: User, **fields: Any) -> App:
    """Change the app's settings after validating them; they apply at the next deploy or Redeploy."""
    unknown = set(fields) - set(UPDATABLE_FIELDS)
    if unknown:
        raise TypeError(f"not updatable: {sorted(unknown)}")
    for name, value in fields.items():
        setattr(app, name, value)
    app.full_clean()
    if fields:
        app.save(update_fields=list(fields))
    log.info("settings of %s changed by %s: %s", app.name, actor_name(actor) or "an operator", sorted(fields))
    return app


def env_var_delete(*, app: App, name: str) -> bool:
    """Remove one environment variable; return whether it existed. Applies at the next deploy or Redeploy."""
    deleted, _ = EnvVar.objects.filter(app=app, name=name).delete()
    return deleted > 0


def teardown_now(app: App) -> None:
    """Remove everything the app has in the cluster now: its namespace, with workloads, builds and Secrets."""
    from apps.deployments import pipeline

    pipeline.delete_namespace(app.pk)


def app_delete(*, app: App, actor: User, teardown: Callable[[App], None] | None = None) -> None:
    """Stop the app's deployments, remove its cluster resources, then delete it with its history.

    The teardown runs before the row goes, because it needs the app to know what to remove;
    if the cluster cannot be reached nothing is deleted and TeardownFailed says so.
    """
    who = actor_name(actor) or "an operator"
    with transaction.atomic():
        for deployment in app.deployments.filter(status__in=[*IN_FLIGHT, Status.LIVE]):
            transition(deployment, to=Status.STOPPED, reason=f"app deleted by {who}", actor=who, expect={*IN_FLIGHT, Status.LIVE})
    try:
        (teardown or teardown_now)(app)
    except Exception as e:
        log.warning("teardown of %s failed: %s", app.name, e)
        raise TeardownFailed(
            f"Could not remove {app.name}'s resources from the cluster ({e}); the app was not deleted. Try again."
        ) from e
    name = app.name
    app.delete()
    log.info("app %s deleted by %s", name, who)


def git_credentials(app: App) -> Any:
    """Return the app's stored credentials as builder.git wants them, or None for a public repository."""
    from builder import git

    secret = app.git_credentials
    if not secret:
        return None
    if "PRIVATE KEY-----" in secret:
        return git.GitCredentials(kind="ssh", private_key=secret)
    return git.GitCredentials(kind="token", username=app.git_username, password=secret)


def latest_commit(app: App) -> Commit:
    """Return the latest commit of the app's branch, with message and author when the remote tells them."""
    from builder import git

    credentials = git_credentials(app)
    try:
        head = git.ls_remote(app.repo_url, app.branch, credentials=credentials, timeout=GIT_TIMEOUT)
    except git.GitError as e:
        raise CommitUnresolved(f"Could not resolve the latest commit of {app.branch}: {e.message}", permanent=e.permanent) from e
    details = git.commit_details(app.repo_url, head.sha, credentials=credentials, timeout=GIT_TIMEOUT)
    if details is None:
        return Commit(sha=head.sha)
    author = details.author_name + (f" <{details.author_email}>" if details.author_email else "")
    return Commit(sha=details.sha, message=details.message.strip(), author=author)


def action_run(*, app: App, action: Action, actor: User, deployment: Deployment | None = None) -> Deployment:
    """Run one deploy action; return the deployment it started or acted on.

    ``deployment`` is the rollback target (default: the newest one) or the one to cancel
    (default: the current one). Raises ActionNotAllowed when the app does not offer the
    action, and ActionRefused when it cannot run for another reason.
    """
    from apps.deployments.selectors import rollback_targets

    if action == Action.REDEPLOY:
        return deployment_redeploy(app=app, actor=actor)
    if action == Action.REBUILD:
        require(Action.REBUILD, app_state(app))  # before asking the git server anything
        return deployment_rebuild(app=app, actor=actor, commit=latest_commit(app))
    if action == Action.DEPLOY_NEW:
        return deployment_deploy_new(app=app, actor=actor)
    if action == Action.ROLLBACK:
        require(Action.ROLLBACK, app_state(app))
        target = deployment or rollback_targets(app).first()
        assert target is not None  # the action is offered only when there is a target
        try:
            return deployment_rollback(app=app, target=target, actor=actor)
        except ValueError as e:
            raise ActionRefused(str(e), code="invalid_target") from e
    if action == Action.CANCEL:
        target = deployment or app.current_deployment
        if target is None or (deployment is None and target.status not in IN_FLIGHT):
            raise ActionNotAllowed(action, app_state(app))
        if target.status not in IN_FLIGHT:
            raise ActionRefused(
                f"Deployment #{target.number} is {target.status}: only a pending, building or deploying one can be cancelled."
            )
        if not deployment_cancel(deployment=target, actor=actor):
            target.refresh_from_db()
            raise ActionRefused(f"Deployment #{target.number} became {target.status} before it could be cancelled.")
        return target
    if action == Action.STOP:
        app_stop(app=app, actor=actor)
        app.refresh_from_db()
        assert app.current_deployment is not None  # Stop is offered only once something was deployed
        return app.current_deployment
    raise ValueError(f"unknown action {action!r}")
