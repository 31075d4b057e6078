"""Writes the web UI needs beyond apps.deployments.services: one entry per form or button."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db import transaction

from apps.deployments import services
from apps.deployments.actions import Action
from apps.deployments.models import App, Deployment
from apps.deployments.services import User

log = logging.getLogger(__name__)

SETTINGS_FIELDS = ("port", "replicas", "cpu_limit", "memory_limit", "health_check_path", "domain")

# The app page shows any refusal as a message; the services raise it with the words to show.
ActionFailed = services.ActionRefused
env_var_delete = services.env_var_delete


def app_action_run(*, app: App, action: Action, actor: User, target: Deployment | None = None) -> Deployment | None:
    """Run one deploy action from the app page; raise ActionNotAllowed or ActionFailed when it cannot run."""
    if action == Action.ROLLBACK and target is None:
        raise ActionFailed("Choose the deployment to roll back to.")
    return services.action_run(app=app, action=action, actor=actor, deployment=target)


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
    return services.app_update(app=app, actor=actor, **fields)


def _teardown_now(app: App) -> None:
    services.teardown_now(app)


def app_delete(*, app: App, actor: User, teardown: Callable[[App], None] | None = None) -> None:
    """Stop the app's deployments, remove its cluster resources, then delete it (ActionFailed if the cluster is unreachable)."""
    services.app_delete(app=app, actor=actor, teardown=teardown or _teardown_now)


def public_url(app: App) -> str:
    """Return the address the app answers on."""
    scheme = "https" if settings.INGRESS_TLS_SECRET else "http"
    return f"{scheme}://{app.host}"
