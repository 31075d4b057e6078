"""ASGI entry point: gunicorn with uvicorn workers serves the UI, API and SSE streams."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
django_application = get_asgi_application()

# Webhook bodies past SLIPWAY_WEBHOOK_MAX_BYTES are not read (Django would spool all of it first).
from apps.webhooks.asgi import WebhookBodyLimit  # noqa: E402

application = WebhookBodyLimit(django_application)
