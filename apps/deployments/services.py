"""Writes for apps and deployments: the services the UI, API, admin and webhooks all call."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from functools import partial

from django.contrib.auth.models import AnonymousUser
from django.contrib.auth.models import User as UserModel
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from apps.accounts.models import Team
from apps.deployments import logs, tasks
from apps.deployments.actions import Action, require
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
        transition(
            deployment,
            to=Status.DEPLOYING,
            reason=f"redeploy requested by {who}",
            actor=who,
            expect={Status.LIVE, Status.FAILED, Status.STOPPED},
        )
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
        stopped = transition(deployment, to=Status.STOPPED, reason=f"cancelled by {who}", actor=who, expect=IN_FLIGHT)
        if stopped:
            transaction.on_commit(lambda: tasks.cleanup_deployment.delay(deployment.pk))
    return stopped


def app_stop(*, app: App, actor: User) -> None:
    """Stop the app: every deployment in flight or live becomes stopped and its resources are torn down."""
    require(Action.STOP, app_state(app))
    who = actor_name(actor) or "an operator"
    with transaction.atomic():
        for deployment in app.deployments.filter(status__in=[*IN_FLIGHT, Status.LIVE]):
            transition(deployment, to=Status.STOPPED, reason=f"stopped by {who}", actor=who, expect={*IN_FLIGHT, Status.LIVE})
        transaction.on_commit(lambda: tasks.teardown_app.delay(app.pk))
