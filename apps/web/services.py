"""Writes the web UI needs beyond apps.deployments.services: one entry per form or button."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db import transaction

from apps.deployments import services
from apps.deployments.actions import Action, ActionNotAllowed, require
from apps.deployments.lifecycle import IN_FLIGHT, Status, transition
from apps.deployments.models import App, Deployment, EnvVar
from apps.deployments.selectors import app_state
from apps.deployments.services import Commit, User, actor_name

log = logging.getLogger(__name__)

GIT_TIMEOUT = 20.0
SETTINGS_FIELDS = ("port", "replicas", "cpu_limit", "memory_limit", "health_check_path", "domain")


class ActionFailed(Exception):
    """An action that could not start, with a message a person can act on."""


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
    """Return the latest commit of the app's branch, with message and author when the remote tells them.

    Raise ActionFailed with the git server's answer when the branch cannot be resolved.
    """
    from builder import git

    credentials = git_credentials(app)
    try:
        head = git.ls_remote(app.repo_url, app.branch, credentials=credentials, timeout=GIT_TIMEOUT)
    except git.GitError as e:
        raise ActionFailed(f"Could not resolve the latest commit of {app.branch}: {e.message}") from e
    details = git.commit_details(app.repo_url, head.sha, credentials=credentials, timeout=GIT_TIMEOUT)
    if details is None:
        return Commit(sha=head.sha)
    author = details.author_name + (f" <{details.author_email}>" if details.author_email else "")
    return Commit(sha=details.sha, message=details.message.strip(), author=author)


def app_action_run(*, app: App, action: Action, actor: User, target: Deployment | None = None) -> Deployment | None:
    """Run one deploy action from the app page; raise ActionNotAllowed or ActionFailed when it cannot run."""
    if action == Action.REDEPLOY:
        return services.deployment_redeploy(app=app, actor=actor)
    if action == Action.REBUILD:
        require(Action.REBUILD, app_state(app))  # before asking the git server anything
        return services.deployment_rebuild(app=app, actor=actor, commit=latest_commit(app))
    if action == Action.DEPLOY_NEW:
        return services.deployment_deploy_new(app=app, actor=actor)
    if action == Action.ROLLBACK:
        if target is None:
            raise ActionFailed("Choose the deployment to roll back to.")
        try:
            return services.deployment_rollback(app=app, target=target, actor=actor)
        except ValueError as e:
            raise ActionFailed(str(e)) from e
    if action == Action.CANCEL:
        current = app.current_deployment
        if current is None or current.status not in IN_FLIGHT:
            raise ActionNotAllowed(action, app_state(app))
        if not services.deployment_cancel(deployment=current, actor=actor):
            raise ActionFailed(f"#{current.number} finished before it could be cancelled.")
        return current
    if action == Action.STOP:
        services.app_stop(app=app, actor=actor)
        return None
    raise ActionFailed(f"Unknown action {action!r}.")


def app_create(*, actor: User, env: dict[str, str], secret_env: dict[str, str], **fields: Any) -> App:
    """Create an app with its plain and secret variables, all or nothing; raise ValidationError naming the field."""
    with transaction.atomic():
        app = services.app_create(actor=actor, env=env, **fields)
        for name, value in secret_env.items():
            services.env_var_set(app=app, name=name, value=value, secret=True)
    return app


def app_settings_update(*, app: App, actor: User = None, **fields: Any) -> App:
    """Save the app's runtime settings after validating them; they apply at the next deploy or Redeploy."""
    unknown = set(fields) - set(SETTINGS_FIELDS)
    if unknown:
        raise TypeError(f"not settings: {sorted(unknown)}")
    for name, value in fields.items():
        setattr(app, name, value)
    app.full_clean()
    app.save(update_fields=list(fields))
    log.info("settings of %s changed by %s: %s", app.name, actor_name(actor) or "an operator", sorted(fields))
    return app


def env_var_delete(*, app: App, name: str) -> bool:
    """Remove one environment variable; return whether it existed. Applies at the next deploy or Redeploy."""
    deleted, _ = EnvVar.objects.filter(app=app, name=name).delete()
    return deleted > 0


def _teardown_now(app: App) -> None:
    """Remove the app's cluster resources now, with the code the worker runs for Stop (without its retries)."""
    from apps.deployments import pipeline

    pipeline.teardown(app.pk)


def app_delete(*, app: App, actor: User, teardown: Callable[[App], None] | None = None) -> None:
    """Stop the app's deployments, remove its cluster resources, then delete it with its history.

    The teardown runs before the row goes, because it needs the app to know what to remove;
    if the cluster cannot be reached, nothing is deleted and the error says so.
    """
    who = actor_name(actor) or "an operator"
    with transaction.atomic():
        for deployment in app.deployments.filter(status__in=[*IN_FLIGHT, Status.LIVE]):
            transition(deployment, to=Status.STOPPED, reason=f"app deleted by {who}", actor=who, expect={*IN_FLIGHT, Status.LIVE})
    try:
        (teardown or _teardown_now)(app)
    except Exception as e:
        log.warning("teardown of %s failed: %s", app.name, e)
        raise ActionFailed(
            f"Could not remove {app.name}'s resources from the cluster ({e}); the app was not deleted. Try again."
        ) from e
    name = app.name
    app.delete()
    log.info("app %s deleted by %s", name, who)


def public_url(app: App) -> str:
    """Return the address the app answers on."""
    scheme = "https" if settings.INGRESS_TLS_SECRET else "http"
    return f"{scheme}://{app.host}"
