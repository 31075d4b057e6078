"""The webhook section of the app page: URL, per-provider setup steps and recent deliveries."""

from __future__ import annotations

from typing import Any

from apps.deployments.models import App
from apps.webhooks.selectors import recent_deliveries
from apps.webhooks.services import webhook_secret_rotate
from apps.webhooks.setup import setup_instructions, webhook_url

MASKED = "•" * 12
PROVIDER_NAMES = {"github": "GitHub", "gitlab": "GitLab", "gitea": "Gitea / Forgejo", "unknown": "unknown sender"}
DELIVERIES_SHOWN = 10


def for_app(app: App, *, new_secret: str = "") -> dict[str, Any]:
    """Return the webhook section's context; the secret appears only as ``new_secret``, right after it was made."""
    providers = setup_instructions(app, new_secret or MASKED)
    deliveries = recent_deliveries(app, limit=DELIVERIES_SHOWN)
    for delivery in deliveries:
        delivery.provider_name = PROVIDER_NAMES.get(delivery.provider, delivery.provider)  # type: ignore[attr-defined]
    return {
        "url": webhook_url(app),
        "providers": providers,
        "new_secret": new_secret,
        "deliveries": deliveries,
    }


def rotate(app: App, *, actor: Any = None) -> str:
    """Make a new webhook secret and return it; it is shown once."""
    return webhook_secret_rotate(app=app, actor=actor)
