"""The REST API: thin views that parse, call one service or selector, and answer.

Permissions are the UI's: a user sees and acts on the apps of their teams, staff on
all; an app the caller may not see answers 404, as if it did not exist. Deleting an
app needs a team owner or staff (403 otherwise).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from django.db.models import Max, QuerySet
from django.http import HttpResponse, StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import exceptions, serializers, status
from rest_framework.generics import GenericAPIView
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from apps.accounts.models import Membership, Team
from apps.api import app_logs, services
from apps.api.errors import Conflict
from apps.api.serializers import (
    ActionSerializer,
    AppCreateSerializer,
    AppSerializer,
    AppUpdateSerializer,
    DeploymentSerializer,
    EnvVarSerializer,
    EnvVarWriteSerializer,
    WebhookDeliverySerializer,
    parse_field_mask,
    readable_fields,
)
from apps.deployments import services as deployment_services
from apps.deployments import streams
from apps.deployments.actions import Action
from apps.deployments.lifecycle import Status
from apps.deployments.models import App, Deployment, Event, LogLine
from apps.deployments.selectors import app_get_for_user, apps_visible_to
from apps.webhooks.models import WebhookDelivery

ERRORS = {
    400: OpenApiResponse(description="A field or parameter is wrong; error.field names it."),
    401: OpenApiResponse(description="No credentials, or a bad or revoked token."),
    404: OpenApiResponse(description="No such app (or not one of your teams')."),
}
FIELDS_PARAM = OpenApiParameter(
    "fields", OpenApiTypes.STR, description="Comma-separated field mask: only these fields are sent, e.g. status,health,error."
)
LAST_EVENT_ID_PARAM = OpenApiParameter(
    "last_event_id", OpenApiTypes.INT, description="Resume after this event id (the Last-Event-ID header does the same)."
)
MAX_TAIL = 10000


# -- renderers for the non-JSON answers ------------------------------------------------------


class EventStreamRenderer(BaseRenderer):
    media_type = "text/event-stream"
    format = "sse"

    def render(self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None) -> Any:
        return data


class PlainTextRenderer(BaseRenderer):
    media_type = "text/plain"
    format = "txt"
    charset = "utf-8"

    def render(self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None) -> Any:
        return data


def sse_response(chunks: AsyncIterator[str]) -> StreamingHttpResponse:
    response = StreamingHttpResponse(chunks, content_type="text/event-stream; charset=utf-8")
    response["Cache-Control"] = "no-cache, no-transform"
    # nginx and similar proxies would otherwise hold the stream back in their buffers.
    response["X-Accel-Buffering"] = "no"
    return response


# -- shared parts ----------------------------------------------------------------------------


class Pagination(LimitOffsetPagination):
    default_limit = 20
    max_limit = 100


class ApiView(GenericAPIView):
    """Finds the app in the URL for the caller, and applies ``?fields=`` masks."""

    serializer_class: type[serializers.Serializer] | None = None

    def get_app(self) -> App:
        name = self.kwargs["name"]
        try:
            return app_get_for_user(user=self.request.user, name=name)
        except App.DoesNotExist:
            raise exceptions.NotFound(f"No app named '{name[:60]}'.") from None

    def field_mask(self, serializer_class: type[serializers.Serializer] | None = None) -> list[str] | None:
        cls = serializer_class or self.get_serializer_class()
        return parse_field_mask(self.request.query_params.get("fields"), readable_fields(cls))

    def get_serializer_context(self) -> dict[str, Any]:
        return {**super().get_serializer_context(), "fields": self.field_mask()}

    def show(self, serializer_class: type[serializers.Serializer], instance: Any, *, many: bool = False) -> Any:
        context = {**super().get_serializer_context(), "fields": self.field_mask(serializer_class)}
        return serializer_class(instance, many=many, context=context).data


class StreamingView(ApiView):
    """A view whose success is a stream: errors before it starts are still JSON."""

    renderer_classes = [JSONRenderer, EventStreamRenderer, PlainTextRenderer]

    def finalize_response(self, request: Request, response: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(response, Response):
            request.accepted_renderer = JSONRenderer()
            request.accepted_media_type = "application/json"
        return super().finalize_response(request, response, *args, **kwargs)


def resume_after(request: Request, param: str) -> int | None:
    """Return the position a client resumes after: the Last-Event-ID header, else ``?param=``."""
    for value, name in ((request.headers.get("Last-Event-ID"), "Last-Event-ID"), (request.query_params.get(param), param)):
        try:
            parsed = streams.parse_last_event_id(value)
        except ValueError:
            raise exceptions.ValidationError({name: f"{name} must be a non-negative integer."}) from None
        if parsed is not None:
            return parsed
    return None


def flag(request: Request, name: str) -> bool:
    value = request.query_params.get(name, "").lower()
    if value in ("", "0", "false", "no"):
        return False
    if value in ("1", "true", "yes"):
        return True
    raise exceptions.ValidationError({name: f"{name} takes 1 or 0."})


def deployments_of(app: App) -> QuerySet[Deployment]:
    deployments = app.deployments.select_related("app", "triggered_by", "rollback_of")
    return deployments.annotate(last_log_seq=Max("log_lines__seq")).order_by("-number")


def is_owner(user: Any, app: App) -> bool:
    return bool(user.is_staff) or Membership.objects.filter(team_id=app.team_id, user=user, role=Membership.Role.OWNER).exists()


def team_for_create(user: Any, name: str | None) -> Team:
    teams = Team.objects.all() if user.is_staff else Team.objects.filter(memberships__user=user)
    if name:
        team = teams.filter(name=name).first()
        if team is None:
            raise exceptions.ValidationError({"team": f"No team named '{name[:60]}' that you belong to."})
        return team
    names = list(teams.values_list("name", flat=True)[:11])
    if len(names) == 1:
        return teams.get()
    if not names:
        raise exceptions.ValidationError({"team": "You belong to no team; ask a team owner to add you."})
    raise exceptions.ValidationError({"team": f"Name the team that owns the app: one of {', '.join(names[:10])}."})


# -- apps ------------------------------------------------------------------------------------


class AppListView(ApiView):
    serializer_class = AppSerializer

    @extend_schema(
        summary="List the apps you can see", parameters=[FIELDS_PARAM], responses={200: AppSerializer(many=True), **ERRORS}
    )
    def get(self, request: Request) -> Response:
        return Response(self.show(AppSerializer, apps_visible_to(request.user), many=True))

    @extend_schema(summary="Create an app", request=AppCreateSerializer, responses={201: AppSerializer, **ERRORS})
    def post(self, request: Request) -> Response:
        body = AppCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = dict(body.validated_data)
        team = team_for_create(request.user, data.pop("team", None))
        app = deployment_services.app_create(team=team, actor=request.user, **data)
        return Response(self.show(AppSerializer, app), status=status.HTTP_201_CREATED)


class AppDetailView(ApiView):
    serializer_class = AppSerializer

    @extend_schema(summary="Read an app", parameters=[FIELDS_PARAM], responses={200: AppSerializer, **ERRORS})
    def get(self, request: Request, name: str) -> Response:
        return Response(self.show(AppSerializer, self.get_app()))

    @extend_schema(summary="Change an app's settings", request=AppUpdateSerializer, responses={200: AppSerializer, **ERRORS})
    def patch(self, request: Request, name: str) -> Response:
        app = self.get_app()
        body = AppUpdateSerializer(data=request.data, partial=True)
        body.is_valid(raise_exception=True)
        app = services.app_update(app=app, actor=request.user, **body.validated_data)
        return Response(self.show(AppSerializer, app))

    @extend_schema(
        summary="Delete an app and remove it from the cluster",
        responses={204: None, 403: OpenApiResponse(description="Only a team owner or staff may delete an app."), **ERRORS},
    )
    def delete(self, request: Request, name: str) -> Response:
        app = self.get_app()
        if not is_owner(request.user, app):
            raise exceptions.PermissionDenied(f"Only an owner of team {app.team.name} (or staff) may delete {app.name}.")
        services.app_delete(app=app, actor=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)


# -- env vars --------------------------------------------------------------------------------


class EnvListView(ApiView):
    serializer_class = EnvVarSerializer

    @extend_schema(
        summary="List an app's environment variables",
        parameters=[FIELDS_PARAM],
        responses={200: EnvVarSerializer(many=True), **ERRORS},
    )
    def get(self, request: Request, name: str) -> Response:
        return Response(self.show(EnvVarSerializer, self.get_app().env_vars.all(), many=True))


class EnvDetailView(ApiView):
    serializer_class = EnvVarSerializer

    @extend_schema(
        summary="Set an environment variable",
        description="Takes effect at the next deploy or Redeploy. A secret's value is never shown again.",
        request=EnvVarWriteSerializer,
        responses={200: EnvVarSerializer, **ERRORS},
    )
    def put(self, request: Request, name: str, var: str) -> Response:
        app = self.get_app()
        body = EnvVarWriteSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        env_var = deployment_services.env_var_set(app=app, name=var, **body.validated_data)
        return Response(self.show(EnvVarSerializer, env_var))

    @extend_schema(summary="Remove an environment variable", responses={204: None, **ERRORS})
    def delete(self, request: Request, name: str, var: str) -> Response:
        app = self.get_app()
        if not services.env_var_delete(app=app, name=var):
            raise exceptions.NotFound(f"{app.name} has no variable named '{var[:60]}'.")
        return Response(status=status.HTTP_204_NO_CONTENT)


# -- deployments -----------------------------------------------------------------------------


class DeploymentListView(ApiView):
    serializer_class = DeploymentSerializer
    pagination_class = Pagination

    @extend_schema(
        summary="List an app's deployments, newest first",
        parameters=[FIELDS_PARAM],
        responses={200: DeploymentSerializer(many=True), **ERRORS},
    )
    def get(self, request: Request, name: str) -> Response:
        page = self.paginate_queryset(deployments_of(self.get_app()))
        return self.get_paginated_response(self.show(DeploymentSerializer, page, many=True))


class DeploymentDetailView(ApiView):
    serializer_class = DeploymentSerializer

    def get_deployment(self) -> Deployment:
        app = self.get_app()
        deployment = deployments_of(app).filter(number=self.kwargs["number"]).first()
        if deployment is None:
            raise exceptions.NotFound(f"{app.name} has no deployment #{self.kwargs['number']}.")
        return deployment

    @extend_schema(summary="Read a deployment", parameters=[FIELDS_PARAM], responses={200: DeploymentSerializer, **ERRORS})
    def get(self, request: Request, name: str, number: int) -> Response:
        return Response(self.show(DeploymentSerializer, self.get_deployment()))


class DeploymentLogsView(StreamingView, DeploymentDetailView):
    @extend_schema(
        summary="Read a deployment's stored log",
        description=(
            "Plain text, one line each: time, [step], text. With follow=1 (or Accept: text/event-stream) the log is "
            "sent as Server-Sent Events: 'log' events (id = line number, data {seq, step, text, time}) as lines arrive, "
            "then one 'end' event with the final status and error once the deployment settles."
        ),
        parameters=[
            OpenApiParameter(
                "follow", OpenApiTypes.BOOL, description="Stream as Server-Sent Events until the deployment settles."
            ),
            OpenApiParameter(
                "after", OpenApiTypes.INT, description="Only lines after this line number (Last-Event-ID does the same)."
            ),
        ],
        responses={(200, "text/plain"): OpenApiTypes.STR, (200, "text/event-stream"): OpenApiTypes.STR, **ERRORS},
    )
    def get(self, request: Request, name: str, number: int) -> Any:
        deployment = self.get_deployment()
        after = resume_after(request, "after") or 0
        follow = flag(request, "follow") or "text/event-stream" in request.headers.get("Accept", "")
        if follow:
            return sse_response(streams.deploy_log_stream(deployment.pk, after=after))
        lines = LogLine.objects.filter(deployment=deployment, seq__gt=after).order_by("seq")
        return HttpResponse(
            "".join(streams.format_log_line(line) for line in lines.iterator()), content_type="text/plain; charset=utf-8"
        )


# -- actions ---------------------------------------------------------------------------------


ACTION_RESPONSES = {
    202: DeploymentSerializer,
    409: OpenApiResponse(description="The action is not offered in the app's current state; the message names the state."),
    422: OpenApiResponse(description="Rebuild: the branch or repository cannot be found."),
    503: OpenApiResponse(description="Rebuild: the git server cannot be reached now."),
    **ERRORS,
}


class AppActionView(ApiView):
    serializer_class = DeploymentSerializer
    deploy_action: Action = Action.REDEPLOY

    def post(self, request: Request, name: str) -> Response:
        app = self.get_app()
        self.field_mask()  # a bad mask is refused before anything happens
        body = ActionSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        target = None
        number = body.validated_data.get("deployment")
        if number is not None:
            if self.deploy_action not in (Action.ROLLBACK, Action.CANCEL):
                raise exceptions.ValidationError({"deployment": f"{self.deploy_action.label} takes no deployment."})
            target = app.deployments.filter(number=number).first()
            if target is None:
                raise exceptions.ValidationError({"deployment": f"{app.name} has no deployment #{number}."})
        deployment = services.action_run(app=app, action=self.deploy_action, actor=request.user, deployment=target)
        return Response(
            self.show(DeploymentSerializer, deployments_of(app).get(pk=deployment.pk)), status=status.HTTP_202_ACCEPTED
        )


def action_view(action: Action) -> Any:
    summary = {
        Action.REDEPLOY: "Redeploy: re-apply the current deployment with settings read fresh",
        Action.REBUILD: "Rebuild: build and deploy the latest commit of the branch (git apps)",
        Action.DEPLOY_NEW: "Deploy new: resolve the image tag again and deploy it (image apps)",
        Action.ROLLBACK: "Rollback: serve an earlier deployment's image again",
        Action.STOP: "Stop: tear the app's resources down",
        Action.CANCEL: "Cancel a deployment still in flight",
    }[action]

    def post(self: AppActionView, request: Request, name: str) -> Response:
        return AppActionView.post(self, request, name)

    post = extend_schema(
        summary=summary,
        operation_id=f"apps_{action.value.replace('-', '_')}",
        request=ActionSerializer,
        parameters=[FIELDS_PARAM],
        responses=ACTION_RESPONSES,
    )(post)
    view: Any = type(f"{action.name.title().replace('_', '')}View", (AppActionView,), {"deploy_action": action, "post": post})
    return view.as_view()


# -- live app logs ---------------------------------------------------------------------------


class AppLogsView(StreamingView):
    @extend_schema(
        summary="Follow the app's live output (Server-Sent Events)",
        description=(
            "Only while a deployment is live (409 otherwise). Each 'log' event's data is {pod, container, line}; "
            "nothing is stored, so there is no resuming. Comments every 15 s keep the connection open."
        ),
        parameters=[
            OpenApiParameter(
                "tail", OpenApiTypes.INT, description=f"Lines of history per container first (0–{MAX_TAIL}, default 100)."
            )
        ],
        responses={
            (200, "text/event-stream"): OpenApiTypes.STR,
            409: OpenApiResponse(description="The app is not live."),
            **ERRORS,
        },
    )
    def get(self, request: Request, name: str) -> Any:
        app = self.get_app()
        raw = request.query_params.get("tail", "100")
        if not raw.isdigit() or int(raw) > MAX_TAIL:
            raise exceptions.ValidationError({"tail": f"tail takes a whole number from 0 to {MAX_TAIL}."})
        if not app.deployments.filter(status=Status.LIVE).exists():
            current = app.current_deployment.status if app.current_deployment else "not deployed yet"
            raise Conflict(
                f"App logs are only available while the app is live; its current deployment is {current}.", code="not_live"
            )
        return sse_response(app_log_stream(app, tail=int(raw)))


async def app_log_stream(app: App, *, tail: int) -> AsyncIterator[str]:
    """Yield the app's pod output as 'log' events; an 'end' event when the source stops or fails."""
    namespace, selector, source = app.namespace, await streams.db(app_logs.pod_selector, app), app_logs.source
    yield streams.frame(retry=streams.RETRY_MS)
    try:
        async for item in streams.iterate_in_thread(lambda: source(namespace, selector, tail)):
            if item is None:
                yield streams.comment("heartbeat")
                continue
            pod, container, line = item
            yield streams.frame(event="log", data={"pod": pod, "container": container, "line": line})
    except Exception as e:  # the stream is open: say what happened in it rather than cut it
        yield streams.frame(event="end", data={"message": f"The log stream stopped: {e}"})
        return
    yield streams.frame(event="end", data={"message": "The pods' output ended."})


