"""Under ASGI, a webhook body over the limit is not read past the limit, and still answered 413 and recorded."""

from __future__ import annotations

import asyncio
import json

import pytest
from django.core.asgi import get_asgi_application

from apps.deployments.models import Deployment
from apps.webhooks.asgi import WebhookBodyLimit
from apps.webhooks.models import WebhookDelivery
from tests.webhooks.conftest import fixture_bytes, provider_headers

pytestmark = pytest.mark.django_db(transaction=True)

LIMIT = 4096
CHUNK = 1024


def serve(path: str, headers: dict[str, str], chunks: list[bytes]) -> tuple[int, dict, list[int]]:
    """Send a request through the wrapped Django ASGI app; return (status, JSON body, sizes of the chunks it read)."""
    app = WebhookBodyLimit(get_asgi_application())
    pending = list(chunks)
    read: list[int] = []
    sent: list[dict] = []

    async def receive():
        if pending:
            body = pending.pop(0)
            read.append(len(body))
            return {"type": "http.request", "body": body, "more_body": bool(pending)}
        await asyncio.Event().wait()  # the client stays connected until the answer is sent

    async def send(message):
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"localhost"), *((k.lower().encode(), v.encode()) for k, v in headers.items())],
        "client": ("127.0.0.1", 40000),
        "server": ("127.0.0.1", 8000),
    }
    asyncio.run(app(scope, receive, send))
    start = next(m for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return start["status"], json.loads(body), read


@pytest.fixture
def small_limit(settings):
    settings.WEBHOOK_MAX_BYTES = LIMIT


def signed(app, body: bytes) -> dict[str, str]:
    return {"content-type": "application/json", **provider_headers("github", body, secret=app.webhook_secret, event="push")}


def test_a_chunked_body_over_the_limit_is_read_only_one_chunk_past_it(shop_on_master, small_limit):
    body = fixture_bytes("github/push") * 20  # about 140 KiB, sent as 1 KiB chunks without Content-Length
    chunks = [body[i : i + CHUNK] for i in range(0, len(body), CHUNK)]

    status, answer, read = serve(f"/webhooks/{shop_on_master.webhook_id}/", signed(shop_on_master, body), chunks)

    assert status == 413
    assert answer["error"]["code"] == "too_large"
    assert sum(read) == LIMIT + CHUNK  # of the ~140 chunks
    delivery = WebhookDelivery.objects.get()
    assert (delivery.outcome, delivery.status_code) == ("rejected", 413)
    assert not Deployment.objects.exists()


def test_a_body_declared_over_the_limit_is_not_read_at_all(shop_on_master, small_limit):
    body = fixture_bytes("github/push") * 20
    headers = {**signed(shop_on_master, body), "content-length": str(len(body))}
    chunks = [body[i : i + CHUNK] for i in range(0, len(body), CHUNK)]

    status, answer, read = serve(f"/webhooks/{shop_on_master.webhook_id}/", headers, chunks)

    assert status == 413
    assert answer["error"]["message"] == f"The body is {len(body)} bytes; deliveries may be at most {LIMIT} bytes."
    assert read == []
    assert WebhookDelivery.objects.get().status_code == 413


def test_a_body_within_the_limit_arrives_whole_in_chunks_and_deploys(shop_on_master, broker):
    body = fixture_bytes("github/push")
    chunks = [body[i : i + CHUNK] for i in range(0, len(body), CHUNK)]

    status, answer, read = serve(f"/webhooks/{shop_on_master.webhook_id}/", signed(shop_on_master, body), chunks)

    assert (status, answer["outcome"]) == (202, "deployed")
    assert sum(read) == len(body)
    assert Deployment.objects.get().commit_sha == answer["deployment"]["commit"]


def test_other_paths_are_read_as_django_reads_them(small_limit):
    body = b"x" * (LIMIT * 3)
    chunks = [body[i : i + CHUNK] for i in range(0, len(body), CHUNK)]
    app = WebhookBodyLimit(get_asgi_application())
    read: list[int] = []

    async def receive():
        chunk = chunks.pop(0) if chunks else None
        if chunk is None:
            await asyncio.Event().wait()
        read.append(len(chunk))
        return {"type": "http.request", "body": chunk, "more_body": bool(chunks)}

    async def send(message):
        pass

    scope = {"type": "http", "method": "POST", "path": "/healthz", "query_string": b"", "headers": [(b"host", b"localhost")]}
    asyncio.run(app(scope, receive, send))
    assert sum(read) == LIMIT * 3
