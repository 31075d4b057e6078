"""What the API shows and accepts: apps, env vars, deployments, webhook deliveries.

Reads take a field mask (``?fields=status,health,error``): the view parses it against
the serializer's readable fields and only those are sent.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.conf import settings
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from apps.deployments.health import HealthState
from apps.deployments.lifecycle import MEANINGS
from apps.deployments.models import App, Deployment, EnvVar
from apps.deployments.selectors import app_actions
from apps.webhooks.models import WebhookDelivery


def parse_field_mask(raw: str | None, allowed: Iterable[str]) -> list[str] | None:
    """Return the fields a ``?fields=`` mask asks for, or None without one; raise ValidationError naming an unknown one."""
    if raw is None:
        return None
    allowed = list(allowed)
    names = [name.strip() for name in raw.split(",") if name.strip()]
    if not names:
        raise serializers.ValidationError({"fields": f"Name at least one field, e.g. fields={','.join(allowed[:3])}."})
    for name in names:
        if name not in allowed:
            raise serializers.ValidationError({"fields": f"Unknown field '{name[:60]}': choose from {', '.join(allowed)}."})
    return list(dict.fromkeys(names))


def readable_fields(serializer_class: type[serializers.BaseSerializer]) -> list[str]:
    serializer: Any = serializer_class()
    return [name for name, field in serializer.fields.items() if not field.write_only]


class FieldMaskMixin(serializers.Serializer):
    """Send only the fields in ``context["fields"]`` when the request gave a mask."""

    def to_representation(self, instance: Any) -> dict[str, Any]:
        mask = self.context.get("fields")
        if mask is None:
            return super().to_representation(instance)
        # Build only what is asked for, in the order asked: an unrequested field may cost a query.
        data = {}
        for name in mask:
            field = self.fields[name]
            attribute = field.get_attribute(instance)
            data[name] = None if attribute is None else field.to_representation(attribute)
        return data


class RejectUnknownMixin(serializers.Serializer):
    """Refuse fields the serializer does not know, naming them, instead of ignoring them."""

    fixed_fields: dict[str, str] = {}

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if isinstance(self.initial_data, dict):
            for name in self.initial_data:
                if name in self.fixed_fields:
                    raise serializers.ValidationError({name: self.fixed_fields[name]})
                if name not in self.fields or self.fields[name].read_only:
                    raise serializers.ValidationError({name: f"Unknown field '{name}'."})
        return super().validate(attrs)


# -- apps ------------------------------------------------------------------------------------


class HealthSerializer(serializers.Serializer):
    state = serializers.ChoiceField(choices=HealthState.choices)
    reason = serializers.CharField(allow_blank=True, help_text="One of the runtime health reasons; empty when healthy.")
    since = serializers.DateTimeField(allow_null=True)


class AppSerializer(FieldMaskMixin, serializers.Serializer):
    name = serializers.CharField(read_only=True)
    team = serializers.CharField(source="team.name", read_only=True)
    source = serializers.CharField(read_only=True)  # type: ignore[assignment]  # a field named like Field.source
    status = serializers.SerializerMethodField(help_text="Status of the current deployment; null before the first one.")
    error = serializers.SerializerMethodField(help_text="The current deployment's error, empty unless it failed.")
    health = serializers.SerializerMethodField()
    current_deployment = serializers.SerializerMethodField(help_text="Number of the deployment serving or last attempted.")
    live_deployment = serializers.SerializerMethodField(help_text="Number of the deployment serving now, if any.")
    actions = serializers.SerializerMethodField(help_text="The deploy actions offered in the app's current state.")
    repo_url = serializers.CharField(read_only=True)
    branch = serializers.CharField(read_only=True)
    builder = serializers.CharField(read_only=True)
    dockerfile_path = serializers.CharField(read_only=True)
    git_username = serializers.CharField(read_only=True)
    has_git_credentials = serializers.SerializerMethodField()
    image_url = serializers.CharField(read_only=True)
    image_tag = serializers.CharField(read_only=True)
    port = serializers.IntegerField(read_only=True)
    replicas = serializers.IntegerField(read_only=True)
    cpu_limit = serializers.CharField(read_only=True)
    memory_limit = serializers.CharField(read_only=True)
    health_check_path = serializers.CharField(read_only=True)
    domain = serializers.CharField(read_only=True)
    url = serializers.SerializerMethodField(help_text="The address the app answers on.")
    webhook_url = serializers.SerializerMethodField(help_text="Where the git provider sends push events.")
    created_at = serializers.DateTimeField(read_only=True)

    def get_status(self, app: App) -> str | None:
        return app.current_deployment.status if app.current_deployment else None

    def get_error(self, app: App) -> str:
        return app.current_deployment.error if app.current_deployment else ""

    @extend_schema_field(HealthSerializer)
    def get_health(self, app: App) -> dict[str, Any]:
        return HealthSerializer({"state": app.health_state, "reason": app.health_reason, "since": app.health_since}).data

    @extend_schema_field(OpenApiTypes.INT)
    def get_current_deployment(self, app: App) -> int | None:
        return app.current_deployment.number if app.current_deployment else None

    @extend_schema_field(OpenApiTypes.INT)
    def get_live_deployment(self, app: App) -> int | None:
        return app.deployments.filter(status="live").values_list("number", flat=True).first()

    def get_actions(self, app: App) -> list[str]:
        return [str(a) for a in app_actions(app)]

    def get_has_git_credentials(self, app: App) -> bool:
        return bool(app.git_credentials)

    def get_url(self, app: App) -> str:
        scheme = "https" if settings.INGRESS_TLS_SECRET else "http"
        return f"{scheme}://{app.host}"

    def get_webhook_url(self, app: App) -> str | None:
        if app.source != App.Source.GIT:
            return None
        return settings.PUBLIC_URL + f"/webhooks/{app.webhook_id}/"


class AppWriteSerializer(RejectUnknownMixin, serializers.Serializer):
    """The settings a person can give an app; the rules for their values live on the model."""

    repo_url = serializers.CharField(required=False, allow_blank=True, max_length=500)
    branch = serializers.CharField(required=False, max_length=255)
    builder = serializers.ChoiceField(required=False, choices=App.Builder.choices)
    dockerfile_path = serializers.CharField(required=False, allow_blank=True, max_length=255)
    git_credentials = serializers.CharField(
        required=False,
        allow_blank=True,
        write_only=True,
        trim_whitespace=False,
        help_text="An HTTPS token or an SSH deploy key; never shown.",
    )
    git_username = serializers.CharField(required=False, allow_blank=True, max_length=100)
    image_url = serializers.CharField(required=False, allow_blank=True, max_length=500)
    image_tag = serializers.CharField(required=False, max_length=128)
    port = serializers.IntegerField(required=False, min_value=1, max_value=65535)
    replicas = serializers.IntegerField(required=False, min_value=0, max_value=50)
    cpu_limit = serializers.CharField(required=False, max_length=16)
    memory_limit = serializers.CharField(required=False, max_length=16)
    health_check_path = serializers.CharField(required=False, allow_blank=True, max_length=255)
    domain = serializers.CharField(required=False, allow_blank=True, max_length=253)


class AppCreateSerializer(AppWriteSerializer):
    name = serializers.CharField(max_length=100)
    team = serializers.CharField(required=False, help_text="The team that owns the app; may be left out by members of one team.")
    source = serializers.ChoiceField(choices=App.Source.choices)  # type: ignore[assignment]
    env = serializers.DictField(
        child=serializers.CharField(allow_blank=True, trim_whitespace=False),
        required=False,
        write_only=True,
        help_text="Plain variables to start with.",
    )


class AppUpdateSerializer(AppWriteSerializer):
    source = serializers.ChoiceField(required=False, choices=App.Source.choices)  # type: ignore[assignment]
    fixed_fields = {
        "name": "An app's name cannot change: it names the app's cluster resources and its address.",
        "team": "An app's team cannot change through the API.",
    }


# -- env vars --------------------------------------------------------------------------------


class EnvVarSerializer(FieldMaskMixin, serializers.Serializer):
    name = serializers.CharField(read_only=True)
    # Not get_value: that name is the serializer's own input hook.
    value = serializers.SerializerMethodField(method_name="get_shown_value", help_text="null for secrets: they are write-only.")
    secret = serializers.BooleanField(read_only=True)
    build_time = serializers.BooleanField(read_only=True)

    @extend_schema_field(OpenApiTypes.STR)
    def get_shown_value(self, var: EnvVar) -> str | None:
        return None if var.secret else var.value


class EnvVarWriteSerializer(RejectUnknownMixin, serializers.Serializer):
    value = serializers.CharField(allow_blank=True, trim_whitespace=False, max_length=32768)
    secret = serializers.BooleanField(required=False, default=False, help_text="Write-only from now on: never shown again.")
    build_time = serializers.BooleanField(required=False, default=False, help_text="Also available while the image builds.")


# -- deployments -----------------------------------------------------------------------------


class CommitSerializer(serializers.Serializer):
    sha = serializers.CharField()
    message = serializers.CharField(allow_blank=True)
    author = serializers.CharField(allow_blank=True)


class DeploymentSerializer(FieldMaskMixin, serializers.Serializer):
    app = serializers.CharField(source="app.name", read_only=True)
    number = serializers.IntegerField(read_only=True)
    status = serializers.CharField(read_only=True)
    status_meaning = serializers.SerializerMethodField()
    error = serializers.CharField(read_only=True, help_text="Why it failed, in words a person can act on.")
    stopped_reason = serializers.CharField(read_only=True)
    trigger = serializers.CharField(read_only=True)
    triggered_by = serializers.SerializerMethodField()
    commit = serializers.SerializerMethodField()
    image = serializers.CharField(read_only=True, help_text="Pinned by digest once known.")
    rollback_of = serializers.SerializerMethodField()
    created_at = serializers.DateTimeField(read_only=True)
    building_at = serializers.DateTimeField(read_only=True)
    deploying_at = serializers.DateTimeField(read_only=True)
    live_at = serializers.DateTimeField(read_only=True)
    failed_at = serializers.DateTimeField(read_only=True)
    stopped_at = serializers.DateTimeField(read_only=True)
    log_seq = serializers.SerializerMethodField(help_text="Sequence number of the last stored log line (0 for none).")
    logs_url = serializers.SerializerMethodField()

    def get_status_meaning(self, deployment: Deployment) -> str:
        return MEANINGS.get(deployment.status, "")

    @extend_schema_field(OpenApiTypes.STR)
    def get_triggered_by(self, deployment: Deployment) -> str | None:
        return deployment.triggered_by.get_username() if deployment.triggered_by else None

    @extend_schema_field(CommitSerializer(allow_null=True))
    def get_commit(self, deployment: Deployment) -> dict[str, str] | None:
        if not deployment.commit_sha:
            return None
        return {"sha": deployment.commit_sha, "message": deployment.commit_message, "author": deployment.commit_author}

    @extend_schema_field(OpenApiTypes.INT)
    def get_rollback_of(self, deployment: Deployment) -> int | None:
        return deployment.rollback_of.number if deployment.rollback_of else None

    def get_log_seq(self, deployment: Deployment) -> int:
        annotated = getattr(deployment, "last_log_seq", None)
        if annotated is not None:
            return int(annotated)
        last = deployment.log_lines.order_by("-seq").values_list("seq", flat=True).first()
        return last or 0

    def get_logs_url(self, deployment: Deployment) -> str:
        return reverse("api:deployment-logs", kwargs={"name": deployment.app.name, "number": deployment.number})


class ActionSerializer(RejectUnknownMixin, serializers.Serializer):
    deployment = serializers.IntegerField(
        required=False,
        min_value=1,
        help_text="Rollback: the deployment to serve again. Cancel: the one to cancel (default: the current one).",
    )


# -- webhook deliveries ----------------------------------------------------------------------


class WebhookDeliverySerializer(FieldMaskMixin, serializers.ModelSerializer):
    deployment = serializers.SerializerMethodField()

    class Meta:
        model = WebhookDelivery
        fields = [
            "id",
            "provider",
            "event",
            "delivery_id",
            "signature",
            "outcome",
            "reason",
            "status_code",
            "deployment",
            "received_at",
        ]
        read_only_fields = fields

    @extend_schema_field(OpenApiTypes.INT)
    def get_deployment(self, delivery: WebhookDelivery) -> int | None:
        return delivery.deployment.number if delivery.deployment else None
