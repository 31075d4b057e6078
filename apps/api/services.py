"""Writes the REST API needs beyond apps.deployments.services: app settings, deletion, env removal, rebuild.

Each raises the domain's errors (ActionNotAllowed, Django ValidationError) or one of
the API's (Unprocessable, Unavailable) with a message a person can act on.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from django.db import transaction

from apps.api.errors import Conflict, Unavailable, Unprocessable
from apps.deployments import services
from apps.deployments.actions import Action, ActionNotAllowed, require
from apps.deployments.lifecycle import IN_FLIGHT, Status, transition
from apps.deployments.models import App, Deployment, EnvVar
from apps.deployments.selectors import app_state, rollback_targets
from apps.deployments.services import Commit, User, actor_name

log = logging.getLogger(__name__)

GIT_TIMEOUT = 20.0
# Settings a PATCH may change; the name and team are fixed (they name cluster resources and decide access).
UPDATABLE_FIELDS = (
    "source",
    "repo_url",
    "branch",
    "builder",
    "dockerfile_path",
    "git_credentials",
    "git_username",
    "image_url",
    "image_tag",
    "port",
    "replicas",
    "cpu_limit",
    "memory_limit",
    "health_check_path",
    "domain",
)


# -- apps ------------------------------------------------------------------------------------


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


def teardown_app_resources(app: App) -> None:
    """Remove the app's cluster resources now, with the code the worker runs for Stop."""
    from apps.deployments import tasks

    tasks.teardown_app.apply(args=(app.pk,), throw=True)


def app_delete(*, app: App, actor: User, teardown: Callable[[App], None] | None = None) -> None:
    """Stop the app's deployments, remove its cluster resources, then delete it with its history.

    The teardown runs before the row goes, because it needs the app to know what to remove;
    when the cluster cannot be reached nothing is deleted and the error says so.
    """
    who = actor_name(actor) or "an operator"
    with transaction.atomic():
        for deployment in app.deployments.filter(status__in=[*IN_FLIGHT, Status.LIVE]):
            transition(deployment, to=Status.STOPPED, reason=f"app deleted by {who}", actor=who, expect={*IN_FLIGHT, Status.LIVE})
    try:
        (teardown or teardown_app_resources)(app)
    except Exception as e:
        log.warning("teardown of %s failed: %s", app.name, e)
        raise Unavailable(
            f"Could not remove {app.name}'s resources from the cluster ({e}); the app was not deleted. Try again."
        ) from e
    name = app.name
    app.delete()
    log.info("app %s deleted by %s", name, who)


def env_var_delete(*, app: App, name: str) -> bool:
    """Remove one environment variable; return whether it existed. Applies at the next deploy or Redeploy."""
    deleted, _ = EnvVar.objects.filter(app=app, name=name).delete()
    return deleted > 0


# -- actions ---------------------------------------------------------------------------------


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

    A permanent git error (no such branch, no access) is 422: retrying cannot help. A
    temporary one (host unreachable, timeout) is 503.
    """
    from builder import git

    credentials = git_credentials(app)
    try:
        head = git.ls_remote(app.repo_url, app.branch, credentials=credentials, timeout=GIT_TIMEOUT)
    except git.GitError as e:
        message = f"Could not resolve the latest commit of {app.branch}: {e}"
        if e.permanent:
            raise Unprocessable(message, code="git_error") from e
        raise Unavailable(message, code="git_unavailable") from e
    details = git.commit_details(app.repo_url, head.sha, credentials=credentials, timeout=GIT_TIMEOUT)
    if details is None:
        return Commit(sha=head.sha)
    author = details.author_name + (f" <{details.author_email}>" if details.author_email else "")
    return Commit(sha=details.sha, message=details.message.strip(), author=author)


def action_run(*, app: App, action: Action, actor: User, deployment: Deployment | None = None) -> Deployment:
    """Run one deploy action; return the deployment it started or acted on.

    ``deployment`` is the rollback target, or the one to cancel (default: the current one).
    """
    if action == Action.REDEPLOY:
        return services.deployment_redeploy(app=app, actor=actor)
    if action == Action.REBUILD:
        require(Action.REBUILD, app_state(app))  # before asking the git server anything
        return services.deployment_rebuild(app=app, actor=actor, commit=latest_commit(app))
    if action == Action.DEPLOY_NEW:
        return services.deployment_deploy_new(app=app, actor=actor)
    if action == Action.ROLLBACK:
        require(Action.ROLLBACK, app_state(app))
        target = deployment or rollback_targets(app).first()
        assert target is not None  # the action is offered only when there is a target
        try:
            return services.deployment_rollback(app=app, target=target, actor=actor)
        except ValueError as e:
            raise Conflict(str(e), code="invalid_target") from e
    if action == Action.CANCEL:
        target = deployment or app.current_deployment
        if target is None or (deployment is None and target.status not in IN_FLIGHT):
            raise ActionNotAllowed(action, app_state(app))
        if target.status not in IN_FLIGHT:
            raise Conflict(
                f"Deployment #{target.number} is {target.status}: only a pending, building or deploying one can be cancelled."
            )
        if not services.deployment_cancel(deployment=target, actor=actor):
            target.refresh_from_db()
            raise Conflict(f"Deployment #{target.number} became {target.status} before it could be cancelled.")
        return target
    if action == Action.STOP:
        services.app_stop(app=app, actor=actor)
        app.refresh_from_db()
        assert app.current_deployment is not None  # Stop is offered only once something was deployed
        return app.current_deployment
    raise ValueError(f"unknown action {action!r}")