# -- webhook deliveries ----------------------------------------------------------------------


class WebhookDeliveryListView(ApiView):
    serializer_class = WebhookDeliverySerializer
    pagination_class = Pagination

    @extend_schema(
        summary="List an app's webhook deliveries, newest first",
        parameters=[FIELDS_PARAM],
        responses={200: WebhookDeliverySerializer(many=True), **ERRORS},
    )
    def get(self, request: Request, name: str) -> Response:
        deliveries = WebhookDelivery.objects.filter(app=self.get_app()).select_related("deployment")
        page = self.paginate_queryset(deliveries)
        return self.get_paginated_response(self.show(WebhookDeliverySerializer, page, many=True))


# -- the event stream ------------------------------------------------------------------------


class EventStreamView(StreamingView):
    @extend_schema(
        summary="Follow status and health changes (Server-Sent Events)",
        description=(
            "Each event has id (its position), event ('status' or 'health') and data: JSON with app, deployment, from, to, "
            "reason, actor, time, and for status changes the deployment's error. Without Last-Event-ID the stream starts "
            "now (its first frame carries the current position as id). Reconnecting with Last-Event-ID (header or "
            "last_event_id) sends every event after it, in order, once; when some of those are older than the retention "
            "(EVENT_RETENTION_SECONDS) the stream sends one 'resync' event: read the state again. Comments every 15 s keep "
            "the connection open."
        ),
        parameters=[OpenApiParameter("app", OpenApiTypes.STR, description="Only this app's events."), LAST_EVENT_ID_PARAM],
        responses={(200, "text/event-stream"): OpenApiTypes.STR, **ERRORS},
    )
    def get(self, request: Request) -> Any:
        last_event_id = resume_after(request, "last_event_id")
        visible = apps_visible_to(request.user)
        name = request.query_params.get("app")
        if name is not None:
            app = visible.filter(name=name).first()
            if app is None:
                raise exceptions.NotFound(f"No app named '{name[:60]}'.")
            events = Event.objects.filter(app=app)
        else:
            events = Event.objects.filter(app_id__in=visible.values("pk"))
        return sse_response(streams.event_stream(events, last_event_id=last_event_id))
