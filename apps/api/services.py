"""The REST API's view of the shared services: the domain's refusals become the API's errors.

The services themselves live in apps.deployments.services; here a permanent git failure
becomes 422, a temporary one or an unreachable cluster 503, and any other refusal 409.
"""

from __future__ import annotations

from collections.abc import Callable

from apps.api.errors import Conflict, Unavailable, Unprocessable
from apps.deployments import services
from apps.deployments.actions import Action
from apps.deployments.models import App, Deployment
from apps.deployments.services import User

app_update = services.app_update
env_var_delete = services.env_var_delete


def teardown_app_resources(app: App) -> None:
    """Remove the app's cluster resources now, with the code the worker runs for Stop."""
    services.teardown_now(app)


def app_delete(*, app: App, actor: User, teardown: Callable[[App], None] | None = None) -> None:
    try:
        services.app_delete(app=app, actor=actor, teardown=teardown or teardown_app_resources)
    except services.TeardownFailed as e:
        raise Unavailable(str(e)) from e


def action_run(*, app: App, action: Action, actor: User, deployment: Deployment | None = None) -> Deployment:
    try:
        return services.action_run(app=app, action=action, actor=actor, deployment=deployment)
    except services.CommitUnresolved as e:
        if e.permanent:
            raise Unprocessable(str(e), code="git_error") from e
        raise Unavailable(str(e), code="git_unavailable") from e
    except services.ActionRefused as e:
        raise (Conflict(str(e), code=e.code) if e.code else Conflict(str(e))) from e
