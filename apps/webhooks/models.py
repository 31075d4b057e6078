"""Every webhook delivery, with its verdict and outcome, like the providers' own "recent deliveries"."""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.utils import timezone


class WebhookDelivery(models.Model):
    class Provider(models.TextChoices):
        GITHUB = "github"
        GITLAB = "gitlab"
        GITEA = "gitea"
        UNKNOWN = "unknown"

    class Signature(models.TextChoices):
        VALID = "valid"
        INVALID = "invalid"
        MISSING = "missing"

    class Outcome(models.TextChoices):
        DEPLOYED = "deployed"
        IGNORED = "ignored"
        REJECTED = "rejected"

    app = models.ForeignKey("deployments.App", on_delete=models.CASCADE, related_name="webhook_deliveries")
    provider = models.CharField(max_length=10, choices=Provider.choices)
    event = models.CharField(max_length=100, blank=True, default="")
    delivery_id = models.CharField(max_length=100, blank=True, default="")
    signature = models.CharField(max_length=10, choices=Signature.choices)
    outcome = models.CharField(max_length=10, choices=Outcome.choices)
    reason = models.CharField(max_length=300, blank=True, default="")
    status_code = models.PositiveSmallIntegerField()
    deployment = models.ForeignKey("deployments.Deployment", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    received_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-received_at", "-id"]
        verbose_name_plural = "webhook deliveries"
        constraints = [
            # A delivery id seen before never creates a second deployment; rejected and
            # ignored copies are still recorded, so the constraint covers deployed ones only.
            models.UniqueConstraint(
                fields=["app", "provider", "delivery_id"],
                condition=Q(outcome="deployed") & ~Q(delivery_id=""),
                name="one_deployment_per_delivery",
            )
        ]

    def __str__(self) -> str:
        return f"{self.provider} {self.event} {self.delivery_id}"
