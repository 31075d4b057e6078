"""Copy-paste setup steps for each provider: what the app page shows next to a new or rotated secret."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.urls import reverse

from apps.deployments.models import App


@dataclass(frozen=True)
class SetupField:
    label: str
    value: str
    secret: bool = False  # shown once, masked afterwards


@dataclass(frozen=True)
class ProviderSteps:
    provider: str  # github, gitlab or gitea
    name: str
    where: str  # where the form is in the provider's UI
    fields: tuple[SetupField, ...]
    steps: tuple[str, ...]
    note: str = ""


def webhook_url(app: App, *, public_url: str | None = None) -> str:
    """Return the absolute URL providers deliver ``app``'s webhooks to."""
    base = (public_url if public_url is not None else settings.PUBLIC_URL).rstrip("/")
    return base + reverse("webhook-receive", args=[app.webhook_id])


def setup_instructions(app: App, secret: str, *, public_url: str | None = None) -> list[ProviderSteps]:
    """Return the webhook form values and steps for GitHub, GitLab and Gitea/Forgejo."""
    url = webhook_url(app, public_url=public_url)
    branch = app.branch or "main"
    return [
        ProviderSteps(
            provider="github",
            name="GitHub",
            where="Repository → Settings → Webhooks → Add webhook",
            fields=(
                SetupField("Payload URL", url),
                SetupField("Content type", "application/json"),
                SetupField("Secret", secret, secret=True),
                SetupField("Which events", "Just the push event"),
            ),
            steps=(
                "Open the repository's Settings → Webhooks and choose Add webhook.",
                f"Paste the payload URL {url} and choose content type application/json.",
                "Paste the secret.",
                "Keep SSL verification enabled, choose “Just the push event” and keep Active checked.",
                "Save: GitHub sends a ping, which appears under Recent deliveries on both sides.",
            ),
            note=f"Pushes to {branch} deploy; other branches and tags are acknowledged and ignored.",
        ),
        ProviderSteps(
            provider="gitlab",
            name="GitLab",
            where="Project → Settings → Webhooks → Add new webhook",
            fields=(
                SetupField("URL", url),
                SetupField("Secret token", secret, secret=True),
                SetupField("Trigger", f"Push events (branch filter: {branch})"),
            ),
            steps=(
                "Open the project's Settings → Webhooks and choose Add new webhook.",
                f"Paste the URL {url}.",
                "Paste the secret into Secret token.",
                f"Under Trigger select Push events; optionally limit them to the branch {branch}.",
                "Keep SSL verification enabled and save.",
            ),
            note="GitLab always sends JSON. Its Test → Push events button sends the latest commits of the default branch.",
        ),
        ProviderSteps(
            provider="gitea",
            name="Gitea / Forgejo",
            where="Repository → Settings → Webhooks → Add webhook → Gitea (or Forgejo)",
            fields=(
                SetupField("Target URL", url),
                SetupField("HTTP method", "POST"),
                SetupField("POST content type", "application/json"),
                SetupField("Secret", secret, secret=True),
                SetupField("Trigger on", f"Push events (branch filter: {branch})"),
            ),
            steps=(
                "Open the repository's Settings → Webhooks, choose Add webhook and pick Gitea (or Forgejo).",
                f"Paste the target URL {url}, keep HTTP method POST and content type application/json.",
                "Paste the secret.",
                f"Under Trigger on choose Push events; the branch filter may be {branch}.",
                "Keep Active checked and save.",
            ),
            note=(
                "If Slipway runs on a private network, the Gitea or Forgejo administrator must allow it: "
                "set [webhook] ALLOWED_HOST_LIST in app.ini (for example to private, or to Slipway's host name)."
            ),
        ),
    ]
