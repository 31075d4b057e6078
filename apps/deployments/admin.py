"""The operators' view: apps and deployments, searchable and filterable, with the same actions as the UI."""

from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from apps.deployments import services
from apps.deployments.actions import ActionNotAllowed
from apps.deployments.lifecycle import IN_FLIGHT
from apps.deployments.models import App, Deployment, EnvVar, Event, LogLine


class EnvVarInline(admin.TabularInline):
    model = EnvVar
    extra = 0
    fields = ["name", "shown_value", "secret", "build_time"]
    readonly_fields = ["name", "shown_value", "secret", "build_time"]
    can_delete = False

    @admin.display(description="value")
    def shown_value(self, obj: EnvVar) -> str:
        return "********" if obj.secret else obj.value

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(App)
class AppAdmin(admin.ModelAdmin):
    list_display = ["name", "team", "source", "current_status", "health_state", "health_reason", "created_at"]
    list_filter = ["source", "health_state", "current_deployment__status", "team"]
    search_fields = ["name", "repo_url", "image_url", "team__name", "created_by__username"]
    list_select_related = ["team", "current_deployment"]
    # Secrets are never shown: the webhook secret and git credentials are set in the UI.
    exclude = ["webhook_secret", "git_credentials"]
    readonly_fields = ["webhook_id", "current_deployment", "health_state", "health_reason", "health_since", "created_at"]
    inlines = [EnvVarInline]
    actions = ["redeploy", "stop"]

    @admin.display(description="status", ordering="current_deployment__status")
    def current_status(self, obj: App) -> str:
        return obj.current_deployment.status if obj.current_deployment else "—"

    @admin.action(description="Redeploy the current deployment")
    def redeploy(self, request: HttpRequest, queryset: QuerySet[App]) -> None:
        for app in queryset:
            self._run(request, app, lambda a: services.deployment_redeploy(app=a, actor=request.user), "redeploying")

    @admin.action(description="Stop the app")
    def stop(self, request: HttpRequest, queryset: QuerySet[App]) -> None:
        for app in queryset:
            self._run(request, app, lambda a: services.app_stop(app=a, actor=request.user), "stopping")

    def _run(self, request: HttpRequest, app: App, call, verb: str) -> None:  # type: ignore[no-untyped-def]
        try:
            call(app)
        except ActionNotAllowed as e:
            self.message_user(request, f"{app.name}: {e}", messages.WARNING)
        else:
            self.message_user(request, f"{app.name}: {verb}.", messages.SUCCESS)


class EventInline(admin.TabularInline):
    model = Event
    extra = 0
    fields = ["created_at", "kind", "from_value", "to_value", "reason", "actor"]
    readonly_fields = ["created_at", "kind", "from_value", "to_value", "reason", "actor"]
    can_delete = False
    verbose_name_plural = "transition history"

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(Deployment)
class DeploymentAdmin(admin.ModelAdmin):
    list_display = ["__str__", "status", "trigger", "short_sha", "triggered_by", "created_at", "error"]
    list_filter = ["status", "trigger", "app__source", "app__health_state", "app__team"]
    search_fields = ["app__name", "commit_sha", "commit_message", "commit_author", "image", "error", "triggered_by__username"]
    list_select_related = ["app", "triggered_by"]
    exclude = ["settings_snapshot"]
    readonly_fields = [
        "app", "number", "trigger", "status", "triggered_by", "commit_sha", "commit_message", "commit_author", "image",
        "rollback_of", "error", "stopped_reason", "created_at", "building_at", "deploying_at", "live_at", "failed_at",
        "stopped_at", "status_changed_at", "log",
    ]  # fmt: skip
    inlines = [EventInline]
    actions = ["cancel"]

    @admin.display(description="deploy log")
    def log(self, obj: Deployment) -> str:
        from django.utils.html import format_html, format_html_join

        lines = LogLine.objects.filter(deployment=obj).order_by("seq")[:2000]
        rows = format_html_join("\n", "{} [{}] {}", ((ln.timestamp.strftime("%H:%M:%S"), ln.step, ln.text) for ln in lines))
        return format_html('<pre style="max-height:30em;overflow:auto;white-space:pre-wrap">{}</pre>', rows)

    @admin.action(description="Cancel (pending, building or deploying)")
    def cancel(self, request: HttpRequest, queryset: QuerySet[Deployment]) -> None:
        for deployment in queryset:
            if deployment.status in IN_FLIGHT and services.deployment_cancel(deployment=deployment, actor=request.user):
                self.message_user(request, f"{deployment}: cancelled.", messages.SUCCESS)
            else:
                self.message_user(request, f"{deployment}: already {deployment.status}, nothing to cancel.", messages.WARNING)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # deployments come from the deploy actions, never from a form
