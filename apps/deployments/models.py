"""Apps, their deployments, stored deploy logs, events and environment variables."""

from __future__ import annotations

import secrets

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from apps.core.fields import EncryptedTextField
from apps.deployments import validators
from apps.deployments.health import HealthState
from apps.deployments.lifecycle import Status


def new_webhook_id() -> str:
    return secrets.token_urlsafe(18)


def new_webhook_secret() -> str:
    return secrets.token_hex(24)


class App(models.Model):
    class Source(models.TextChoices):
        GIT = "git"
        IMAGE = "image"

    class Builder(models.TextChoices):
        RAILPACK = "railpack"
        DOCKERFILE = "dockerfile"

    name = models.CharField(max_length=validators.APP_NAME_MAX, unique=True, validators=[validators.validate_app_name])
    team = models.ForeignKey("accounts.Team", on_delete=models.PROTECT, related_name="apps")
    source = models.CharField(max_length=10, choices=Source.choices)

    repo_url = models.CharField("repository URL", max_length=500, blank=True, validators=[validators.validate_repo_url])
    branch = models.CharField(max_length=255, blank=True, default="main", validators=[validators.validate_branch])
    builder = models.CharField(max_length=12, choices=Builder.choices, default=Builder.RAILPACK)
    dockerfile_path = models.CharField(max_length=255, blank=True, default="Dockerfile")
    # An HTTPS token or an SSH deploy key; encrypted, never shown after saving.
    git_credentials = EncryptedTextField(blank=True, default="")
    git_username = models.CharField(max_length=100, blank=True, default="")

    image_url = models.CharField("image", max_length=500, blank=True, validators=[validators.validate_image_url])
    image_tag = models.CharField(max_length=128, blank=True, default="latest", validators=[validators.validate_image_tag])

    port = models.PositiveIntegerField(default=8000)
    replicas = models.PositiveSmallIntegerField(default=1)
    cpu_limit = models.CharField(max_length=16, default="500m")
    memory_limit = models.CharField(max_length=16, default="512Mi")
    health_check_path = models.CharField(
        max_length=255, blank=True, default="", help_text="HTTP path of the readiness probe; empty means a TCP check on the port."
    )
    domain = models.CharField(max_length=253, blank=True, default="", help_text="Defaults to NAME.BASE_DOMAIN.")

    webhook_id = models.CharField(max_length=32, unique=True, default=new_webhook_id)
    webhook_secret = EncryptedTextField(default=new_webhook_secret)

    current_deployment = models.ForeignKey("Deployment", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    health_state = models.CharField(max_length=10, choices=HealthState.choices, default=HealthState.NONE)
    health_reason = models.CharField(max_length=200, blank=True, default="")
    health_since = models.DateTimeField(null=True, blank=True)

    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                condition=(Q(source="git") & ~Q(repo_url="")) | (Q(source="image") & ~Q(image_url="")),
                name="app_has_its_source",
            ),
            models.CheckConstraint(condition=Q(port__gte=1) & Q(port__lte=65535), name="app_port_in_range"),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def host(self) -> str:
        return self.domain or f"{self.name}.{settings.BASE_DOMAIN}"

    @property
    def namespace(self) -> str:
        return f"{settings.NAMESPACE_PREFIX}{self.name}"


