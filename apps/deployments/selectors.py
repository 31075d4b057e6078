"""Reads: which apps a user may see, an app's action state, deployment histories."""

from __future__ import annotations

from django.contrib.auth.models import AnonymousUser, User
from django.db.models import QuerySet

from apps.deployments.actions import Action, AppState, available_actions
from apps.deployments.lifecycle import Status
from apps.deployments.models import App, Deployment


def apps_visible_to(user: User | AnonymousUser) -> QuerySet[App]:
    """Return the apps ``user`` may see and act on: their teams' apps, or all for staff."""
    if not user.is_authenticated:
        return App.objects.none()
    apps = App.objects.select_related("team", "current_deployment")
    if user.is_staff:
        return apps
    return apps.filter(team__memberships__user=user).distinct()


def app_get_for_user(*, user: User | AnonymousUser, name: str) -> App:
    """Return the app, or raise App.DoesNotExist when it does not exist or the user may not see it."""
    return apps_visible_to(user).get(name=name)


def rollback_targets(app: App) -> QuerySet[Deployment]:
    """Return earlier deployments that were live and can serve again, newest first."""
    qs = app.deployments.exclude(live_at__isnull=True).exclude(image="").exclude(status=Status.LIVE)
    if app.current_deployment_id:
        qs = qs.exclude(pk=app.current_deployment_id)
    return qs.order_by("-number")


def app_state(app: App) -> AppState:
    current = app.current_deployment
    return AppState(
        source=app.source,
        current_status=current.status if current else None,
        current_has_image=bool(current and current.image),
        any_live=app.deployments.filter(status=Status.LIVE).exists(),
        rollback_targets=rollback_targets(app).count(),
    )


def app_actions(app: App) -> list[Action]:
    return available_actions(app_state(app))
