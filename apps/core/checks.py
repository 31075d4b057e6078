"""System checks: a wrong encryption key stops startup with a clear message."""

from __future__ import annotations

from typing import Any

from django.core.checks import Error, Tags, register
from django.db import DatabaseError


@register(Tags.database)
def check_stored_secrets_decrypt(app_configs: Any, **kwargs: Any) -> list[Error]:
    """Decrypt one stored secret to prove the configured keys are the right ones."""
    from apps.core.crypto import DecryptionError
    from apps.deployments.models import App

    try:
        app = App.objects.exclude(webhook_secret="").only("webhook_secret").first()
    except DatabaseError:
        return []  # no tables yet: nothing is stored to check against
    except DecryptionError as e:
        return [Error(str(e), hint="Restore the key that was in use, or put it after the new one.", id="slipway.E001")]
    del app
    return []