class Deployment(models.Model):
    class Trigger(models.TextChoices):
        PUSH = "push"
        REBUILD = "rebuild"
        DEPLOY_NEW = "deploy_new"
        ROLLBACK = "rollback"
        MANUAL = "manual"

    app = models.ForeignKey(App, on_delete=models.CASCADE, related_name="deployments")
    number = models.PositiveIntegerField()
    trigger = models.CharField(max_length=12, choices=Trigger.choices)
    # Written only by apps.deployments.lifecycle.
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING, editable=False)
    triggered_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")

    commit_sha = models.CharField(max_length=40, blank=True, default="")
    commit_message = models.TextField(blank=True, default="")
    commit_author = models.CharField(max_length=200, blank=True, default="")
    image = models.CharField(max_length=600, blank=True, default="", help_text="Pinned by digest once known.")
    rollback_of = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    # What the deployment ran with (port, replicas, resources, env), encrypted: env values may be secret.
    settings_snapshot = EncryptedTextField(blank=True, default="")

    error = models.TextField(blank=True, default="")
    stopped_reason = models.CharField(max_length=200, blank=True, default="")

    created_at = models.DateTimeField(default=timezone.now)  # the pending stamp
    building_at = models.DateTimeField(null=True, blank=True)
    deploying_at = models.DateTimeField(null=True, blank=True)
    live_at = models.DateTimeField(null=True, blank=True)
    failed_at = models.DateTimeField(null=True, blank=True)
    stopped_at = models.DateTimeField(null=True, blank=True)
    # The Kubernetes Deployment's metadata.generation our last apply produced: the controller
    # judges a rollout only once the cluster has observed this generation, so the previous
    # rollout's completed status is never mistaken for this one's.
    rollout_generation = models.BigIntegerField(null=True, blank=True, editable=False)
    # When the status last changed: deadlines count from here.
    status_changed_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-number"]
        constraints = [
            models.UniqueConstraint(fields=["app", "number"], name="deployment_number_unique_per_app"),
            models.UniqueConstraint(fields=["app"], condition=Q(status="live"), name="one_live_deployment_per_app"),
        ]
        indexes = [models.Index(fields=["status", "status_changed_at"])]

    def __str__(self) -> str:
        return f"{self.app.name} #{self.number}"

    @property
    def short_sha(self) -> str:
        return self.commit_sha[:7]


class Event(models.Model):
    """A status or health change, or an action someone took: the deployment history and the event stream.

    The id orders the stream: a client resumes from the last id it saw.
    """

    class Kind(models.TextChoices):
        STATUS = "status"
        HEALTH = "health"
        ACTION = "action"

    app = models.ForeignKey(App, on_delete=models.CASCADE, related_name="events")
    deployment = models.ForeignKey(Deployment, null=True, blank=True, on_delete=models.CASCADE, related_name="events")
    kind = models.CharField(max_length=10, choices=Kind.choices)
    from_value = models.CharField(max_length=200, blank=True, default="")
    to_value = models.CharField(max_length=200, blank=True, default="")
    reason = models.TextField(blank=True, default="")
    actor = models.CharField(max_length=150, blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"{self.kind}: {self.from_value} → {self.to_value}"


class LogLine(models.Model):
    """One line of a deployment's stored log: build output and rollout events, in order."""

    class Step(models.TextChoices):
        CLONE = "clone"
        PLAN = "plan"
        BUILD = "build"
        PUSH = "push"
        ROLLOUT = "rollout"
        SYSTEM = "system"

    deployment = models.ForeignKey(Deployment, on_delete=models.CASCADE, related_name="log_lines")
    seq = models.PositiveIntegerField()
    step = models.CharField(max_length=10, choices=Step.choices)
    text = models.TextField()
    timestamp = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["deployment", "seq"]
        constraints = [models.UniqueConstraint(fields=["deployment", "seq"], name="log_line_seq_unique")]

    def __str__(self) -> str:
        return f"[{self.step}] {self.text}"


class EnvVar(models.Model):
    app = models.ForeignKey(App, on_delete=models.CASCADE, related_name="env_vars")
    name = models.CharField(max_length=validators.ENV_NAME_MAX, validators=[validators.validate_env_name])
    value = EncryptedTextField(blank=True, default="")
    secret = models.BooleanField(default=False, help_text="Write-only: never shown or logged after saving.")
    build_time = models.BooleanField(default=False, help_text="Also available while the image builds.")

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["app", "name"], name="env_var_name_unique_per_app")]

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        shown = "********" if self.secret else repr(self.value)
        return f"<EnvVar {self.name}={shown}>"
