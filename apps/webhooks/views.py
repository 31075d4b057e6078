"""The webhook endpoint: ``POST /webhooks/<webhook_id>/`` from GitHub, GitLab, Gitea or Forgejo.

Checks run cheapest and least revealing first: the app, the method, the declared size, the
provider, the actual size, the signature over the raw bytes, then the content type and the
payload. Every answer is JSON; errors have the API's shape
``{"error": {"code": …, "message": …, "field": …}}``. Every delivery to a known app is
recorded, rejected ones included, unless the database itself is down.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.db import DatabaseError, InterfaceError, OperationalError
from django.http import HttpRequest, JsonResponse
from django.urls import reverse
from django.views.decorators.csrf import csrf_exempt

from apps.core.crypto import DecryptionError
from apps.core.fields import Secret
from apps.deployments.models import App, Deployment
from apps.webhooks import parsing, providers, selectors, services
from apps.webhooks.models import WebhookDelivery
from apps.webhooks.services import Receipt

log = logging.getLogger(__name__)

# How long a provider should wait before retrying when the database is unreachable.
RETRY_AFTER_SECONDS = 30
WEBHOOK_ID_MAX = 64


class Rejection(Exception):
    """A delivery refused with ``status``; the message says what to fix."""

    def __init__(self, status: int, code: str, message: str, field: str | None = None, signature: str = "missing") -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.field, self.signature = status, code, message, field, signature


def error_response(status: int, code: str, message: str, field: str | None = None) -> JsonResponse:
    return JsonResponse({"error": {"code": code, "message": message, "field": field}}, status=status)


def deployment_url(deployment: Deployment) -> str:
    """Return the absolute URL of the deployment's page."""
    return settings.PUBLIC_URL + reverse("deployment-detail", kwargs={"name": deployment.app.name, "number": deployment.number})


@csrf_exempt
def receive(request: HttpRequest, webhook_id: str) -> JsonResponse:
    try:
        return _receive(request, webhook_id)
    except (OperationalError, InterfaceError) as e:
        log.warning("webhook delivery refused with 503: the database is unreachable (%s)", type(e).__name__)
        response = error_response(503, "unavailable", "The database is unreachable; retry the delivery later.")
        response["Retry-After"] = str(RETRY_AFTER_SECONDS)
        return response
    except DecryptionError as e:
        log.error("webhook delivery for %r failed: %s", webhook_id, e)
        return error_response(
            500, "server_error", "This app's webhook secret cannot be decrypted; the operator must check SLIPWAY_ENCRYPTION_KEYS."
        )


def _receive(request: HttpRequest, webhook_id: str) -> JsonResponse:
    try:
        if len(webhook_id) > WEBHOOK_ID_MAX:
            raise App.DoesNotExist
        app = selectors.app_for_webhook(webhook_id=webhook_id)
    except App.DoesNotExist:
        return error_response(404, "not_found", "No app has this webhook URL; copy it again from the app's page.")

    headers = request.headers
    provider = providers.detect_provider(headers) or ""
    event = providers.event_name(provider, headers) if provider else ""
    delivery_id = providers.delivery_id(provider, headers) if provider else ""
    try:
        receipt = _handle(request, app, provider, event, delivery_id)
    except Rejection as r:
        _record_rejection(app, provider, event, delivery_id, r)
        response = error_response(r.status, r.code, r.message, r.field)
        if r.status == 405:
            response["Allow"] = "POST"
        return response
    return _answer(receipt)


def _handle(request: HttpRequest, app: App, provider: str, event: str, delivery_id: str) -> Receipt:
    if request.method != "POST":
        raise Rejection(
            405, "method_not_allowed", f"Method {request.method} is not allowed: providers deliver webhooks with POST."
        )
    limit = settings.WEBHOOK_MAX_BYTES
    declared = request.META.get("CONTENT_LENGTH") or ""
    if declared:
        if not declared.isdigit():
            raise Rejection(400, "invalid", "Content-Length is not a number.", "Content-Length")
        if int(declared) > limit:
            raise Rejection(413, "too_large", f"The body is {int(declared)} bytes; deliveries may be at most {limit} bytes.")
    if not provider:
        raise Rejection(
            400,
            "unknown_provider",
            "The headers name no known provider: expected X-GitHub-Event, X-Gitlab-Event or X-Gitea-Event.",
            "X-GitHub-Event",
        )
    # Read at most one byte more than allowed, whatever the headers claimed.
    body = request.read(limit + 1)
    if len(body) > limit:
        raise Rejection(413, "too_large", f"The body is larger than {limit} bytes, the most a delivery may be.")

    verdict = providers.verify(provider, headers=request.headers, body=body, secret=Secret(app.webhook_secret))
    if not verdict.ok:
        raise Rejection(
            401, "signature_" + verdict.signature, verdict.message, providers.SIGNATURE_HEADERS[provider][0], verdict.signature
        )

    if not event:
        header = providers.EVENT_HEADERS[provider][0]
        raise Rejection(400, "invalid", f"The {header} header is missing.", header, "valid")
    try:
        payload = parsing.decode_body(provider, request.content_type or "", body)
        push = parsing.parse(provider, event, payload)
    except parsing.UnsupportedContentType as e:
        raise Rejection(415, "unsupported_media_type", str(e), "Content-Type", "valid") from None
    except parsing.PayloadError as e:
        raise Rejection(400, "invalid", e.message, e.field, "valid") from None
    return services.delivery_receive(app=app, provider=provider, delivery_id=delivery_id, push=push)


def _record_rejection(app: App, provider: str, event: str, delivery_id: str, r: Rejection) -> None:
    try:
        services.delivery_record(
            app=app,
            provider=provider,
            event=event,
            delivery_id=delivery_id,
            signature=r.signature,
            outcome=WebhookDelivery.Outcome.REJECTED,
            reason=f"{r.status}: {r.message}",
            status_code=r.status,
        )
    except DatabaseError as e:
        # The answer to the provider matters more than the record of a refused delivery.
        log.warning("could not record a rejected webhook delivery for %s: %s", app.name, type(e).__name__)


def _answer(receipt: Receipt) -> JsonResponse:
    body: dict[str, object] = {"outcome": receipt.outcome, "reason": receipt.reason}
    if receipt.delivery is not None and receipt.delivery.event == "ping" and receipt.delivery.provider == "github":
        body["pong"] = True
    if receipt.deployment is not None:
        d = receipt.deployment
        body["deployment"] = {"number": d.number, "status": d.status, "commit": d.commit_sha, "url": deployment_url(d)}
    return JsonResponse(body, status=receipt.status_code)
