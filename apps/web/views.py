"""Pages of the web UI: parse the request, call one service or selector, render.

Every view answers 404 for an app the user may not see (as for one that does not
exist) and sends anonymous visitors to the sign-in page.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.db.models import Max, QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRedirect

from apps.accounts.models import Team
from apps.deployments import selectors, services
from apps.deployments.actions import Action, ActionNotAllowed
from apps.deployments.lifecycle import Status
from apps.deployments.models import App, Deployment, Event
from apps.deployments.streams import format_log_line
from apps.web import presenters, webhook_info
from apps.web import services as web_services
from apps.web.forms import AppCreateForm, AppDeleteForm, AppSettingsForm, EnvVarForm, RollbackForm

HISTORY_LIMIT = 25


def _htmx(request: HttpRequest) -> bool:
    """Say whether htmx made the request (django-htmx's middleware sets ``request.htmx``)."""
    return bool(getattr(request, "htmx", False))


def _app_or_404(request: HttpRequest, name: str) -> App:
    try:
        return selectors.app_get_for_user(user=request.user, name=name)
    except App.DoesNotExist:
        raise Http404("No such app.") from None


def _deployment_or_404(app: App, number: int) -> Deployment:
    try:
        return app.deployments.select_related("triggered_by").get(number=number)
    except Deployment.DoesNotExist:
        raise Http404("No such deployment.") from None


def _teams_for(user: Any) -> QuerySet[Team]:
    if user.is_staff:
        return Team.objects.all()
    return Team.objects.filter(memberships__user=user).distinct()


def _app_url(app: App) -> str:
    return reverse("app-detail", args=[app.name])


def _last_event_id(apps: Any) -> int:
    return Event.objects.filter(app__in=apps).aggregate(n=Max("id"))["n"] or 0


# -- the apps list --------------------------------------------------------------------------


def app_rows(apps: Any) -> list[dict[str, Any]]:
    """Return what the apps list shows per app."""
    rows = []
    for app in apps:
        current = app.current_deployment
        rows.append(
            {
                "app": app,
                "badge": presenters.status_badge(current.status if current else None),
                "health": presenters.health_indicator(app.health_state, app.health_reason),
                "source_summary": presenters.source_summary(app),
                "last_deploy": current.created_at if current else None,
            }
        )
    return rows


@login_required
@require_GET
def app_list(request: HttpRequest) -> HttpResponse:
    apps = selectors.apps_visible_to(request.user)
    teams = _teams_for(request.user)
    context = {
        "rows": app_rows(apps),
        "form": AppCreateForm(teams=teams),
        "has_teams": teams.exists(),
        "after": _last_event_id(apps),
    }
    return render(request, "web/app_list.html", context)


@login_required
@require_http_methods(["GET", "POST"])
def app_create(request: HttpRequest) -> HttpResponse:
    teams = _teams_for(request.user)
    form = AppCreateForm(request.POST or None, teams=teams)
    if request.method == "POST" and form.is_valid():
        try:
            app = web_services.app_create(
                actor=request.user,
                env=form.cleaned_data["env_values"],
                secret_env=form.cleaned_data["secret_values"],
                **form.service_kwargs(),
            )
        except ValidationError as e:
            form.add_service_errors(e)
        else:
            messages.success(request, f"Created {app.name}. Start its first deployment with {_first_action(app)}.")
            return redirect("app-detail", name=app.name)
    return render(request, "web/app_create.html", {"form": form, "has_teams": teams.exists()})


def _first_action(app: App) -> str:
    return Action.REBUILD.label if app.source == App.Source.GIT else Action.DEPLOY_NEW.label


# -- the app page ---------------------------------------------------------------------------


def history_rows(app: App, *, now: Any, limit: int = HISTORY_LIMIT) -> list[dict[str, Any]]:
    """Return the deployment history as the app page shows it, newest first."""
    rows = []
    for d in app.deployments.select_related("triggered_by")[:limit]:
        rows.append(
            {
                "d": d,
                "badge": presenters.status_badge(d.status),
                "phases": [
                    {"name": p.name, "text": presenters.duration_text(p.seconds), "running": p.running}
                    for p in presenters.phase_durations(d, now=now)
                ],
                "image_short": presenters.image_short(d.image),
                "is_current": d.pk == app.current_deployment_id,
            }
        )
    return rows


def live_context(app: App) -> dict[str, Any]:
    """Return the context of the parts of the app page that update live: status, health, actions, history."""
    app.refresh_from_db()
    current = app.current_deployment
    actions = selectors.app_actions(app)
    return {
        "app": app,
        "current": current,
        "badge": presenters.status_badge(current.status if current else None),
        "health": presenters.health_indicator(app.health_state, app.health_reason),
        "actions": [{"value": a.value, "label": a.label} for a in actions],
        "history": history_rows(app, now=timezone.now()),
        "history_more": max(app.deployments.count() - HISTORY_LIMIT, 0),
        "app_is_live": app.deployments.filter(status=Status.LIVE).exists(),
    }


def _app_page(request: HttpRequest, app: App, *, status: int = 200, **forms: Any) -> HttpResponse:
    context = live_context(app)
    context.update(
        {
            "url": web_services.public_url(app),
            "env_vars": list(app.env_vars.all()),
            "settings_form": forms.get("settings_form") or AppSettingsForm.for_app(app),
            "env_form": forms.get("env_form") or EnvVarForm(),
            "webhook": forms.get("webhook") or webhook_info.for_app(app),
            "after": _last_event_id([app]),
        }
    )
    return render(request, "web/app_detail.html", context, status=status)


@login_required
@require_GET
def app_detail(request: HttpRequest, name: str) -> HttpResponse:
    return _app_page(request, _app_or_404(request, name))


@login_required
@require_POST
def app_settings(request: HttpRequest, name: str) -> HttpResponse:
    app = _app_or_404(request, name)
    form = AppSettingsForm.for_app(app, request.POST)
    if form.is_valid():
        try:
            web_services.app_settings_update(app=app, actor=request.user, **form.cleaned_data)
        except ValidationError as e:
            form.add_service_errors(e)
        else:
            messages.success(request, "Settings saved. They apply at the next deploy, or now with Redeploy.")
            return HttpResponseRedirect(_app_url(app) + "#settings")
    app.refresh_from_db()
    return _app_page(request, app, settings_form=form)


@login_required
@require_POST
def env_var_set(request: HttpRequest, name: str) -> HttpResponse:
    app = _app_or_404(request, name)
    form = EnvVarForm(request.POST)
    if form.is_valid():
        d = form.cleaned_data
        try:
            services.env_var_set(app=app, name=d["name"], value=d["value"], secret=d["secret"], build_time=d["build_time"])
        except ValidationError as e:
            form.add_service_errors(e)
        else:
            messages.success(request, f"Saved {d['name']}. It applies at the next deploy, or now with Redeploy.")
            return HttpResponseRedirect(_app_url(app) + "#env")
    form.forget_secret_value()
    return _app_page(request, app, env_form=form)


@login_required
@require_POST
def env_var_delete(request: HttpRequest, name: str, var: str) -> HttpResponse:
    app = _app_or_404(request, name)
    if not web_services.env_var_delete(app=app, name=var):
        raise Http404("No such environment variable.")
    messages.success(request, f"Removed {var}. It goes away at the next deploy, or now with Redeploy.")
    return HttpResponseRedirect(_app_url(app) + "#env")


@login_required
@require_POST
def webhook_rotate(request: HttpRequest, name: str) -> HttpResponse:
    """Make a new webhook secret and show it once, on this response only (like a new API token)."""
    app = _app_or_404(request, name)
    secret = webhook_info.rotate(app, actor=request.user)
    messages.success(request, "New webhook secret made: copy it to your git provider now, it is shown only this once.")
    response = _app_page(request, app, webhook=webhook_info.for_app(app, new_secret=secret))
    response["Cache-Control"] = "no-store"
    return response


# -- deploy actions: a confirm step, then the action ----------------------------------------


def _parse_action(value: str) -> Action:
    try:
        return Action(value)
    except ValueError:
        raise Http404("No such action.") from None


def _confirm_context(app: App, action: Action, **extra: Any) -> dict[str, Any]:
    context = {
        "app": app,
        "action": {"value": action.value, "label": action.label},
        "description": presenters.action_description(action.value, app=app),
        "current": app.current_deployment,
    }
    if action == Action.ROLLBACK and "rollback_form" not in extra:
        extra["rollback_form"] = RollbackForm(targets=selectors.rollback_targets(app))
    context.update(extra)
    return context


def _render_confirm(request: HttpRequest, context: dict[str, Any], status: int = 200) -> HttpResponse:
    template = "web/confirm_action.html#confirm_form" if _htmx(request) else "web/confirm_action.html"
    return render(request, template, context, status=status)


@login_required
@require_http_methods(["GET", "POST"])
def app_action(request: HttpRequest, name: str, action: str) -> HttpResponse:
    """GET: the confirm step (a page, or a dialog's body for htmx). POST: run the action."""
    app = _app_or_404(request, name)
    act = _parse_action(action)
    offered = act in selectors.app_actions(app)
    if request.method == "GET":
        if not offered:
            error = str(ActionNotAllowed(act, selectors.app_state(app)))
            return _render_confirm(request, _confirm_context(app, act, error=error), status=409)
        return _render_confirm(request, _confirm_context(app, act))

    target = None
    if act == Action.ROLLBACK:
        form = RollbackForm(request.POST, targets=selectors.rollback_targets(app))
        if not form.is_valid():
            return _render_confirm(request, _confirm_context(app, act, rollback_form=form))
        target = form.cleaned_data["target"]
    try:
        deployment = web_services.app_action_run(app=app, action=act, actor=request.user, target=target)
    except (ActionNotAllowed, web_services.ActionFailed) as e:
        status = 409 if isinstance(e, ActionNotAllowed) else 502
        if _htmx(request):
            return _render_confirm(request, _confirm_context(app, act, error=str(e)), status=status)
        messages.error(request, str(e))
        return redirect("app-detail", name=app.name)
    messages.success(request, _done_message(act, deployment))
    if _htmx(request):
        return HttpResponseClientRedirect(_app_url(app))
    return redirect("app-detail", name=app.name)


def _done_message(action: Action, deployment: Deployment | None) -> str:
    if action == Action.STOP:
        return "Stopping the app: its Kubernetes resources are being torn down."
    if deployment is None:
        return f"{action.label} started."
    if action == Action.CANCEL:
        return f"Cancelled #{deployment.number}."
    if action == Action.REDEPLOY:
        return f"Redeploying #{deployment.number}."
    return f"{action.label}: deployment #{deployment.number} started."


@login_required
@require_http_methods(["GET", "POST"])
def app_delete(request: HttpRequest, name: str) -> HttpResponse:
    app = _app_or_404(request, name)
    form = AppDeleteForm(request.POST or None, app=app)
    status = 200
    if request.method == "POST" and form.is_valid():
        try:
            web_services.app_delete(app=app, actor=request.user)
        except web_services.ActionFailed as e:
            form.add_error(None, str(e))
            status = 502
        else:
            messages.success(request, f"Deleted {name}.")
            return redirect("app-list")
    return render(request, "web/app_delete.html", {"app": app, "form": form}, status=status)


# -- deployments and their logs -------------------------------------------------------------


def log_context(deployment: Deployment, lines: list[Any], *, previous_step: str = "") -> dict[str, Any]:
    return {"sections": presenters.step_sections(lines, previous_step=previous_step), "deployment": deployment}


def deployment_context(app: App, deployment: Deployment) -> dict[str, Any]:
    """Return the context of a deployment's header: status, meaning, error and phase durations."""
    return {
        "app": app,
        "deployment": deployment,
        "badge": presenters.status_badge(deployment.status),
        "phases": [
            {"name": p.name, "text": presenters.duration_text(p.seconds), "running": p.running}
            for p in presenters.phase_durations(deployment, now=timezone.now())
        ],
        "in_flight": presenters.is_in_flight(deployment.status),
        "image_short": presenters.image_short(deployment.image),
    }


@login_required
@require_GET
def deployment_detail(request: HttpRequest, name: str, number: int) -> HttpResponse:
    app = _app_or_404(request, name)
    deployment = _deployment_or_404(app, number)
    lines = list(deployment.log_lines.all())
    context = deployment_context(app, deployment)
    context.update(log_context(deployment, lines))
    context["last_seq"] = lines[-1].seq if lines else 0
    context["last_step"] = lines[-1].step if lines else ""
    return render(request, "web/deployment_detail.html", context)


@login_required
@require_GET
def deployment_log_download(request: HttpRequest, name: str, number: int) -> HttpResponse:
    app = _app_or_404(request, name)
    deployment = _deployment_or_404(app, number)
    text = "".join(format_log_line(line) for line in deployment.log_lines.all())
    response = HttpResponse(text, content_type="text/plain; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{app.name}-{deployment.number}.log"'
    return response


@login_required
@require_GET
def app_logs(request: HttpRequest, name: str) -> HttpResponse:
    app = _app_or_404(request, name)
    live = app.deployments.filter(status=Status.LIVE).exists()
    return render(request, "web/app_logs.html", {"app": app, "live": live})
